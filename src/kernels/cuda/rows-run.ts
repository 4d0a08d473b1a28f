/**
 * Runs row kernels (codegen/rows.ts): brings the reduced dims of a tensor to the end as one
 * contiguous [rows, R] block (a view when the layout already is, else one copy), picks threads per
 * row from R, splits few long rows into chunks for composable reductions, and launches.
 */
import type { DType } from '../../tensor/dtype.js';
import { contiguousStrides, isContiguousStrides, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel } from '../../runtime/cuda/launch.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import { accType, COMPOSABLE, generateRow, ROW_BLOCK, rowKernelName, type RowKind, type RowSpec } from './codegen/rows.js';
import { copyTensor } from './core.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';

const kernels = new Map<string, CudaKernel>();

function kernelFor(index: number, spec: RowSpec): CudaKernel {
  const key = `${index}#${rowKernelName(spec)}`;
  let k = kernels.get(key);
  if (!k) {
    const g = generateRow(spec);
    k = kernelFromSource(index, g.source, g.name, g.params);
    kernels.set(key, k);
  }
  return k;
}

/** Threads per row: the smallest power of two from a warp up to a block that covers R. */
export function threadsPerRow(R: number): number {
  return R <= 32 ? 32 : R <= 64 ? 64 : R <= 128 ? 128 : 256;
}

export interface Rows {
  /** Contiguous [rows, R] data (a view of the input or a temporary copy). */
  src: Tensor;
  rows: number;
  R: number;
  /** The permutation applied (kept dims, then reduced dims). */
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

export interface RowLaunch {
  kind: RowKind;
  src: Tensor;
  /** Output: per-row values (reductions) or [rows, R] (row-wise kinds). null: indices only. */
  out: Tensor | null;
  outDtype: DType;
  rows: number;
  R: number;
  aux?: Tensor | null;
  aux2?: Tensor | null;
  p0?: number;
  p1?: number;
}

function launchRows(l: RowLaunch, chunk: number, cpr: number): void {
  const norm = l.kind === 'layerNorm' || l.kind === 'rmsNorm';
  const spec: RowSpec = {
    kind: l.kind,
    inDtype: l.src.dtype,
    outDtype: l.outDtype,
    tpr: threadsPerRow(cpr > 1 ? chunk : l.R),
    hasWeight: norm && !!l.aux,
    hasBias: norm && !!l.aux2,
    paramDtype: norm && (l.aux || l.aux2) ? (l.aux ?? l.aux2)!.dtype : undefined,
  };
  const index = l.src.device.index;
  const k = kernelFor(index, spec);
  const groups = l.rows * cpr;
  const args = [ptrOf(l.src), l.out ? ptrOf(l.out) : 0, l.aux ? ptrOf(l.aux) : 0, l.aux2 ? ptrOf(l.aux2) : 0, l.rows, l.R, chunk, cpr, l.p0 ?? 0, l.p1 ?? 0];
  launch(k, args, { grid: gridFor(index, groups, ROW_BLOCK / spec.tpr), block: ROW_BLOCK }, streamOf(l.src));
}

/** Storage dtype for partial results: the accumulator's width, so splitting never rounds. */
function partialDtype(kind: RowKind, inDtype: DType): DType {
  const at = accType(kind, inDtype);
  if (kind === 'any' || kind === 'all') return 'bool';
  if (kind === 'max' || kind === 'min') return inDtype;
  return at === 'double' ? 'float64' : at === 'long long' ? 'int64' : at === 'int' ? 'int32' : 'float32';
}

// Chunks of at least 4096 elements keep each group's loop long enough to hide memory latency; the
// split targets about 8 groups per SM so every SM has work when there are few rows.
const MIN_CHUNK = 4096;
const GROUPS_PER_SM = 8;

/** Runs a row kernel, splitting few long rows of a composable reduction into two launches. */
export function runRows(l: RowLaunch): void {
  if (l.rows === 0) return;
  const sm = deviceInfo(l.src.device.index).smCount;
  if (COMPOSABLE.has(l.kind) && l.rows < sm * 2 && l.R >= 4 * MIN_CHUNK && l.out) {
    const cpr = Math.min(Math.ceil(l.R / MIN_CHUNK), Math.ceil((sm * GROUPS_PER_SM) / l.rows));
    if (cpr > 1) {
      const chunk = Math.ceil(l.R / cpr);
      const parts = Math.ceil(l.R / chunk);
      const pd = partialDtype(l.kind, l.src.dtype);
      const partial = allocOut({ shape: [l.rows, parts], strides: [parts, 1], dtype: pd, device: l.src.device });
      launchRows({ ...l, out: partial, outDtype: pd, p0: 0, p1: 0 }, chunk, parts);
      // Second stage: the partials are rows of `parts`; any/all partials are already 0/1 bools.
      launchRows({ ...l, src: partial, R: parts }, parts, 1);
      partial.dispose();
      return;
    }
  }
  launchRows(l, l.R, 1);
}
