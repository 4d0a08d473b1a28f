// Placeholder: backward formulas for the indexing group land here.
export {};
