// Placeholder: backward formulas for the linalg group land here.
export {};
