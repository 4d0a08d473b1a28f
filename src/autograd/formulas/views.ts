// Placeholder: backward formulas for the views group land here.
export {};
