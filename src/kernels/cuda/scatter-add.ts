/**
 * cuda kernels for scatterAdd / scatterAdd_ (the backward of gather, which the MoE routing
 * references differentiate through): self is copied into a dense accumulator of the compute type
 * (float32 for fp16/bf16, else the dtype itself), one thread per index element atomically adds src
 * at the element's coordinates with the scattered dim's coordinate replaced by the index value,
 * and the accumulator is cast into the output. Indices are range-checked on the host first (one
 * synchronisation), as embedding and indexSelect do, since an out-of-range atomic would write
 * outside the tensor. Float atomics make the order of the additions (so the last bits of float
 * sums) depend on scheduling, as PyTorch's CUDA scatter_add does; integer sums are exact.
 */
import { scatterAdd, scatterAdd_ } from '../../ops/defs/indexing.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape, normalizeDim } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel, type ParamType } from '../../runtime/cuda/launch.js';
import { loadAs, PRELUDE, storageType } from './codegen/ctypes.js';
import { copyTensor } from './core.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';

const BLOCK = 256;

/** The accumulator dtype of a scatterAdd on `d` (atomicAdd exists for these), or null. */
function accDtype(d: DType): DType | null {
  switch (d) {
    case 'float32':
    case 'float16':
    case 'bfloat16':
      return 'float32';
    case 'float64':
    case 'int32':
    case 'int64':
      return d;
    default:
      return null;
  }
}

/** acc[coords with coords[dim] = idx[coords]] += src[coords] for every index element (rank r, dim d). */
export function scatterAddSource(acc: DType, src: DType, idx: DType, r: number, d: number): { name: string; source: string; params: ParamType[] } {
  const at = storageType(acc);
  const name = `kiln_scatter_add_${acc}_${src}_${idx}_r${r}_d${d}`;
  const add = acc === 'int64' ? `atomicAdd((unsigned long long*)&acc[ao], (unsigned long long)v)` : `atomicAdd(&acc[ao], v)`;
  const dims: string[] = [];
  for (let k = r - 1; k >= 0; k--) {
    dims.push(`    { const long long c = rem % ish${k}; rem /= ish${k}; io += c * ist${k}; so += c * sst${k};${k === d ? '' : ` ao += c * ast${k};`} }`);
  }
  const per = (p: string): string => Array.from({ length: r }, (_, k) => `long long ${p}${k}`).join(', ');
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${name}(${at}* __restrict__ acc, const ${storageType(idx)}* __restrict__ idx, const ${storageType(src)}* __restrict__ src,
    long long n, ${per('ish')}, ${per('ist')}, ${per('sst')}, ${per('ast')}) {
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
    long long rem = e, io = 0, so = 0, ao = 0;
${dims.join('\n')}
    ao += (long long)idx[io] * ast${d};
    const ${at} v = ${loadAs(src, 'src[so]', acc === 'float32' ? 'float' : acc === 'float64' ? 'double' : acc === 'int32' ? 'int' : 'long long')};
    ${add};
  }
}
`;
  const params: ParamType[] = ['ptr', 'ptr', 'ptr', 'i64', ...(Array.from({ length: 4 * r }, () => 'i64') as ParamType[])];
  return { name, source, params };
}

const kernels = new Map<string, CudaKernel>();

function run(op: string, out: Tensor, self: Tensor, dimArg: number, index: Tensor, src: Tensor): Tensor {
  const acc = accDtype(self.dtype);
  if (!acc) throw new TypeError(`${op}: the cuda kernel does not support dtype ${self.dtype} (self ${fmtShape(self.shape)}); supported: float32, float16, bfloat16, float64, int32, int64`);
  const d = normalizeDim(op, dimArg, self.ndim);
  const as1 = (s: readonly number[]): number[] => (s.length === 0 ? [1] : [...s]);
  const selfShape = as1(self.shape);
  const ishape = as1(index.shape);
  const n = ishape.reduce((a, b) => a * b, 1);
  const size = selfShape[d]!;
  if (n > 0) {
    const v = index.toFlatArray();
    for (const x of v) {
      if (!(x >= 0 && x < size)) throw new RangeError(`${op}: index ${x} is out of bounds for dimension ${d} with size ${size} (self ${fmtShape(self.shape)}, index ${fmtShape(index.shape)})`);
    }
  }
  const a = allocOut({ shape: selfShape, strides: contiguousStrides(selfShape), dtype: acc, device: self.device });
  try {
    copyTensor(a, self);
    if (n > 0) {
      const r = ishape.length;
      const key = `${self.device.index}#${acc}#${src.dtype}#${index.dtype}#${r}#${d}`;
      let k = kernels.get(key);
      if (!k) {
        const g = scatterAddSource(acc, src.dtype, index.dtype, r, d);
        k = kernelFromSource(self.device.index, g.source, g.name, g.params);
        kernels.set(key, k);
      }
      const ist = index.ndim === 0 ? [0] : index.strides;
      const sst = src.ndim === 0 ? [0] : src.strides;
      launch(k, [ptrOf(a), ptrOf(index), ptrOf(src), n, ...ishape, ...ist, ...sst, ...a.strides], { grid: gridFor(self.device.index, n, BLOCK), block: BLOCK }, streamOf(self));
    }
    // A 0-d self was accumulated as [1]; read it back as 0-d.
    const back = out.ndim === 0 ? new Tensor(a.storage, a.dtype, [], [], a.offset) : a;
    copyTensor(out, back);
    if (back !== a) back.dispose();
  } finally {
    a.dispose();
  }
  return out;
}

registerKernel(scatterAdd, 'cuda', (ctx, self, dim, index, src) => run('scatterAdd', allocOut(ctx.out as OutMeta), self, dim as number, index, src));
registerKernel(scatterAdd_, 'cuda', (_ctx, self, dim, index, src) => run('scatterAdd_', self, self, dim as number, index, src));
