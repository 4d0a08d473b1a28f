/**
 * Runs a generated pointwise kernel (a one-node program of the fused-group renderer,
 * codegen/pointwise.ts) over tensors: classifies operands (tensor, numel-1 broadcast, host scalar),
 * coalesces dims, picks the contiguous/vectorised or strided path and 32/64-bit indexing, then
 * launches. Kernels are cached in memory by their spec key, so a repeated op costs
 * the key string, one Map lookup and one launch.
 */
import type { DType } from '../../tensor/dtype.js';
import { isFloating, itemSize } from '../../tensor/dtype.js';
import { broadcastStrides } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { castValue } from '../../tensor/typed.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel } from '../../runtime/cuda/launch.js';
import { coalesce, generatePointwise, INDEX32_LIMIT, POINTWISE_BLOCK, reach, vectorWidth, type PointwiseSpec, type PwOperand } from './codegen/pointwise.js';
import { gridFor, ptrOf, streamOf } from './device.js';

export type PwInput = Tensor | number | boolean;

function sameList(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const kernels = new Map<string, CudaKernel>();

/** A kernel an op name ran recently, with what selected it: a loop repeating one call skips the key. */
interface LastKernel {
  readonly device: number;
  readonly expr: string;
  readonly sig: string;
  /** Per input: its dtype for a full tensor operand, 's' for a host scalar, 'b' for a broadcast one. */
  readonly kinds: readonly string[];
  readonly nParams: number;
  readonly compute: DType;
  readonly out: DType;
  readonly rank: number;
  /** The vector width the operands' item sizes allow (vec is this or 1, by alignment and size). */
  readonly widthForSizes: number;
  readonly vec: number;
  readonly index64: boolean;
  readonly kernel: CudaKernel;
}
/**
 * The last few kernels each op name ran, most recent first. Several, because one op name is often
 * called in a few alternating forms in one loop (mul by a scalar, then of two tensors: eager
 * elementwise-1024 has four of them).
 */
const lastKernels = new Map<string, LastKernel[]>();
const KERNELS_PER_OP = 4;

/**
 * One argument list reused by every memoized launch: launch() packs it into the native block before
 * returning, so nothing holds it across calls. Saves the per-call arrays of the general path, whose
 * garbage was about a tenth of an eager op's host time.
 */
const memoArgs: number[] = [];

/**
 * The repeated-call path: `out` is dense and every tensor input has out's shape and strides, as in
 * the op's previous call, with the same dtypes, expression and vector width. Builds the argument
 * list in place and launches the remembered kernel; returns false (having launched nothing) when
 * anything differs, and the general path decides. This is the same kernel and the same arguments the
 * general path would pick for such a call.
 */
function runMemoized(op: string, expr: string, out: Tensor, inputs: readonly PwInput[], params: readonly number[], compute: DType, n: number): boolean {
  const list = lastKernels.get(op);
  if (list === undefined || n <= 1 || n >= INDEX32_LIMIT || !out.isContiguous()) return false;
  for (const m of list) {
    if (
      m.rank === 0 &&
      !m.index64 &&
      m.expr === expr &&
      m.compute === compute &&
      m.out === out.dtype &&
      m.nParams === params.length &&
      m.kinds.length === inputs.length &&
      m.device === out.device.index &&
      launchMemoized(m, out, inputs, params, compute, n)
    ) {
      return true;
    }
  }
  return false;
}

/** Launches `m`'s kernel when every input fits its kinds and vector width (else false, nothing launched). */
function launchMemoized(m: LastKernel, out: Tensor, inputs: readonly PwInput[], params: readonly number[], compute: DType, n: number): boolean {
  const floatCompute = isFloating(compute);
  const width = m.widthForSizes;
  const args = memoArgs;
  args.length = 0;
  const outPtr = ptrOf(out);
  let aligned = outPtr % (itemSize(out.dtype) * width) === 0;
  args.push(outPtr);
  for (let i = 0; i < inputs.length; i++) {
    const x = inputs[i]!;
    const kind = m.kinds[i]!;
    if (typeof x !== 'object') {
      if (kind !== 's') return false;
      const v = Number(x);
      args.push(floatCompute ? castValue(v, compute) : v);
      continue;
    }
    if (kind !== x.dtype || x.device.type === 'cpu') return false;
    if (x.shape !== out.shape && !sameList(x.shape, out.shape)) return false;
    if (x.strides !== out.strides && !sameList(x.strides, out.strides)) return false;
    const p = ptrOf(x);
    if (p % (itemSize(x.dtype) * width) !== 0) aligned = false;
    args.push(p);
  }
  const vec = width > 1 && n >= 64 && aligned && n % width === 0 ? width : 1;
  if (vec !== m.vec) return false;
  for (let i = 0; i < params.length; i++) args.push(params[i]!);
  args.push(n);
  const work = vec > 1 ? Math.ceil(n / vec) : n;
  launch(m.kernel, args, { grid: gridFor(m.device, work, POINTWISE_BLOCK), block: POINTWISE_BLOCK }, streamOf(out));
  return true;
}

/** `key` identifies the spec cheaply (built by string concatenation on the hot path). */
function kernelFor(deviceIndex: number, key: string, spec: PointwiseSpec): CudaKernel {
  let k = kernels.get(key);
  if (!k) {
    const g = generatePointwise(spec);
    k = kernelFromSource(deviceIndex, g.source, g.name, g.params);
    kernels.set(key, k);
  }
  return k;
}

/**
 * out[i] = expr(a, b, c; s0..) for every element of `out` (which may be one of the inputs: in-place
 * ops pass self). Inputs broadcast to out's shape. `compute` is the dtype the op computes in; host
 * scalars are rounded to it first (as the CPU kernels' prep does) and zero-dim tensors of another
 * dtype are rounded through it in the kernel.
 */
export function runPointwise(op: string, expr: string, out: Tensor, inputs: readonly PwInput[], params: readonly number[], compute: DType): Tensor {
  const n = out.numel();
  if (n === 0) return out;
  if (runMemoized(op, expr, out, inputs, params, compute, n)) return out;
  const floatCompute = isFloating(compute);
  const operands: PwOperand[] = [];
  const scalarValues: number[] = [];
  const tensorOps: { t: Tensor; strides: readonly number[] }[] = [];
  const bcastPtrs: (number | undefined)[] = [];
  // Fast path: every tensor operand has out's shape and strides and out is dense (the common eager
  // case): one contiguous dim, no broadcasting or coalescing work.
  let same = out.isContiguous();
  let sig = '';
  for (const x of inputs) {
    if (typeof x !== 'object' || x.device.type === 'cpu') {
      // A host scalar, or a zero-dim cpu tensor the dispatcher let through: a kernel parameter.
      const v = typeof x === 'object' ? Number(x.item()) : Number(x);
      const val = typeof x === 'object' && x.dtype === compute ? v : floatCompute ? castValue(v, compute) : v;
      operands.push({ kind: 'scalar', dtype: compute });
      scalarValues.push(val);
      bcastPtrs.push(undefined);
      sig += 's,';
    } else if (x.numel() === 1) {
      const round = x.ndim === 0 && x.dtype !== compute && floatCompute ? compute : undefined;
      operands.push({ kind: 'bcast', dtype: x.dtype, roundThrough: round });
      scalarValues.push(0);
      bcastPtrs.push(ptrOf(x));
      sig += `b${x.dtype}${round ?? ''},`;
    } else {
      operands.push({ kind: 'tensor', dtype: x.dtype });
      scalarValues.push(0);
      bcastPtrs.push(undefined);
      sig += `t${x.dtype},`;
      if (same && !(sameList(x.shape, out.shape) && sameList(x.strides, out.strides))) same = false;
      tensorOps.push({ t: x, strides: x.strides });
    }
  }
  if (!same) for (const o of tensorOps) o.strides = broadcastStrides(o.t.shape, o.t.strides, out.shape);
  const c = same ? { shape: [n], strides: [[1], ...tensorOps.map(() => [1])] } : coalesce(out.shape, [out.strides, ...tensorOps.map((o) => o.strides)]);
  const contiguous = c.shape.length <= 1 && c.strides.every((s) => c.shape.length === 0 || s[0] === 1);
  let index64 = n >= INDEX32_LIMIT || reach(c.shape, c.strides[0]!) >= INDEX32_LIMIT;
  for (let k = 1; k < c.strides.length && !index64; k++) index64 = reach(c.shape, c.strides[k]!) >= INDEX32_LIMIT;
  let vec = 1;
  const sizes = [itemSize(out.dtype), ...tensorOps.map((o) => itemSize(o.t.dtype))];
  const widthForSizes = vectorWidth(sizes);
  // The renderer's vector loop has no scalar tail: a width that does not divide n runs scalar.
  if (contiguous && n >= 64 && n % widthForSizes === 0) {
    const v = widthForSizes;
    const ptrs = [ptrOf(out), ...tensorOps.map((o) => ptrOf(o.t))];
    if (v > 1 && ptrs.every((p, i) => p % (sizes[i]! * v) === 0)) vec = v;
  }
  const rank = contiguous ? 0 : c.shape.length;
  const device = out.device.index;
  // Building and hashing the full key string was about 0.5 us of a 8-10 us eager op.
  let list = lastKernels.get(op);
  if (list === undefined) lastKernels.set(op, (list = []));
  const m = list.find(
    (e) =>
      e.device === device &&
      e.expr === expr &&
      e.sig === sig &&
      e.nParams === params.length &&
      e.compute === compute &&
      e.out === out.dtype &&
      e.rank === rank &&
      e.vec === vec &&
      e.index64 === index64,
  );
  let k: CudaKernel;
  if (m !== undefined) {
    k = m.kernel;
  } else {
    const key = `${device}#${op}|${expr}|${sig}|${params.length}|${compute}|${out.dtype}|${rank}|${vec}|${index64 ? 64 : 32}`;
    k = kernelFor(device, key, { op, expr, operands, nParams: params.length, compute, out: out.dtype, rank, vec, index64 });
    const kinds = operands.map((o) => (o.kind === 'tensor' ? o.dtype : o.kind === 'scalar' ? 's' : 'b'));
    list.unshift({ device, expr, sig, kinds, nParams: params.length, compute, out: out.dtype, rank, widthForSizes, vec, index64, kernel: k });
    if (list.length > KERNELS_PER_OP) list.pop();
  }
  const args: number[] = [ptrOf(out)];
  let ti = 0;
  operands.forEach((o, i) => {
    if (o.kind === 'scalar') args.push(scalarValues[i]!);
    else if (o.kind === 'bcast') args.push(bcastPtrs[i]!);
    else args.push(ptrOf(tensorOps[ti++]!.t));
  });
  // Then the sizes (contiguous: n) and, strided, every stride of the output and each tensor operand.
  args.push(...params);
  if (rank > 0) {
    args.push(...c.shape);
    for (const s of c.strides) args.push(...s);
  } else args.push(n);
  const work = vec > 1 ? Math.ceil(n / vec) : n;
  launch(k, args, { grid: gridFor(out.device.index, work, POINTWISE_BLOCK), block: POINTWISE_BLOCK }, streamOf(out));
  return out;
}
