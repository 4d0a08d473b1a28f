// Placeholder: this group's public functions and Tensor methods land here.
export {};
