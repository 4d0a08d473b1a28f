/** Registers every backward formula. */
import './core.js';
import './views.js';
import './creation.js';
import './pointwise.js';
import './reduction.js';
import './linalg.js';
import './indexing.js';
import './nn.js';
import './llm.js';
import './shape-extra.js';
