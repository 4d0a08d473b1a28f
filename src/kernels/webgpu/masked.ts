/**
 * webgpu kernels for maskedFill / maskedFill_ and tril / triu: pointwise ops with a predicate,
 * each a one-node program of the fused-group renderer (pointwise-run.ts).
 *
 * - maskedFill is the math table's `where(mask, value, self)`; a 0-d value tensor on webgpu is an
 *   input broadcast to every element (no readback), a cpu scalar is a constant.
 * - tril / triu need the element's row and column: they are inputs too, two broadcast views of one
 *   cached int32 ramp [0, 1, 2, ...] (the row index varies along dim -2, the column along dim -1),
 *   so the predicate col - row <= diagonal is ordinary pointwise math over three inputs.
 *
 * 64-bit tensors (int64, float64) run as their int32 words (core.ts's trick): the mask and the
 * ramps gain a trailing broadcast dim, and maskedFill's value becomes a two-word input.
 */
import { maskedFill, maskedFill_, tril, triu } from '../../ops/defs/indexing.js';
import { registerKernel } from '../../ops/registry.js';
import type { ScalarValue } from '../../ops/schema.js';
import type { Device } from '../../runtime/device.js';
import { keep } from '../../tensor/scope.js';
import { itemSize } from '../../tensor/dtype.js';
import { Tensor } from '../../tensor/tensor.js';
import { castValue } from '../../tensor/typed.js';
import { WGSL_TEMPLATES, wgslComputeType, wgslLit } from '../math/wgsl.js';
import { allocOut, unsupportedDtype } from './device.js';
import { runPointwise } from './pointwise-run.js';
import { int32On } from './template.js';

const where = WGSL_TEMPLATES.get('where')!;

/** `t` (64-bit) as int32 words [...shape, 2]. */
function wordsOf(t: Tensor): Tensor {
  return new Tensor(t.storage, 'int32', [...t.shape, 2], [...t.strides.map((s) => 2 * s), 1], 2 * t.offset);
}

/** `t` with a trailing size-1 dim, so it broadcasts over the words dim of a 64-bit output. */
function overWords(t: Tensor): Tensor {
  return new Tensor(t.storage, t.dtype, [...t.shape, 1], [...t.strides, 0], t.offset);
}

/** The two int32 words of `value` as a 64-bit `dtype`, on `device`. */
function valueWords(value: Tensor | ScalarValue, dtype: 'int64' | 'float64', device: Device): Tensor {
  const v = value instanceof Tensor ? Number(value.item()) : typeof value === 'boolean' ? Number(value) : value;
  const bytes = new DataView(new ArrayBuffer(8));
  if (dtype === 'float64') bytes.setFloat64(0, v, true);
  else bytes.setBigInt64(0, BigInt.asIntN(64, BigInt(Math.trunc(castValue(v, 'int64')))), true);
  return int32On([bytes.getInt32(0, true), bytes.getInt32(4, true)], device);
}

/** out = where(mask, value, self); `out` may be `self` (in place). */
function fillMasked(op: string, out: Tensor, self: Tensor, mask: Tensor, value: Tensor | ScalarValue): Tensor {
  if (itemSize(out.dtype) !== 8) return runPointwise(op, out, [mask, value, self], (m) => where(m, { out: out.dtype }));
  const temps = [wordsOf(out), overWords(mask), valueWords(value, out.dtype as 'int64' | 'float64', out.device)];
  const selfWords = self === out ? temps[0]! : wordsOf(self);
  if (selfWords !== temps[0]) temps.push(selfWords);
  try {
    runPointwise(op, temps[0]!, [temps[1]!, temps[2]!, selfWords], (m) => where(m, { out: 'int32' }));
  } finally {
    for (const t of temps) t.dispose();
  }
  return out;
}

registerKernel(maskedFill, 'webgpu', (ctx, self, mask, value) => fillMasked('maskedFill', allocOut(ctx.out), self, mask, value as Tensor | ScalarValue));
registerKernel(maskedFill_, 'webgpu', (_ctx, self, mask, value) => fillMasked('maskedFill_', self, self, mask, value as Tensor | ScalarValue));

// ------------------------------------------------------------------------------------------------
// tril, triu

/** The ramp per device: one int32 tensor [0, 1, ..., n) grown to the largest length asked for. */
const ramps = new Map<string, Tensor>();

function ramp(n: number, device: Device): Tensor {
  const key = device.toString();
  let r = ramps.get(key);
  if (!r || r.isDisposed || r.numel() < n) {
    r?.dispose();
    const len = Math.max(64, 2 ** Math.ceil(Math.log2(Math.max(n, 1))));
    // A cache outlives any kiln.scope it is first built in.
    r = keep(int32On(Int32Array.from({ length: len }, (_, i) => i), device));
    ramps.set(key, r);
  }
  return r;
}

function triangle(op: 'tril' | 'triu', out: Tensor, self: Tensor, diagonal: number): Tensor {
  const rows = self.shape[self.ndim - 2]!;
  const cols = self.shape[self.ndim - 1]!;
  const wide = itemSize(self.dtype) === 8;
  const t = wide ? 'i32' : wgslComputeType(self.dtype);
  if (t === null) throw unsupportedDtype(op, self);
  if (out.numel() === 0) return out;
  const r = ramp(Math.max(rows, cols), self.device);
  // Row index along dim -2, column index along dim -1 (and a broadcast words dim for 64-bit data).
  const extra = wide ? 1 : 0;
  const rowIdx = new Tensor(r.storage, 'int32', [rows, 1, ...new Array<number>(extra).fill(1)], [1, 0, ...new Array<number>(extra).fill(0)], r.offset);
  const colIdx = new Tensor(r.storage, 'int32', [cols, ...new Array<number>(extra).fill(1)], [1, ...new Array<number>(extra).fill(0)], r.offset);
  const o = wide ? wordsOf(out) : out;
  const x = wide ? wordsOf(self) : self;
  // col - row lies in [-(rows - 1), cols - 1]: clamping keeps the literal an i32 and the answer unchanged.
  const d = Math.max(-rows, Math.min(cols, diagonal));
  const keepIt = `(v2 - v1) ${op === 'tril' ? '<=' : '>='} ${wgslLit(d, 'i32')}`;
  try {
    runPointwise(op, o, [x, rowIdx, colIdx], (m) => (m[0]?.kind === 'value' ? `select(${wgslLit(0, t)}, v0, ${keepIt})` : null));
  } finally {
    for (const v of [rowIdx, colIdx, ...(wide ? [o, x] : [])]) v.dispose();
  }
  return out;
}

registerKernel(tril, 'webgpu', (ctx, self, diagonal) => triangle('tril', allocOut(ctx.out), self, diagonal as number));
registerKernel(triu, 'webgpu', (ctx, self, diagonal) => triangle('triu', allocOut(ctx.out), self, diagonal as number));
