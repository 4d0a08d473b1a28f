// Placeholder: backward formulas for the nn group land here.
export {};
