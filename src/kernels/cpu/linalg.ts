// Placeholder: this group's CPU kernels land here.
export {};
