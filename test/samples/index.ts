import type { OpSample } from './types.js';
import { samples as core } from './core.js';
import { samples as creation } from './creation.js';
import { samples as views } from './views.js';
import { samples as pointwise } from './pointwise.js';
import { samples as reduction } from './reduction.js';
import { samples as linalg } from './linalg.js';
import { samples as indexing } from './indexing.js';
import { samples as nn } from './nn.js';
import { samples as llm } from './llm.js';
import { samples as shapeExtra } from './shape-extra.js';

export const allSamples: OpSample[] = [...core, ...creation, ...views, ...pointwise, ...reduction, ...linalg, ...indexing, ...nn, ...llm, ...shapeExtra];
