// Placeholder: backward formulas for the pointwise group land here.
export {};
