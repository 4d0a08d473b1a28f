import type { OpSample } from './types.js';

// Placeholder: the reduction group's samples land here.
export const samples: OpSample[] = [];
