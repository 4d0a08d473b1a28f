import type { OpSample } from './types.js';

// Placeholder: the indexing group's samples land here.
export const samples: OpSample[] = [];
