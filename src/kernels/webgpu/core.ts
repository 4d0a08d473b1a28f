/**
 * webgpu kernels for copies, casts, views, fills and factories. Copies and casts are the one-node
 * pointwise program with the table's `clone` entry (the value converted to the destination's
 * compute type, then stored in its storage form). int64 has no WGSL type but casts to and from it
 * are word arithmetic: into int64 the low word is the value (floats truncated) and the high word
 * its sign; out of int64 an integer keeps the low word (wrapping, as torch's casts), a float is
 * high * 2^32 + low, bool is whether either word is nonzero. Views share the device-independent
 * view kernels.
 * Seeded random and range factories run on the CPU and upload, so a seed gives the same numbers on
 * every device (as on cuda).
 */
import { clone, contiguous, copy_, toDtype } from '../../ops/defs/core.js';
import * as C from '../../ops/defs/creation.js';
import { fill_, zero_ } from '../../ops/defs/pointwise.js';
import { registerKernel, type Op } from '../../ops/registry.js';
import type { OutMeta, ScalarValue } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { broadcastStrides, contiguousStrides } from '../../tensor/layout.js';
import { castValue } from '../../tensor/typed.js';
import { Tensor } from '../../tensor/tensor.js';
import { registerDeviceViews, registerViaHost, toDeviceKernel } from '../cpu/core.js';
import { WGSL_TEMPLATES, wgslComputeType, wgslLit } from '../math/wgsl.js';
import { allocOut, unsupportedDtype } from './device.js';
import { runPointwise } from './pointwise-run.js';

const cloneEntry = WGSL_TEMPLATES.get('clone')!;

const WIDE: ReadonlySet<DType> = new Set<DType>(['int64', 'float64']);

/**
 * `t` (a 64-bit tensor) as its int32 words: [...shape, 2] (low word first), each element's two
 * words adjacent. WGSL has no 64-bit types, but a same-dtype copy of int64 / float64 elements is a
 * copy of their words, which the int32 pointwise program does with any strides (broadcast too).
 */
function words(t: Tensor, shape: readonly number[] = t.shape, strides: readonly number[] = t.strides): Tensor {
  return new Tensor(t.storage, 'int32', [...shape, 2], [...strides.map((s) => 2 * s), 1], 2 * t.offset);
}

/** dst[...] = src (broadcast, cast), on dst's device; src may live on another device. */
export function copyTensor(dst: Tensor, src: Tensor): Tensor {
  let from = src;
  const wide = WIDE.has(dst.dtype) && src.dtype === dst.dtype;
  if (src.device.type !== 'webgpu' && (wide || !(src.device.type === 'cpu' && src.numel() === 1))) {
    from = toDeviceKernel({ op: 'copy_', out: { shape: src.shape, strides: contiguousStrides(src.shape), dtype: src.dtype, device: dst.device } }, src);
  }
  if (wide) {
    const d = words(dst);
    const s = words(from, dst.shape, broadcastStrides(from.shape, from.strides, dst.shape));
    try {
      runPointwise('copy', d, [s], (m) => (m[0]?.kind === 'value' ? m[0].expr : null));
    } finally {
      d.dispose();
      s.dispose();
    }
  } else if (dst.dtype === 'int64' && from.device.type === 'webgpu' && !WIDE.has(from.dtype)) toInt64(dst, from);
  else if (from.dtype === 'int64' && from.device.type === 'webgpu' && !WIDE.has(dst.dtype)) fromInt64(dst, from, dst.shape);
  else runPointwise('copy', dst, [from], (m) => cloneEntry(m, { out: dst.dtype }));
  if (from !== src) from.dispose();
  return dst;
}

/** One word (0: low, 1: high) of each element of the 64-bit `t`, as an int32 view over `shape` with `strides`. */
function word(t: Tensor, half: 0 | 1, shape: readonly number[] = t.shape, strides: readonly number[] = t.strides): Tensor {
  return new Tensor(t.storage, 'int32', shape, strides.map((s) => 2 * s), 2 * t.offset + half);
}

/**
 * dst (int64) = src (a 32-bit or narrower dtype, broadcast): the low word the value as i32, the
 * high word its sign. A float is truncated first, and one of 2^31 or more in magnitude (an integer
 * there, a multiple of its 256 or larger ulp) splits exactly into floor(t / 2^32) and the rest,
 * where an i32 conversion would saturate.
 */
function toInt64(dst: Tensor, src: Tensor): void {
  const lo = word(dst, 0);
  const hi = word(dst, 1);
  const float = wgslComputeType(src.dtype) === 'f32';
  const t = 'trunc(v0)';
  const big = `(abs(${t}) >= 2147483648.0f)`;
  const high = `floor(${t} / 4294967296.0f)`;
  try {
    runPointwise('copy', lo, [src], (m) => (float ? `select(i32(${t}), bitcast<i32>(u32(${t} - ${high} * 4294967296.0f)), ${big})` : cloneEntry(m, { out: 'int32' })));
    runPointwise('copy', hi, [src], (m) => {
      if (float) return `select(select(0i, -1i, ${t} < 0.0f), i32(${high}), ${big})`;
      const v = cloneEntry(m, { out: 'int32' });
      return v === null ? null : `select(0i, -1i, ${v} < 0i)`;
    });
  } finally {
    lo.dispose();
    hi.dispose();
  }
}

/** dst (a 32-bit or narrower dtype) = src (int64, broadcast to dst's shape) from its two words. */
function fromInt64(dst: Tensor, src: Tensor, shape: readonly number[]): void {
  const st = broadcastStrides(src.shape, src.strides, shape);
  const lo = word(src, 0, shape, st);
  const hi = word(src, 1, shape, st);
  const expr = (): string => {
    if (dst.dtype === 'bool') return 'select(0i, 1i, v0 != 0i || v1 != 0i)';
    // A value that fits in int32 (the high word is the low word's sign) converts exactly from it.
    if (wgslComputeType(dst.dtype) === 'f32') return 'select(f32(v1) * 4294967296.0f + f32(bitcast<u32>(v0)), f32(v0), v1 == (v0 >> 31u))';
    return 'v0';
  };
  try {
    runPointwise('copy', dst, [lo, hi], expr);
  } finally {
    lo.dispose();
    hi.dispose();
  }
}

/** Fills a 64-bit tensor: its low and high words, each an int32 fill of a strided view. */
function fillWide(dst: Tensor, value: ScalarValue): Tensor {
  const v = typeof value === 'boolean' ? (value ? 1 : 0) : value;
  const bytes = new DataView(new ArrayBuffer(8));
  if (dst.dtype === 'float64') bytes.setFloat64(0, Number(v), true);
  else bytes.setBigInt64(0, BigInt.asIntN(64, BigInt(Math.trunc(Number(v)))), true);
  for (const half of [0, 1]) {
    const w = new Tensor(dst.storage, 'int32', dst.shape, dst.strides.map((s) => 2 * s), 2 * dst.offset + half);
    try {
      runPointwise('fill', w, [], () => wgslLit(bytes.getInt32(4 * half, true), 'i32'));
    } finally {
      w.dispose();
    }
  }
  return dst;
}

/** Every element of `dst` set to `value` (rounded to dst's dtype first). */
export function fillTensor(dst: Tensor, value: ScalarValue): Tensor {
  if (WIDE.has(dst.dtype)) return fillWide(dst, value);
  const t = wgslComputeType(dst.dtype);
  if (t === null) throw unsupportedDtype('fill_', dst);
  const v = typeof value === 'boolean' ? (value ? 1 : 0) : Number(value);
  const lit = dst.dtype === 'bool' ? wgslLit(v !== 0 ? 1 : 0, t) : wgslLit(castValue(v, dst.dtype), t);
  return runPointwise('fill', dst, [], () => lit);
}

registerKernel(copy_, 'webgpu', (_ctx, self, src) => (typeof src === 'object' ? copyTensor(self, src) : fillTensor(self, src)));
registerKernel(clone, 'webgpu', (ctx, self) => copyTensor(allocOut(ctx.out), self));
registerKernel(contiguous, 'webgpu', (ctx, self, memoryFormat = 'contiguous') => (self.isContiguous(memoryFormat) ? self : copyTensor(allocOut(ctx.out), self)));
registerKernel(toDtype, 'webgpu', (ctx, self) => copyTensor(allocOut(ctx.out), self));
registerKernel(fill_, 'webgpu', (_ctx, self, value) => (typeof value === 'object' ? copyTensor(self, value) : fillTensor(self, value)));
registerKernel(zero_, 'webgpu', (_ctx, self) => fillTensor(self, 0));

// ------------------------------------------------------------------------------------------------
// Views
// ------------------------------------------------------------------------------------------------

registerDeviceViews('webgpu', allocOut, copyTensor);

// ------------------------------------------------------------------------------------------------
// Factories
// ------------------------------------------------------------------------------------------------

/** New buffers are zeroed by WebGPU (and reused ones on request), so zeros cost no kernel. */
function filled(meta: OutMeta, value: ScalarValue): Tensor {
  const zero = Number(value) === 0 && !Object.is(Number(value), -0);
  const out = allocOut(meta, zero);
  return zero ? out : fillTensor(out, value);
}

registerKernel(C.empty, 'webgpu', (ctx) => allocOut(ctx.out));
registerKernel(C.emptyLike, 'webgpu', (ctx) => allocOut(ctx.out));
registerKernel(C.zeros, 'webgpu', (ctx) => allocOut(ctx.out, true));
registerKernel(C.zerosLike, 'webgpu', (ctx) => allocOut(ctx.out, true));
registerKernel(C.ones, 'webgpu', (ctx) => filled(ctx.out, 1));
registerKernel(C.onesLike, 'webgpu', (ctx) => filled(ctx.out, 1));
registerKernel(C.full, 'webgpu', (ctx, _size, fillValue) => filled(ctx.out, fillValue as ScalarValue));
registerKernel(C.fullLike, 'webgpu', (ctx, _self, fillValue) => filled(ctx.out, fillValue as ScalarValue));

registerViaHost('webgpu', [C.rand, C.randn, C.randint, C.arange, C.linspace, C.eye, C.randLike, C.randnLike] as unknown as Op<readonly never[], OutMeta>[]);
