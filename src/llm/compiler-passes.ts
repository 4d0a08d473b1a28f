/**
 * Registers the LLM library's graph rewrites and its q/k-norm + rotary pass with the compiler
 * (src/compile/passes/extensions.ts). The library sits above the compiler in the layer order, so it
 * plugs in here instead of the compiler importing it; loading kiln.llm (src/index.ts does) is what
 * makes kiln.compile rewrite to library ops.
 */
import { registerGraphPass, registerRewriteRules } from '../compile/passes/extensions.js';
import { fuseQkNormRotary } from './qk-norm-rotary-pass.js';
import { autoRewriteRules, llmRewriteRules } from './rewrites.js';

registerRewriteRules('library', llmRewriteRules);
registerRewriteRules('auto', autoRewriteRules);
registerGraphPass('qkNormRotary', (g) => fuseQkNormRotary(g).graph);
