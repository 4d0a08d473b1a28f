/**
 * webgpu kernels for gather, scatter / scatter_ (plain, or reduce sum / add / mean / prod /
 * multiply / amax / amin) and scatterAdd / scatterAdd_: index walks on the device, no readback
 * (scatter-source.ts has the passes and their WGSL).
 *
 * - gather writes its contiguous output directly, in any storage form (64-bit data as words).
 * - a plain scatter copies self into the output, then the winner and set passes store, for every
 *   destination, the last write in index order: the CPU kernel's result, deterministically.
 * - reductions run on a dense 32-bit working copy of self (f32 for floating dtypes, i32 for
 *   int32 / uint8 / bool, whose sums then read nonzero as true), which is cast back into the
 *   output: one rounding for float16 / bfloat16, as the CPU's float64 accumulation then store. Float
 *   sums add in scheduling order (PyTorch's CUDA scatter_add has the same nondeterminism).
 *
 * As indexSelect on webgpu, an out-of-range index writes nothing (gather reads zero) where the CPU
 * raises: checking would read the indices back, a synchronisation per op.
 */
import { gather, scatter, scatter_, scatterAdd, scatterAdd_, scatterReduceKind } from '../../ops/defs/indexing.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta, ScalarValue } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { isFloating, itemSize } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape, normalizeDim } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { copyTensor, fillTensor } from './core.js';
import { allocOut, webgpu } from './device.js';
import { applySource, finishSource, gatherSource, SC_HEAD, setSource, winnerSource } from './scatter-source.js';
import { dataKind, groupsFor, kernelFor, scalarWords, words } from './template.js';

const as1 = (s: readonly number[]): number[] => (s.length === 0 ? [1] : [...s]);
const st1 = (t: Tensor): number[] => (t.ndim === 0 ? [0] : [...t.strides]);

/** Metadata of an index walk over `index`; `src` / `dst` strides per dim, `dense` self's row-major strides. */
function walkMeta(o: { index: Tensor; dim: number; size: number; scalar: readonly [number, number]; src: Tensor | null; srcOff: number; dst: readonly number[]; dstOff: number; dense: readonly number[] }): Uint32Array {
  const ishape = as1(o.index.shape);
  const ist = st1(o.index);
  const sst = o.src ? st1(o.src) : ishape.map(() => 0);
  const head = [ishape.reduce((a, b) => a * b, 1), ishape.length, o.dim, o.size, o.scalar[0], o.scalar[1], o.index.offset, o.srcOff, o.dstOff];
  if (head.length !== SC_HEAD) throw new Error('scatter: metadata head');
  // 64-bit data is addressed in elements too; the WGSL doubles offsets into words.
  return words([...head, ...ishape.flatMap((s, k) => [s, ist[k]!, sst[k]!, o.dst[k]!, o.dense[k]!])]);
}

// ------------------------------------------------------------------------------------------------
// gather

registerKernel(gather, 'webgpu', (ctx, self, dim, index) => {
  const out = allocOut(ctx.out);
  if (out.numel() === 0) return out;
  const d = normalizeDim('gather', dim as number, self.ndim);
  const o = dataKind('gather', out);
  const s = dataKind('gather', self);
  const idx = index.device.type === 'webgpu' ? index : index.to(out.device);
  try {
    const k = kernelFor(`gather.${o.kind}.${s.kind}.${o.wide ? 'w' : ''}.${idx.dtype}`, () => gatherSource(o.kind, s.kind, o.wide, idx.dtype));
    // The contiguous output's offset travels in the source-offset word (a gather has no source tensor).
    const meta = walkMeta({ index: idx, dim: d, size: as1(self.shape)[d]!, scalar: [0, 0], src: null, srcOff: out.offset, dst: st1(self), dstOff: self.offset, dense: as1(self.shape).map(() => 0) });
    webgpu().dispatch(k, [out.storage.buffer, idx.storage.buffer, self.storage.buffer], meta, groupsFor(out.numel()));
  } finally {
    if (idx !== index) idx.dispose();
  }
  return out;
});

// ------------------------------------------------------------------------------------------------
// scatter, scatterAdd

interface Scatter {
  readonly op: string;
  readonly out: Tensor;
  readonly self: Tensor;
  readonly dim: number;
  readonly index: Tensor;
  readonly src: Tensor | ScalarValue;
}

/** out = self with src written at the index (the last write per destination wins). `out` may be `self`. */
function plainScatter(s: Scatter): Tensor {
  const { op, out, self } = s;
  if (out !== self) copyTensor(out, self);
  const n = s.index.numel();
  if (n === 0 || out.numel() === 0) return out;
  const o = dataKind(op, out);
  const d = normalizeDim(op, s.dim, self.ndim);
  const shape = as1(self.shape);
  const idx = s.index.device.type === 'webgpu' ? s.index : s.index.to(out.device);
  const src = s.src instanceof Tensor ? s.src : null;
  const win = allocOut({ shape: [out.numel()], strides: [1], dtype: 'int32', device: out.device });
  try {
    fillTensor(win, -1);
    const meta = walkMeta({
      index: idx,
      dim: d,
      size: shape[d]!,
      scalar: src ? [0, 0] : scalarWords(s.src as ScalarValue, out.dtype),
      src,
      srcOff: src?.offset ?? 0,
      dst: st1(out),
      dstOff: out.offset,
      dense: contiguousStrides(shape),
    });
    const acc = webgpu();
    const address = { kind: 'walk' as const, index: idx.dtype };
    acc.dispatch(kernelFor(`scatter.winner.${idx.dtype}`, () => winnerSource(address)), [win.storage.buffer, idx.storage.buffer], meta, groupsFor(n));
    const k = kernelFor(`scatter.set.${o.kind}.${o.wide ? 'w' : ''}.${idx.dtype}.${src ? 't' : 's'}`, () => setSource(o.kind, o.wide, address, src !== null));
    acc.dispatch(k, [out.storage.buffer, idx.storage.buffer, win.storage.buffer, ...(src ? [src.storage.buffer] : [])], meta, groupsFor(n));
  } finally {
    win.dispose();
    if (idx !== s.index) idx.dispose();
  }
  return out;
}

/** The dense accumulator dtype of a reducing scatter into `dt`, or null where WGSL has no atomics for it. */
function workDtype(dt: DType): 'float32' | 'int32' | null {
  if (itemSize(dt) === 8) return null;
  return isFloating(dt) ? 'float32' : 'int32';
}

/** out = self with src combined in at the index by `reduce`, through a dense 32-bit working copy. `out` may be `self`. */
function reducingScatter(s: Scatter, reduce: string): Tensor {
  const { op, out, self } = s;
  const wd = workDtype(self.dtype);
  if (wd === null) {
    throw new TypeError(`${op}: the webgpu kernel reduces into float32, float16, bfloat16, int32, uint8 and bool; got dtype ${self.dtype} (self ${fmtShape(self.shape)}): WGSL has no 64-bit atomics`);
  }
  const { kind: mode, mean } = scatterReduceKind(op, reduce);
  const n = s.index.numel();
  if (n === 0 || out.numel() === 0) {
    if (out !== self) copyTensor(out, self);
    return out;
  }
  const d = normalizeDim(op, s.dim, self.ndim);
  const shape = as1(self.shape);
  const work = allocOut({ shape, strides: contiguousStrides(shape), dtype: wd, device: out.device });
  // bool means: the CPU keeps each destination 0/1, and a mean of those is nonzero exactly where the sum is.
  const counted = mean && self.dtype !== 'bool';
  const counts = counted ? allocOut({ shape: [work.numel()], strides: [1], dtype: 'int32', device: out.device }, true) : null;
  const idx = s.index.device.type === 'webgpu' ? s.index : s.index.to(out.device);
  const src = s.src instanceof Tensor ? s.src : null;
  try {
    copyTensor(work, self.ndim === 0 ? new Tensor(self.storage, self.dtype, [1], [0], self.offset) : self);
    const sk = src ? dataKind(op, src).kind : null;
    const meta = walkMeta({
      index: idx,
      dim: d,
      size: shape[d]!,
      scalar: src ? [0, 0] : scalarWords(s.src as ScalarValue, wd),
      src,
      srcOff: src?.offset ?? 0,
      dst: contiguousStrides(shape),
      dstOff: 0,
      dense: contiguousStrides(shape),
    });
    const t = wd === 'float32' ? 'f32' : 'i32';
    const address = { kind: 'walk' as const, index: idx.dtype };
    const k = kernelFor(`scatter.apply.${t}.${mode}.${idx.dtype}.${sk ?? 's'}.${counted ? 'c' : ''}`, () => applySource(t, mode, address, sk, counted));
    const acc = webgpu();
    acc.dispatch(k, [work.storage.buffer, idx.storage.buffer, ...(src ? [src.storage.buffer] : []), ...(counts ? [counts.storage.buffer] : [])], meta, groupsFor(n));
    if (counts) acc.dispatch(kernelFor(`scatter.finish.${t}`, () => finishSource(t)), [work.storage.buffer, counts.storage.buffer], words([work.numel()]), groupsFor(work.numel()));
    const back = out.ndim === 0 ? new Tensor(work.storage, work.dtype, [], [], 0) : work;
    copyTensor(out, back);
    if (back !== work) back.dispose();
  } finally {
    work.dispose();
    counts?.dispose();
    if (idx !== s.index) idx.dispose();
  }
  return out;
}

function runScatter(s: Scatter, reduce: string | null): Tensor {
  return reduce === null || reduce === undefined ? plainScatter(s) : reducingScatter(s, reduce);
}

registerKernel(scatter, 'webgpu', (ctx, self, dim, index, src, reduce = null) =>
  runScatter({ op: 'scatter', out: allocOut(ctx.out as OutMeta), self, dim: dim as number, index, src: src as Tensor | ScalarValue }, reduce as string | null),
);
registerKernel(scatter_, 'webgpu', (_ctx, self, dim, index, src, reduce = null) => runScatter({ op: 'scatter_', out: self, self, dim: dim as number, index, src: src as Tensor | ScalarValue }, reduce as string | null));
registerKernel(scatterAdd, 'webgpu', (ctx, self, dim, index, src) => reducingScatter({ op: 'scatterAdd', out: allocOut(ctx.out as OutMeta), self, dim: dim as number, index, src }, 'sum'));
registerKernel(scatterAdd_, 'webgpu', (_ctx, self, dim, index, src) => reducingScatter({ op: 'scatterAdd_', out: self, self, dim: dim as number, index, src }, 'sum'));
