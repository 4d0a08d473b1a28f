import type { OpSample } from './types.js';

// Placeholder: the linalg group's samples land here.
export const samples: OpSample[] = [];
