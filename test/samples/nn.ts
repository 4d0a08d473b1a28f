import type { OpSample } from './types.js';

// Placeholder: the nn group's samples land here.
export const samples: OpSample[] = [];
