// Placeholder: backward formulas for the creation group land here.
export {};
