/**
 * cuda kernels for scatter / scatter_ (plain, or reduce add / multiply / amax / amin / mean) and
 * indexPut / indexPut_ (plain or accumulate). scatterAdd has a direct kernel (scatter-add.ts).
 *
 * Planned on the host: the indices are read back once (the range check needs them there anyway,
 * as for embedding), and the CPU kernel's own index walk (scatterDense / indexPutDense with a
 * visitor, src/kernels/cpu/indexing.ts) lists every write as (destination, source) positions,
 * so both devices share negative indices, bool masks, broadcasting and error messages. The device
 * then applies the writes to a float64 working copy of self (the precision the CPU kernel
 * computes in): plain writes keep the last write per destination (deduplicated on the host, so the
 * result equals the CPU's), reductions use float64 atomics (atomicAdd, or a compare-and-swap loop
 * for multiply / amax / amin), so only the order of a sum differs from the CPU's. The working copy
 * is cast back into the output (or into self, in place).
 */
import { indexPut, indexPut_, scatter, scatter_, scatterReduceKind } from '../../ops/defs/indexing.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta, ScalarValue } from '../../ops/schema.js';
import { contiguousStrides } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { CPU, type Device } from '../../runtime/device.js';
import { castValue } from '../../tensor/typed.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel, type ParamType } from '../../runtime/cuda/launch.js';
import { indexPutDense, scatterDense, type WriteVisitor } from '../cpu/indexing.js';
import { copyTensor } from './core.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';

const BLOCK = 256;
/** How a write combines with the destination's value. */
const MODES = { set: 0, add: 1, mul: 2, max: 3, min: 4 } as const;
type Mode = keyof typeof MODES;

// work, src, destinations, source positions, count, mode, scalar.
const PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'f64'];
const NAME = 'kiln_scatter_pairs';
const SOURCE = `
__device__ __forceinline__ double kiln_combine(int mode, double a, double b) {
  if (mode == 2) return a * b;
  if (mode == 3) return (a != a || a >= b) ? a : b;
  return (a != a || a <= b) ? a : b;
}
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${NAME}(double* __restrict__ work, const double* __restrict__ src, const double* __restrict__ dest,
    const double* __restrict__ spos, long long n, int mode, double scalar) {
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
    double* p = work + (long long)dest[e];
    const double v = spos[e] < 0 ? scalar : src[(long long)spos[e]];
    if (mode == 0) { *p = v; continue; }
    if (mode == 1) { atomicAdd(p, v); continue; }
    unsigned long long* q = reinterpret_cast<unsigned long long*>(p);
    unsigned long long old = *q, seen;
    do {
      seen = old;
      old = atomicCAS(q, seen, __double_as_longlong(kiln_combine(mode, __longlong_as_double(seen), v)));
    } while (old != seen);
  }
}
`;

const kernels = new Map<number, CudaKernel>();

/** A contiguous float64 copy of t on t's device. */
function asFloat64(t: Tensor): Tensor {
  const out = allocOut({ shape: t.shape, strides: contiguousStrides(t.shape), dtype: 'float64', device: t.device });
  return copyTensor(out, t);
}

interface Plan {
  dest: number[];
  spos: number[];
}

/** Lists the writes; plain writes keep only the last per destination (the CPU's result). */
function plan(walk: (visit: WriteVisitor) => void, mode: Mode): Plan {
  if (mode !== 'set') {
    const dest: number[] = [];
    const spos: number[] = [];
    walk((p, s) => (dest.push(p), spos.push(s)));
    return { dest, spos };
  }
  const last = new Map<number, number>();
  walk((p, s) => last.set(p, s));
  return { dest: [...last.keys()], spos: [...last.values()] };
}

/** A float64 tensor of `values` on `device`: written on the host, then copied over. */
function float64On(values: readonly number[], device: Device): Tensor {
  const host = Tensor.empty([values.length], 'float64', CPU);
  new Float64Array(host.storage.cpuArrayBuffer(), 0, values.length).set(values);
  try {
    return host.to(device);
  } finally {
    host.dispose();
  }
}

/**
 * Applies planned writes to a float64 copy of self and casts the result into `out`. `mean` (scatter
 * reduce) divides each written destination by its write count + 1 (self included), flooring for
 * integer dtypes, as the CPU kernel does.
 */
function applyWrites(out: Tensor, self: Tensor, src: Tensor | ScalarValue, p: Plan, mode: Mode, mean: boolean): Tensor {
  const work = asFloat64(self);
  const srcWork = typeof src === 'object' ? asFloat64(src) : null;
  // A scalar source is rounded to self's dtype first, as the CPU kernel does.
  const scalar = typeof src === 'object' ? 0 : castValue(Number(src), self.dtype);
  const temps: Tensor[] = [work];
  if (srcWork) temps.push(srcWork);
  try {
    if (p.dest.length > 0) {
      const dest = float64On(p.dest, self.device);
      const spos = float64On(p.spos, self.device);
      temps.push(dest, spos);
      const index = self.device.index;
      let k = kernels.get(index);
      if (!k) {
        k = kernelFromSource(index, SOURCE, NAME, PARAMS);
        kernels.set(index, k);
      }
      launch(k, [ptrOf(work), srcWork ? ptrOf(srcWork) : ptrOf(work), ptrOf(dest), ptrOf(spos), p.dest.length, MODES[mode], scalar], { grid: gridFor(index, p.dest.length, BLOCK), block: BLOCK }, streamOf(work));
      if (mean) meanFinish(work, p, self.dtype === 'float32' || self.dtype === 'float64' || self.dtype === 'float16' || self.dtype === 'bfloat16');
    }
    // bool destinations: any nonzero is true, as the CPU stores them.
    return copyTensor(out, work);
  } finally {
    for (const t of temps) t.dispose();
  }
}

/** scatter reduce 'mean': work[p] /= count(p) + 1 at written destinations (small: done on the host). */
function meanFinish(work: Tensor, p: Plan, floating: boolean): void {
  const counts = new Map<number, number>();
  for (const d of p.dest) counts.set(d, (counts.get(d) ?? 0) + 1);
  const host = work.to('cpu');
  const v = new Float64Array(host.storage.cpuArrayBuffer(), host.offset * 8, host.storage.nbytes / 8 - host.offset);
  for (const [d, c] of counts) v[d] = floating ? v[d]! / (c + 1) : Math.floor(v[d]! / (c + 1));
  copyTensor(work, host);
  host.dispose();
}

function scatterMode(reduce: string | null): { mode: Mode; mean: boolean } {
  if (reduce === null || reduce === undefined) return { mode: 'set', mean: false };
  const { kind, mean } = scatterReduceKind('scatter', reduce);
  return { mode: kind, mean };
}

function runScatter(op: string, out: Tensor, self: Tensor, dim: number, index: Tensor, src: Tensor | ScalarValue, reduce: string | null): Tensor {
  const { mode, mean } = scatterMode(reduce);
  const hostIndex = index.to('cpu');
  try {
    const p = plan((visit) => scatterDense(op, null, self, dim, hostIndex, src, reduce, visit), mode);
    return applyWrites(out, self, src, p, mode, mean);
  } finally {
    if (hostIndex !== index) hostIndex.dispose();
  }
}

function runIndexPut(op: string, out: Tensor, self: Tensor, indices: readonly (Tensor | null)[], values: Tensor | ScalarValue, accumulate: boolean): Tensor {
  const hostIndices = indices.map((t) => (t ? t.to('cpu') : null));
  try {
    const mode: Mode = accumulate ? (self.dtype === 'bool' ? 'max' : 'add') : 'set';
    const p = plan((visit) => indexPutDense(op, null, self, hostIndices, values, accumulate, visit), mode);
    return applyWrites(out, self, values, p, mode, false);
  } finally {
    hostIndices.forEach((t, i) => t && t !== indices[i] && t.dispose());
  }
}

registerKernel(scatter, 'cuda', (ctx, self, dim, index, src, reduce = null) => runScatter('scatter', allocOut(ctx.out as OutMeta), self, dim as number, index, src, reduce as string | null));
registerKernel(scatter_, 'cuda', (_ctx, self, dim, index, src, reduce = null) => runScatter('scatter_', self, self, dim as number, index, src, reduce as string | null));
registerKernel(indexPut, 'cuda', (ctx, self, indices, values, accumulate) => runIndexPut('indexPut', allocOut(ctx.out as OutMeta), self, indices as readonly (Tensor | null)[], values, accumulate as boolean));
registerKernel(indexPut_, 'cuda', (_ctx, self, indices, values, accumulate) => runIndexPut('indexPut_', self, self, indices as readonly (Tensor | null)[], values, accumulate as boolean));
