/**
 * scaled_dot_product_attention on cuda. The fused flash-style kernels (flash-run.ts) take every call
 * they support (no [L, S] matrix); the rest (dropout, head dims that are not a multiple of 8/4 or
 * above 256, e != ev, more than 4 batch dims, float64 masks, pre-sm_80 fp16/bf16, and decode steps:
 * at most 16 query rows over more than 512 (f32) / 2048 (fp16/bf16) keys) run the math
 * path below, composed from the library's own kernels:
 * S = scale * Q K^T by cuBLASLt with a float32 result (fp32 scores even for fp16/bf16 inputs), the
 * causal or user mask applied by the pointwise generator, a float32 row softmax, then P V by cuBLASLt
 * with P in the inputs' dtype. It materialises [batch, L, S] scores, so memory grows with L * S.
 * Grouped-query heads are expanded to the query
 * heads (one copy of K and V). Dropout (p > 0) is not supported on cuda yet.
 */
import { attentionGeometry, scaledDotProductAttention } from '../../ops/defs/nn.js';
import { registerKernel } from '../../ops/registry.js';
import { contiguousStrides, isContiguousStrides, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { copyTensor } from './core.js';
import { allocOut } from './device.js';
import { runGemm } from './linalg.js';
import { runPointwise } from './pointwise-run.js';
import { softmaxInto } from './softmax-norm.js';
import { triMask } from './masks.js';
import { runFlashAttention } from './flash-run.js';

interface Map_ {
  strides: number[];
  divisors: number[];
}

/** `t` as [...batch, rows, cols] following the geometry's batch map (GQA heads expanded by a copy). */
function batchView(t: Tensor, batch: readonly number[], map: Map_, temps: Tensor[]): Tensor {
  const rowS = t.strides[t.ndim - 2]!;
  const colS = t.strides[t.ndim - 1]!;
  const rows = t.shape[t.ndim - 2]!;
  const cols = t.shape[t.ndim - 1]!;
  const g = map.divisors.findIndex((d) => d > 1);
  if (g < 0) return new Tensor(t.storage, t.dtype, [...batch, rows, cols], [...map.strides, rowS, colS], t.offset);
  // Grouped-query: head h reads kv head floor(h / groups). View [.., hk, groups, rows, cols] with a
  // stride-0 group dim, copy it dense, and read it back as [.., hOut, rows, cols].
  const groups = map.divisors[g]!;
  const shape5 = [...batch.slice(0, g), batch[g]! / groups, groups, ...batch.slice(g + 1), rows, cols];
  const strides5 = [...map.strides.slice(0, g), map.strides[g]!, 0, ...map.strides.slice(g + 1), rowS, colS];
  const dense = allocOut({ shape: shape5, strides: contiguousStrides(shape5), dtype: t.dtype, device: t.device });
  copyTensor(dense, new Tensor(t.storage, t.dtype, shape5, strides5, t.offset));
  temps.push(dense);
  return new Tensor(dense.storage, dense.dtype, [...batch, rows, cols], contiguousStrides([...batch, rows, cols]), 0);
}

registerKernel(scaledDotProductAttention, 'cuda', (ctx, query, key, value, attnMask, dropoutArg, causalArg, scaleArg) => {
  const dropoutP = dropoutArg as number;
  const isCausal = causalArg as boolean;
  const scale = scaleArg as number | null;
  if (dropoutP > 0) throw new Error(`scaledDotProductAttention: dropoutP ${dropoutP} > 0 is not supported on ${query.device.toString()} yet (use dropoutP 0, or the cpu)`);
  const geo = attentionGeometry(query, key, value, attnMask, dropoutP, isCausal, scale);
  const out = allocOut(ctx.out);
  const { batch, l, s, e, ev } = geo;
  if (numel(batch) * l * ev === 0) return out;
  if (s === 0) return runPointwise('fill', 's0', out, [], [0], out.dtype);
  if (runFlashAttention(out, geo, query, key, value, attnMask, dropoutP, isCausal, scale)) return out;
  const temps: Tensor[] = [];
  try {
    const q = batchView(query, batch, geo.q, temps);
    const k = batchView(key, batch, geo.k, temps);
    const v = batchView(value, batch, geo.v, temps);
    // K^T as a view: [.., e, s] with the row/col strides swapped.
    const kt = new Tensor(k.storage, k.dtype, [...batch, e, s], [...k.strides.slice(0, -2), k.strides[k.ndim - 1]!, k.strides[k.ndim - 2]!], k.offset);
    temps.push(q, k, v, kt);
    const scoresShape = [...batch, l, s];
    // Scores in float32 for every dtype but float64, which keeps double precision (a float32
    // scores buffer also made cuBLASLt refuse the float64 product: float64 in, float32 out).
    const scoreDtype = query.dtype === 'float64' ? 'float64' : 'float32';
    const scores = allocOut({ shape: scoresShape, strides: contiguousStrides(scoresShape), dtype: scoreDtype, device: out.device });
    temps.push(scores);
    runGemm({ op: 'scaledDotProductAttention', out: scores, a: q, b: kt, batch, M: l, N: s, K: e, alpha: scale ?? 1 / Math.sqrt(e) });
    if (isCausal) runPointwise('causalMask', '((b != 0) ? a : -s0)', scores, [scores, triMask(l, s, 0, true, out.device)], [Infinity], scoreDtype);
    if (attnMask && geo.maskStrides) {
      const m = new Tensor(attnMask.storage, attnMask.dtype, scoresShape, geo.maskStrides, attnMask.offset);
      temps.push(m);
      if (attnMask.dtype === 'bool') runPointwise('attnMask', '((b != 0) ? a : -s0)', scores, [scores, m], [Infinity], scoreDtype);
      else runPointwise('attnMask', 'a + b', scores, [scores, m], [], scoreDtype);
    }
    const probs = allocOut({ shape: scoresShape, strides: contiguousStrides(scoresShape), dtype: value.dtype, device: out.device });
    temps.push(probs);
    softmaxInto('softmax', probs, scores, -1);
    // The op's cuda output is [.., L, H, E] memory for rank >= 4 (attentionOutStrides): the GEMM
    // writes a contiguous temporary that one copy lays out.
    const oShape = [...batch, l, ev];
    const direct = isContiguousStrides(out.shape, out.strides);
    const o = direct ? new Tensor(out.storage, out.dtype, oShape, contiguousStrides(oShape), out.offset) : allocOut({ shape: oShape, strides: contiguousStrides(oShape), dtype: out.dtype, device: out.device });
    temps.push(o);
    runGemm({ op: 'scaledDotProductAttention', out: o, a: probs, b: v, batch, M: l, N: ev, K: s });
    if (!direct) copyTensor(out, o);
  } finally {
    for (const t of temps) t.dispose();
  }
  return out;
});
