import type { OpSample } from './types.js';

// Placeholder: the pointwise group's samples land here.
export const samples: OpSample[] = [];
