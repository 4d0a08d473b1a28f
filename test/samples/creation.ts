import type { OpSample } from './types.js';

// Placeholder: the creation group's samples land here.
export const samples: OpSample[] = [];
