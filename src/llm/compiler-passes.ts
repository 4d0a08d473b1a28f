/**
 * Registers the LLM library's graph rewrites and its q/k-norm + rotary pass with the compiler
 * (src/compile/passes/extensions.ts). The library sits above the compiler in the layer order, so it
 * plugs in here instead of the compiler importing it; loading kiln.llm (src/index.ts does) is what
 * makes kiln.compile rewrite to library ops. KILN_QK_NORM_ROTARY_CACHE=1 (read when a function is
 * compiled, as the slot runs) adds the decode-step fusion of the rotary with the cache write.
 */
import { registerGraphPass, registerRewriteRules } from '../compile/passes/extensions.js';
import { getOption } from '../runtime/config.js';
import { fuseQkNormRotary } from './qk-norm-rotary-pass.js';
import { fuseQkNormRotaryCache } from './qk-norm-rotary-cache-pass.js';
import { autoRewriteRules, llmRewriteRules } from './rewrites.js';

registerRewriteRules('library', llmRewriteRules);
registerRewriteRules('auto', autoRewriteRules);
registerGraphPass('qkNormRotary', (g) => {
  const fused = fuseQkNormRotary(g).graph;
  return getOption('KILN_QK_NORM_ROTARY_CACHE') ? fuseQkNormRotaryCache(fused).graph : fused;
});
