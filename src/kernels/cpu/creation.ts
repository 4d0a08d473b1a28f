/** CPU kernels for the creation ops: fills, ranges, eye and the seeded random factories. */
import {
  arange,
  empty,
  emptyLike,
  eye,
  full,
  fullLike,
  linspace,
  ones,
  onesLike,
  rand,
  randint,
  randLike,
  randn,
  randnLike,
  zeros,
  zerosLike,
} from '../../ops/defs/creation.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta, ScalarValue } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { numel } from '../../tensor/layout.js';
import { defaultGenerator, type Generator } from '../../tensor/random.js';
import { type Tensor, storageSpan } from '../../tensor/tensor.js';
import { allocOut, fromDense, writable } from './numeric.js';

/** A JS scalar as the compute value of a dtype (bool -> 0/1; the typed arrays truncate/wrap the rest). */
function computeValue(v: ScalarValue, dtype: DType): number {
  const x = Number(v);
  if (dtype === 'bool') return x !== 0 && !Number.isNaN(x) ? 1 : 0;
  if (dtype === 'int64') return Number.isFinite(x) ? Math.trunc(x) : 0;
  return x;
}

/**
 * Fills every element of a freshly allocated output. Factory outputs are dense (contiguous or a
 * permutation of it), so the storage span is exactly the elements.
 */
function filled(meta: OutMeta, value: ScalarValue): Tensor {
  const x = computeValue(value, meta.dtype);
  if (x === 0 && !Object.is(x, -0)) return allocOut(meta, true);
  const out = allocOut(meta);
  const w = writable(out);
  const span = storageSpan(out.shape, out.strides);
  w.data.fill(x, w.offset, w.offset + span);
  w.commit();
  return out;
}

registerKernel(empty, 'cpu', (ctx) => allocOut(ctx.out));
registerKernel(emptyLike, 'cpu', (ctx) => allocOut(ctx.out));
registerKernel(zeros, 'cpu', (ctx) => allocOut(ctx.out, true));
registerKernel(zerosLike, 'cpu', (ctx) => allocOut(ctx.out, true));
registerKernel(ones, 'cpu', (ctx) => filled(ctx.out, 1));
registerKernel(onesLike, 'cpu', (ctx) => filled(ctx.out, 1));
registerKernel(full, 'cpu', (ctx, _size, fillValue) => filled(ctx.out, fillValue as ScalarValue));
registerKernel(fullLike, 'cpu', (ctx, _self, fillValue) => filled(ctx.out, fillValue as ScalarValue));

registerKernel(arange, 'cpu', (ctx, start, _end, step) => {
  const n = ctx.out.shape[0]!;
  const s = Number(start);
  const st = Number(step);
  const vals = new Float64Array(n);
  for (let i = 0; i < n; i++) vals[i] = s + i * st;
  return fromDense(ctx.out, vals);
});

registerKernel(linspace, 'cpu', (ctx, start, end, steps) => {
  const n = steps as number;
  const a = Number(start);
  const b = Number(end);
  const vals = new Float64Array(n);
  if (n === 1) vals[0] = a;
  else if (n > 1) {
    // Symmetric evaluation (as PyTorch): the first half counts up from start, the second half
    // down from end, so both endpoints are exact.
    const step = (b - a) / (n - 1);
    const half = Math.floor(n / 2);
    for (let i = 0; i < n; i++) vals[i] = i < half ? a + step * i : b - step * (n - 1 - i);
  }
  return fromDense(ctx.out, vals);
});

registerKernel(eye, 'cpu', (ctx) => {
  const out = allocOut(ctx.out, true);
  const [rows, cols] = out.shape as [number, number];
  const w = writable(out);
  const step = out.strides[0]! + out.strides[1]!;
  const k = Math.min(rows, cols);
  for (let i = 0, p = w.offset; i < k; i++, p += step) w.data[p] = 1;
  w.commit();
  return out;
});

/** Random mantissa bits per float dtype, so that uniform values never round up to 1. */
function uniformBits(dtype: DType): number {
  return dtype === 'float16' ? 11 : dtype === 'bfloat16' ? 8 : 24;
}

function uniform(meta: OutMeta, gen: Generator | null): Tensor {
  const g = gen ?? defaultGenerator;
  const n = numel(meta.shape);
  const bits = uniformBits(meta.dtype);
  const shift = 32 - bits;
  const scale = 2 ** -bits;
  const vals = new Float64Array(n);
  for (let i = 0; i < n; i++) vals[i] = (g.nextUint32() >>> shift) * scale;
  return fromDense(meta, vals);
}

function normal(meta: OutMeta, gen: Generator | null): Tensor {
  const g = gen ?? defaultGenerator;
  const n = numel(meta.shape);
  const vals = new Float64Array(n);
  for (let i = 0; i < n; i++) vals[i] = g.nextNormal();
  return fromDense(meta, vals);
}

registerKernel(rand, 'cpu', (ctx, _size, _dtype, _device, gen) => uniform(ctx.out, gen as Generator | null));
registerKernel(randLike, 'cpu', (ctx, _self, _dtype, _device, gen) => uniform(ctx.out, gen as Generator | null));
registerKernel(randn, 'cpu', (ctx, _size, _dtype, _device, gen) => normal(ctx.out, gen as Generator | null));
registerKernel(randnLike, 'cpu', (ctx, _self, _dtype, _device, gen) => normal(ctx.out, gen as Generator | null));

registerKernel(randint, 'cpu', (ctx, low, high, _size, _dtype, _device, gen) => {
  const lo = Number(low);
  const hi = Number(high);
  const g = (gen as Generator | null) ?? defaultGenerator;
  const n = numel(ctx.out.shape);
  const vals = new Float64Array(n);
  for (let i = 0; i < n; i++) vals[i] = g.nextInt(lo, hi);
  return fromDense(ctx.out, vals);
});
