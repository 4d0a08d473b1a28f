// Placeholder: backward formulas for the reduction group land here.
export {};
