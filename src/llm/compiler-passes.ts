/**
 * Registers the LLM library's graph rewrites and its two graph passes with the compiler
 * (src/compile/passes/extensions.ts): the q/k-norm + rotary fusion and its decode-step sequel,
 * the rotary fused with the paged-cache write (on by default on cuda; KILN_QK_NORM_ROTARY_CACHE=0 turns it off) and, on webgpu,
 * that write fused with the paged attention after it (KILN_WEBGPU_QK_ATTN), and the MLP's
 * gate/up projection fused with silu * mul (on by default on cuda; KILN_LINEAR_SILU_MUL=0 turns it off), and
 * a linear fused with the GELU after it (where a device has the kernel: webgpu; KILN_LINEAR_GELU=0 turns it off), and
 * the residual add + RMSNorm fused into the linear after it (on webgpu at one row by default; KILN_ADD_RMSNORM_LINEAR=1: every size the kernels take, cuda too). The library
 * sits above the compiler in the layer order, so it plugs in here instead of the compiler
 * importing it; loading kiln.llm (src/index.ts does) is what makes kiln.compile rewrite to library ops.
 */
import { registerGraphPass, registerRewriteRules } from '../compile/passes/extensions.js';
import { fuseQkNormRotary } from './qk-norm-rotary-pass.js';
import { fuseQkNormRotaryCache } from './qk-norm-rotary-cache-pass.js';
import { fuseQkNormRotaryAttention } from './qk-norm-rotary-attention-pass.js';
import { fuseLinearSiluMul } from './linear-silu-mul-pass.js';
import { fuseLinearGelu } from './linear-gelu-pass.js';
import { addRmsNormLinearFires, fuseAddRmsNormLinear } from './add-rms-norm-linear-pass.js';
import { autoRewriteRules, llmRewriteRules } from './rewrites.js';

registerRewriteRules('library', llmRewriteRules);
registerRewriteRules('auto', autoRewriteRules);
registerGraphPass('qkNormRotary', (g) => fuseQkNormRotary(g).graph);
// Its webgpu sequel (KILN_WEBGPU_QK_ATTN) runs in the same slot: the cache write with the attention after it.
registerGraphPass('qkNormRotaryCache', (g) => fuseQkNormRotaryAttention(fuseQkNormRotaryCache(g).graph).graph);
registerGraphPass('linearSiluMul', (g) => fuseLinearSiluMul(g).graph);
registerGraphPass('linearGelu', (g) => fuseLinearGelu(g).graph);
registerGraphPass('addRmsNormLinear', (g) => fuseAddRmsNormLinear(g).graph);
// kiln.compile's default (KILN_ADD_RMSNORM_LINEAR unset): webgpu at one row only, where the H200 A/B
// measured a gain (batch-1 decode step 2.57 -> 2.35 ms; at 8 rows decode fell from ~2,200 to ~1,300 tok/s).
registerGraphPass('addRmsNormLinearWebgpu', (g) => fuseAddRmsNormLinear(g, (d, dtype, rows, k) => d === 'webgpu' && rows === 1 && addRmsNormLinearFires(d, dtype, rows, k)).graph);
