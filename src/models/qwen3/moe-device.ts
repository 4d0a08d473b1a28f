/**
 * The Qwen3-MoE block's expert computation without a host read, used while kiln.compile traces
 * the block (issue #18 item 4b). The eager block groups tokens by expert on the host, which a
 * trace cannot do (the expert ids are data): that was a graph break. Two device-side forms:
 *
 * - grad off (inference programs): llm.topkSoftmax routes and llm.fusedMoe runs each token
 *   through its k experts only, over the experts' weights stacked into w13 [E, 2I, H] (gate rows
 *   then up rows) and w2 [E, H, I]. Traced, the stacking cats are made compile-time constants by
 *   passes/lifted-cat.ts (copied once, refreshed when a weight is written), not a copy of every
 *   expert per call; the FLOPs are the sparse k/E of the dense form. fusedMoe's
 *   kernels count tokens per expert themselves (on cuda a host-synchronising op, which the CUDA
 *   graph splitter already cuts around).
 * - grad on (a compiled training step): every expert on every token, weighted by the token's
 *   routing weight for it (0 where not chosen). Exact, E/k times the expert FLOPs, but built from
 *   ordinary differentiable ops; fusedMoe's backward re-runs its reference over detached inputs,
 *   which a joint trace cannot capture.
 */
import { cat } from '../../api/indexing.js';
import { fusedMoe, topkSoftmax } from '../../api/llm.js';
import { add } from '../../api/core.js';
import { eq, mul, where } from '../../api/pointwise.js';
import { sum } from '../../api/reduction.js';
import { reshape } from '../../api/views.js';
import { isGradEnabled } from '../../autograd/index.js';
import type { Linear } from '../../nn/layers/basic.js';
import type { Tensor } from '../../tensor/tensor.js';

/** What the device paths need of the block (Qwen3SparseMoeBlock; no import cycle through modeling.ts). */
export interface MoeBlockLike {
  readonly numExperts: number;
  readonly topK: number;
  readonly normTopkProb: boolean;
  readonly gate: Linear;
  expert(e: number): { gate_proj: Linear; up_proj: Linear; down_proj: Linear; forward(x: Tensor): Tensor };
  route(x: Tensor): { weights: Tensor; experts: Tensor };
}

/** The block's output for flat tokens [N, H], computed on the tokens' device with no host read. */
export function moeOnDevice(block: MoeBlockLike, flat: Tensor): Tensor {
  return isGradEnabled() ? moeDense(block, flat) : moeFused(block, flat);
}

/** Sparse: fusedMoe over stacked expert weights (inference). */
function moeFused(block: MoeBlockLike, flat: Tensor): Tensor {
  const E = block.numExperts;
  const { weights, ids } = topkSoftmax(block.gate.forward(flat), block.topK, block.normTopkProb);
  const gu: Tensor[] = [];
  const down: Tensor[] = [];
  for (let e = 0; e < E; e++) {
    const m = block.expert(e);
    gu.push(m.gate_proj.weight, m.up_proj.weight);
    down.push(m.down_proj.weight);
  }
  const [inter, hidden] = gu[0]!.shape as [number, number];
  const w13 = reshape(cat(gu, 0), [E, 2 * inter, hidden]);
  const w2 = reshape(cat(down, 0), [E, hidden, inter]);
  return fusedMoe(flat, w13, w2, weights, ids, 'silu');
}

/** Dense: every expert on every token, weighted by its routing weight (differentiable). */
function moeDense(block: MoeBlockLike, flat: Tensor): Tensor {
  const { weights, experts } = block.route(flat);
  let out: Tensor | undefined;
  for (let e = 0; e < block.numExperts; e++) {
    // [N, 1]: the token's weight for expert e (a token picks an expert at most once).
    const we = sum(where(eq(experts, e), weights, 0), -1, true);
    const y = mul(block.expert(e).forward(flat), we);
    out = out === undefined ? y : add(out, y);
  }
  return out!;
}
