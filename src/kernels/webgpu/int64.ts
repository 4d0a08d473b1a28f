/**
 * int64 addition and subtraction on webgpu (add, add_, sub, sub_ with an int64 result). WGSL has
 * no 64-bit integers; an int64 tensor on webgpu is its little-endian u32 word pairs (core.ts), so
 * a ± b is two int32 pointwise programs over views of those words: first the high words,
 * hi = a.hi ± b.hi ± (the carry out of, or borrow into, the low words), then the low words,
 * lo = a.lo ± b.lo, all in wrapping u32 arithmetic, so the result is exact modulo 2^64 as on the
 * cpu. The high words go first because the carry reads a's low words, which an in-place op's low
 * pass overwrites (each pass reads an element's words before writing them, in the same invocation).
 *
 * `other` may be an int64 tensor, another integer or bool tensor (cast to int64 first, as the
 * promotion says), or a scalar (a number, or a one-element cpu tensor), which is multiplied by
 * alpha on the host exactly (BigInt) and split into two word literals. A tensor other takes alpha
 * 1 or -1 only: a 64-bit product would need more than a carry (BatchNorm's counter, the reason this
 * exists, is `add_(numBatchesTracked, 1)`).
 */
import type { ScalarValue } from '../../ops/schema.js';
import { broadcastStrides, contiguousStrides, fmtShape } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { copyTensor } from './core.js';
import { allocOut } from './device.js';
import { runPointwise } from './pointwise-run.js';

/** Word `half` (0 low, 1 high) of each element of the int64 tensor `t` over `shape` (broadcast), as an int32 view. */
function word(t: Tensor, half: 0 | 1, shape: readonly number[]): Tensor {
  const st = broadcastStrides(t.shape, t.strides, shape);
  return new Tensor(t.storage, 'int32', shape, st.map((s) => 2 * s), 2 * t.offset + half);
}

const u = (v: string): string => `bitcast<u32>(${v})`;
const i = (v: string): string => `bitcast<i32>(${v})`;

/**
 * out = self + sign * alpha * other, int64, for the ops add/add_ (sign 1) and sub/sub_ (sign -1);
 * `out` may be `self` (in place). Returns out.
 */
export function int64AddSub(op: string, out: Tensor, self: Tensor, other: Tensor | ScalarValue, alpha: ScalarValue, sign: 1 | -1): Tensor {
  if (out.dtype !== 'int64') throw new Error(`${op}: int64AddSub writes int64, got ${out.dtype}`);
  const temps: Tensor[] = [];
  const asInt64 = (t: Tensor): Tensor => {
    if (t.dtype === 'int64') return t;
    const c = copyTensor(allocOut({ shape: t.shape, strides: contiguousStrides(t.shape), dtype: 'int64', device: out.device }), t);
    temps.push(c);
    return c;
  };
  const a = asInt64(self);
  const scalar = !(other instanceof Tensor) ? other : other.device.type === 'cpu' && other.numel() === 1 ? (other.item() as ScalarValue) : null;
  const al = BigInt(Math.trunc(Number(alpha)));
  const lo = word(out, 0, out.shape);
  const hi = word(out, 1, out.shape);
  const alo = word(a, 0, out.shape);
  const ahi = word(a, 1, out.shape);
  try {
    if (scalar !== null) {
      // Exact on the host: the scalar (an integer, as the meta checks) times alpha, modulo 2^64.
      const s = BigInt.asUintN(64, BigInt(Math.trunc(Number(scalar))) * al * BigInt(sign));
      const slo = Number(s & 0xffffffffn);
      const shi = Number(s >> 32n);
      // hi = a.hi + s.hi + carry(a.lo + s.lo): the low sum wrapped below a.lo.
      runPointwise(op, hi, [ahi, alo], () => i(`${u('v0')} + ${shi}u + select(0u, 1u, ${u('v1')} + ${slo}u < ${u('v1')})`));
      runPointwise(op, lo, [alo], () => i(`${u('v0')} + ${slo}u`));
      return out;
    }
    const o = other as Tensor;
    if (o.device.type !== out.device.type) throw new Error(`${op}: expected webgpu tensors (or cpu scalars), got a ${fmtShape(o.shape)} tensor on ${o.device.toString()}`);
    const s = Number(al) * sign;
    if (s !== 1 && s !== -1) throw new RangeError(`${op}: an int64 tensor ${op.startsWith('sub') ? 'minus' : 'plus'} alpha (${String(alpha)}) * a tensor runs on webgpu with alpha 1 or -1 only (int64 words are added with a carry; a 64-bit product is not implemented); got ${fmtShape(out.shape)} int64 and ${fmtShape(o.shape)} ${o.dtype}`);
    const b = asInt64(o);
    const blo = word(b, 0, out.shape);
    const bhi = word(b, 1, out.shape);
    try {
      // Inputs v0 a.hi, v1 b.hi, v2 a.lo, v3 b.lo.
      const hiExpr = s === 1 ? `${u('v0')} + ${u('v1')} + select(0u, 1u, ${u('v2')} + ${u('v3')} < ${u('v2')})` : `${u('v0')} - ${u('v1')} - select(0u, 1u, ${u('v2')} < ${u('v3')})`;
      runPointwise(op, hi, [ahi, bhi, alo, blo], () => i(hiExpr));
      runPointwise(op, lo, [alo, blo], () => i(`${u('v0')} ${s === 1 ? '+' : '-'} ${u('v1')}`));
    } finally {
      blo.dispose();
      bhi.dispose();
    }
    return out;
  } finally {
    for (const t of [lo, hi, alo, ahi, ...temps]) t.dispose();
  }
}
