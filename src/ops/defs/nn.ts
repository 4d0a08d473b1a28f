// Placeholder: this group's op definitions land here.
export {};
