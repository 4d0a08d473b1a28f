/**
 * Row problems: `toRows` brings the chosen dims of a tensor to the end as one contiguous [rows, R]
 * block (a view when the layout already is, else one copy), for the kernels that need rows dense
 * (the scans here, sort/topk in sort.ts); `runScan` runs cumsum / cumprod (codegen/scan.ts) on it,
 * copying the result into the output's layout when that differs. Reductions and softmax/norm row
 * kernels read any strides themselves (reduce-run.ts).
 */
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { contiguousStrides, isContiguousStrides, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel } from '../../runtime/cuda/launch.js';
import { generateScan, SCAN_BLOCK, scanKernelName, threadsPerRow, type ScanKind, type ScanSpec } from './codegen/scan.js';
import { copyTensor } from './core.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';

export interface Rows {
  /** Contiguous [rows, R] data (a view of the input or a temporary copy). */
  src: Tensor;
  rows: number;
  R: number;
  /** The permutation applied (kept dims, then the row dims). */
  perm: number[];
}

/**
 * `x` with `dims` moved last, as contiguous [rows, R] data (`src`, a view or a copy: the caller
 * disposes it either way). `dtype` casts on the way when given.
 */
export function toRows(x: Tensor, dims: readonly number[], dtype?: DType): Rows {
  const kept = x.shape.map((_, d) => d).filter((d) => !dims.includes(d));
  const perm = [...kept, ...dims];
  const shape = perm.map((d) => x.shape[d]!);
  const strides = perm.map((d) => x.strides[d]!);
  const rows = numel(kept.map((d) => x.shape[d]!));
  const R = numel(dims.map((d) => x.shape[d]!));
  if ((dtype === undefined || dtype === x.dtype) && isContiguousStrides(shape, strides)) {
    return { src: new Tensor(x.storage, x.dtype, shape, strides, x.offset), rows, R, perm };
  }
  const view = new Tensor(x.storage, x.dtype, shape, strides, x.offset);
  const dense = allocOut({ shape, strides: contiguousStrides(shape), dtype: dtype ?? x.dtype, device: x.device });
  copyTensor(dense, view);
  view.dispose();
  return { src: dense, rows, R, perm };
}

const kernels = new Map<string, CudaKernel>();

function kernelFor(index: number, spec: ScanSpec): CudaKernel {
  const key = `${index}#${scanKernelName(spec)}`;
  let k = kernels.get(key);
  if (!k) {
    const g = generateScan(spec);
    k = kernelFromSource(index, g.source, g.name, g.params);
    kernels.set(key, k);
  }
  return k;
}

/** cumsum / cumprod of x along `dims` (one dim, or none for a 0-d input) into a new `meta` tensor; `castTo` casts the input first. */
export function runScan(kind: ScanKind, meta: OutMeta, x: Tensor, dims: readonly number[], castTo?: DType): Tensor {
  const out = allocOut(meta);
  const r = toRows(x, dims, castTo);
  const permShape = r.perm.map((d) => x.shape[d]!);
  const permOutStrides = r.perm.map((d) => out.strides[d]!);
  const direct = isContiguousStrides(permShape, permOutStrides);
  const target = direct
    ? new Tensor(out.storage, out.dtype, permShape, permOutStrides, out.offset)
    : allocOut({ shape: permShape, strides: contiguousStrides(permShape), dtype: out.dtype, device: out.device });
  try {
    if (r.rows > 0) {
      const spec: ScanSpec = { kind, inDtype: r.src.dtype, outDtype: out.dtype, tpr: threadsPerRow(r.R) };
      const index = x.device.index;
      launch(kernelFor(index, spec), [ptrOf(r.src), ptrOf(target), r.rows, r.R], { grid: gridFor(index, r.rows, SCAN_BLOCK / spec.tpr), block: SCAN_BLOCK }, streamOf(x));
      if (!direct) copyTensor(new Tensor(out.storage, out.dtype, permShape, permOutStrides, out.offset), target);
    }
  } finally {
    r.src.dispose();
    target.dispose();
  }
  return out;
}
