/**
 * cuda kernels for embedding, indexSelect (row gathers) and gather. Indices are range-checked on
 * the device, never read by the host (runtime/cuda/device-errors.ts): a bad index is not read
 * through (an out-of-range read would fault and leave the CUDA context unusable), its output
 * elements are written as zeros, and the first one found is raised as a RangeError naming the op,
 * the index and the valid size at the next synchronisation (kiln.synchronize, toArray, item). So
 * these ops enqueue without waiting for the device and can be captured in a CUDA graph (a Qwen3
 * forward, whose entry is an embedding, replays as one graph).
 */
import { embedding, gather, indexSelect } from '../../ops/defs/indexing.js';
import { registerKernel } from '../../ops/registry.js';
import type { DType } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape, normalizeDim, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { deviceCheckCode, deviceErrorArgs, REPORT_INDEX_C } from '../../runtime/cuda/device-errors.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel, type ParamType } from '../../runtime/cuda/launch.js';
import { storageType } from './codegen/ctypes.js';
import { contiguousAs, copyTensor } from './core.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';

/** Parameters every checking kernel takes first: the error claim and report words and its check code. */
const CHECK_PARAMS: ParamType[] = ['ptr', 'ptr', 'i64'];
const CHECK_DECL = 'unsigned long long* __restrict__ claim, long long* __restrict__ report, long long code';
const GATHER_PARAMS: ParamType[] = [...CHECK_PARAMS, 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64'];
const BLOCK = 256;

/** out[o, i, d] = src[o, idx[i], d] for contiguous src [outer, num, inner] and out [outer, n, inner]. */
export function gatherRowsSource(valueDtype: DType, indexDtype: DType): { name: string; source: string } {
  const vt = storageType(valueDtype);
  const it = storageType(indexDtype);
  const name = `kiln_gather_rows_${valueDtype}_${indexDtype}`;
  // A bad index is reported by the thread of its row's first element only (d == 0).
  const source = `${REPORT_INDEX_C}
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${name}(${CHECK_DECL}, ${vt}* __restrict__ out, const ${vt}* __restrict__ src, const ${it}* __restrict__ idx,
    long long outer, long long n, long long num, long long inner, long long total) {
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    const long long d = e % inner;
    const long long r = e / inner;
    const long long i = r % n;
    const long long o = r / n;
    const long long row = (long long)idx[i];
    if (row < 0 || row >= num) {
      if (d == 0) kiln_report_index(claim, report, code, row, num);
      out[e] = (${vt})0;
      continue;
    }
    out[e] = src[(o * num + row) * inner + d];
  }
}
`;
  return { name, source };
}

const kernels = new Map<string, CudaKernel>();

function gatherKernel(index: number, valueDtype: DType, indexDtype: DType): CudaKernel {
  const key = `${index}#${valueDtype}#${indexDtype}`;
  let k = kernels.get(key);
  if (!k) {
    const g = gatherRowsSource(valueDtype, indexDtype);
    k = kernelFromSource(index, g.source, g.name, GATHER_PARAMS);
    kernels.set(key, k);
  }
  return k;
}

/** The leading kernel arguments of a checking kernel on `t`'s device for `op` indexing `what`. */
function checkArgs(t: Tensor, op: string, what: string): number[] {
  const { claim, report } = deviceErrorArgs(t.device.index);
  return [claim, report, deviceCheckCode({ op, what })];
}

function gatherRows(op: string, what: string, out: Tensor, src: Tensor, idx: Tensor, outer: number, num: number, inner: number): Tensor {
  const n = idx.numel();
  const total = outer * n * inner;
  if (total === 0) return out;
  const s = contiguousAs(src);
  const ix = contiguousAs(idx);
  try {
    const k = gatherKernel(out.device.index, src.dtype, idx.dtype);
    launch(k, [...checkArgs(out, op, what), ptrOf(out), ptrOf(s), ptrOf(ix), outer, n, num, inner, total], { grid: gridFor(out.device.index, total, BLOCK), block: BLOCK }, streamOf(out));
  } finally {
    if (s !== src) s.dispose();
    if (ix !== idx) ix.dispose();
  }
  return out;
}

registerKernel(embedding, 'cuda', (ctx, input, weight) => {
  const num = weight.shape[0]!;
  return gatherRows('embedding', "'weight' rows", allocOut(ctx.out), weight, input, 1, num, weight.shape[1]!);
});

registerKernel(indexSelect, 'cuda', (ctx, self, dim, index) => {
  const d = normalizeDim('indexSelect', dim as number, Math.max(self.ndim, 1));
  const num = self.ndim === 0 ? 1 : self.shape[d]!;
  const what = `dim ${d}`;
  const out = allocOut(ctx.out);
  const outer = numel(self.shape.slice(0, d));
  const inner = numel(self.shape.slice(d + 1));
  if (out.isContiguous()) return gatherRows('indexSelect', what, out, self, index, outer, num, inner);
  const tmp = gatherRows('indexSelect', what, allocOut({ ...ctx.out, strides: contiguousStrides(ctx.out.shape) }), self, index, outer, num, inner);
  copyTensor(out, tmp);
  tmp.dispose();
  return out;
});

/** out[i] = self[i with dim d replaced by index[i]], for a contiguous out shaped like index (rank <= 8). */
export function gatherSource(valueDtype: DType, indexDtype: DType, rank: number): { name: string; source: string; params: ParamType[] } {
  const vt = storageType(valueDtype);
  const it = storageType(indexDtype);
  const name = `kiln_gather_${valueDtype}_${indexDtype}_r${rank}`;
  const params: ParamType[] = [...CHECK_PARAMS, 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64'];
  const decl = [CHECK_DECL, `${vt}* __restrict__ out`, `const ${vt}* __restrict__ src`, `const ${it}* __restrict__ idx`, 'long long total', 'long long dimStride', 'long long dimSize'];
  for (let k = 0; k < rank; k++) {
    params.push('i64', 'i64', 'i64');
    decl.push(`long long size${k}`, `long long sst${k}`, `long long ist${k}`);
  }
  const walk: string[] = [];
  for (let k = rank - 1; k >= 0; k--) walk.push(`    { const long long c = r % size${k}; r /= size${k}; so += c * sst${k}; io += c * ist${k}; }`);
  const source = `${REPORT_INDEX_C}
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${name}(${decl.join(', ')}) {
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    long long r = e, so = 0, io = 0;
${walk.join('\n')}
    const long long j = (long long)idx[io];
    if (j < 0 || j >= dimSize) {
      kiln_report_index(claim, report, code, j, dimSize);
      out[e] = (${vt})0;
      continue;
    }
    out[e] = src[so + j * dimStride];
  }
}
`;
  return { name, source, params };
}

registerKernel(gather, 'cuda', (ctx, self, dim, index) => {
  const rank = Math.max(self.ndim, 1);
  const d = normalizeDim('gather', dim as number, rank);
  const size = self.ndim === 0 ? 1 : self.shape[d]!;
  const out = allocOut(ctx.out);
  const total = out.numel();
  if (total === 0) return out;
  if (rank > 8) throw new Error(`gather: the cuda kernel supports up to 8 dims, got ${rank}`);
  const g = gatherSource(self.dtype, index.dtype, rank);
  const key = `${out.device.index}#${g.name}`;
  let k = kernels.get(key);
  if (!k) {
    k = kernelFromSource(out.device.index, g.source, g.name, g.params);
    kernels.set(key, k);
  }
  const shape = self.ndim === 0 ? [1] : index.shape;
  const sStr = self.ndim === 0 ? [0] : self.strides;
  const iStr = index.ndim === 0 ? [0] : index.strides;
  const args = [...checkArgs(out, 'gather', `dim ${d} of 'self' ${fmtShape(self.shape)}`), ptrOf(out), ptrOf(self), ptrOf(index), total, sStr[d]!, size];
  for (let i = 0; i < rank; i++) args.push(shape[i]!, i === d ? 0 : sStr[i]!, iStr[i]!);
  launch(k, args, { grid: gridFor(out.device.index, total, BLOCK), block: BLOCK }, streamOf(out));
  return out;
});
