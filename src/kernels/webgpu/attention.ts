/**
 * webgpu scaled_dot_product_attention. Without dropout it is the flash kernels (flash-attention.ts:
 * an online softmax over key blocks, no [L, S] scores stored) for head dims up to 256; otherwise
 * (dropout, larger head dims, a 64-bit mask) the math path: scores = q k^T (the tiled GEMM),
 * times the scale, plus the mask (causal: an additive 0 / -inf [L, S] table made on the host and
 * uploaded; bool: where(mask, scores, -inf); floating: added), softmax over the keys (the fused
 * row kernel, f32 inside), then p v (the GEMM). Grouped-query keys and values are repeated to the
 * query heads (an expand and a copy), as torch's math path does. A row whose every key is masked
 * is NaN, as on the cpu. Dropout multiplies the probabilities by a host-drawn mask (dropout.ts),
 * drawn in the CPU kernel's order.
 */
import { add } from '../../ops/defs/core.js';
import { matmul } from '../../ops/defs/linalg.js';
import { attentionGeometry, scaledDotProductAttention } from '../../ops/defs/nn.js';
import { mul, where } from '../../ops/defs/pointwise.js';
import { softmax } from '../../ops/defs/reduction.js';
import { expand, reshape, transpose, unsqueeze } from '../../ops/defs/views.js';
import { dispatch } from '../../ops/dispatch.js';
import { registerKernel } from '../../ops/registry.js';
import type { Generator } from '../../tensor/random.js';
import { Tensor } from '../../tensor/tensor.js';
import { copyTensor } from './core.js';
import { allocOut, webgpu } from './device.js';
import { attentionDropout } from './dropout.js';
import { flashAttention } from './flash-attention.js';

/** `t` [..., hk, S, E] repeated to [..., h, S, E] (each kv head serves h / hk query heads). */
function repeatHeads(t: Tensor, h: number, temps: Tensor[]): Tensor {
  const r = t.ndim;
  const hk = t.shape[r - 3]!;
  if (hk === h || hk === 1) return t;
  const u = dispatch(unsqueeze, t, r - 2) as Tensor;
  const shape = [...t.shape.slice(0, r - 2), h / hk, ...t.shape.slice(r - 2)];
  const e = dispatch(expand, u, shape) as Tensor;
  const out = dispatch(reshape, e, [...t.shape.slice(0, r - 3), h, ...t.shape.slice(r - 2)]) as Tensor;
  temps.push(u, e, out);
  return out;
}

/** The causal additive mask [L, S] (key j is seen by query i when j <= i: torch's top-left alignment). */
function causalMask(l: number, s: number, like: Tensor): Tensor {
  const data = new Float32Array(l * s);
  for (let i = 0; i < l; i++) for (let j = i + 1; j < s; j++) data[i * s + j] = -Infinity;
  const f32 = allocOut({ shape: [l, s], strides: [s, 1], dtype: 'float32', device: like.device });
  webgpu().copyHostToDevice(f32.storage.buffer, 0, new Uint8Array(data.buffer));
  if (like.dtype === 'float32') return f32;
  try {
    return copyTensor(allocOut({ shape: [l, s], strides: [s, 1], dtype: like.dtype, device: like.device }), f32);
  } finally {
    f32.dispose();
  }
}

registerKernel(scaledDotProductAttention, 'webgpu', (ctx, query, key, value, attnMask, dropoutArg, causalArg, scaleArg, _enableGqa, genArg) => {
  const dropoutP = dropoutArg as number;
  const isCausal = causalArg as boolean;
  const scale = scaleArg as number | null;
  const mask = attnMask ?? null;
  const geo = attentionGeometry(query, key, value, mask, dropoutP, isCausal, scale);
  if (numelOf(ctx.out.shape) === 0 || geo.s === 0) return allocOut(ctx.out, true);
  if (dropoutP === 0) {
    const flash = flashAttention(ctx.out, query, key, value, mask, isCausal, scale ?? 1 / Math.sqrt(geo.e), geo);
    if (flash !== null) return flash;
  }
  const temps: Tensor[] = [];
  const keep = (t: Tensor): Tensor => (temps.push(t), t);
  try {
    const h = query.ndim >= 3 ? query.shape[query.ndim - 3]! : 1;
    const k = key.ndim >= 3 && query.ndim >= 3 ? repeatHeads(key, h, temps) : key;
    const v = value.ndim >= 3 && query.ndim >= 3 ? repeatHeads(value, h, temps) : value;
    const kT = keep(dispatch(transpose, k, -2, -1) as Tensor);
    let scores = keep(dispatch(matmul, query, kT) as Tensor);
    scores = keep(dispatch(mul, scores, scale ?? 1 / Math.sqrt(geo.e)) as Tensor);
    if (isCausal) scores = keep(dispatch(add, scores, keep(causalMask(geo.l, geo.s, scores)), 1) as Tensor);
    else if (mask !== null && mask.dtype === 'bool') scores = keep(dispatch(where, mask, scores, -Infinity) as Tensor);
    else if (mask !== null) scores = keep(dispatch(add, scores, mask, 1) as Tensor);
    let p = keep(dispatch(softmax, scores, -1, null) as Tensor);
    if (dropoutP > 0) p = keep(dispatch(mul, p, keep(attentionDropout(p.shape, dropoutP, isCausal, (genArg ?? null) as Generator | null, p))) as Tensor);
    const o = dispatch(matmul, p, v) as Tensor;
    const same = o.shape.length === ctx.out.shape.length && o.shape.every((d, i) => d === ctx.out.shape[i]) && o.strides.every((st, i) => st === ctx.out.strides[i] || o.shape[i] === 1);
    if (same) return o;
    temps.push(o);
    return copyTensor(allocOut(ctx.out), o);
  } finally {
    for (const t of temps) t.dispose();
  }
});

function numelOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

