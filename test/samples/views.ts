import type { OpSample } from './types.js';

// Placeholder: the views group's samples land here.
export const samples: OpSample[] = [];
