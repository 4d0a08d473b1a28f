/**
 * The eager cuda pointwise kernels: one kernel per (expression, operand dtypes, output dtype, path),
 * each a one-node program of the fused-group renderer (kernels/cuda/fused/), the code that renders
 * the compiler's fused kernels. The node is the op's expression over a, b, c and s0.. in its compute
 * type (kernels/cuda/pointwise.ts), bound and stored with the eager conversions (loadAs/storeAs
 * semantics), under the eager prelude. Pure string and shape logic, so it runs and is tested
 * without a GPU.
 *
 * Two paths:
 * - contiguous: every tensor operand has the output's dense layout (after coalescing, one dim of
 *   stride 1), so all share the linear index; with `vec` > 1 each thread moves 16 bytes of the widest
 *   operand per access (KVec loads). The renderer has no scalar tail: the runner asks for `vec` > 1
 *   only when it divides the element count;
 * - strided: `rank` coalesced dims; each thread turns its linear index into per-operand offsets with
 *   one div/mod per dim, every stride a kernel argument. Broadcast operands are stride 0; numel-1
 *   operands ('bcast') read element 0; host scalars are `double` arguments.
 * Index math is 32-bit unless the element count or an operand's reach needs 64 bits (`index64`,
 * at INDEX32_LIMIT, the renderer's bound). Loops are grid-stride, so any size works with a capped
 * grid (of at most 2^26 threads, which the 32-bit bound assumes).
 */
import { createHash } from '../../../platform/index.js';
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { groupCtx } from '../fused/body.js';
import { emitPointwise } from '../fused/emit-pointwise.js';
import type { FusedGroup, FusedValue } from '../fused/group.js';
import { KVEC } from '../fused/prelude.js';
import { IDX32_LIMIT, type KernelSpec, type OperandSpec } from '../fused/spec.js';
import { computeType, PRELUDE, storeAs } from './ctypes.js';

export type OperandKind = 'tensor' | 'bcast' | 'scalar';

export interface PwOperand {
  kind: OperandKind;
  /** Storage dtype (tensor/bcast operands). */
  dtype: DType;
  /** Round the loaded value through this dtype (a zero-dim operand of another dtype: PyTorch casts it to the op's dtype). */
  roundThrough?: DType;
}

export interface PointwiseSpec {
  /** Op name (kernel name prefix; letters, digits, underscores). */
  op: string;
  /** C expression over the operands a, b, c and the op parameters s0..s3, all of the compute type. */
  expr: string;
  operands: readonly PwOperand[];
  /** Number of op parameters (s0..): alpha, clamp bounds, softplus beta... */
  nParams: number;
  /** Operands are converted to this dtype's compute type. */
  compute: DType;
  out: DType;
  /** 0: contiguous path; otherwise the strided path over `rank` dims. */
  rank: number;
  /** Elements per vector access on the contiguous path (1 = none); must divide the element count. */
  vec: number;
  index64: boolean;
}

export interface GeneratedKernel {
  name: string;
  source: string;
  params: ParamType[];
}

const OPERAND_NAMES = ['a', 'b', 'c'] as const;
// 256 threads: 8 warps a block, enough to hide latency with several blocks per SM; the launcher
// caps the grid and loops (grid-stride), so this is also the unit of work distribution.
export const POINTWISE_BLOCK = 256;

/** A stable key for everything that changes the generated text. */
export function pointwiseKey(s: PointwiseSpec): string {
  const ops = s.operands.map((o) => `${o.kind[0]}${o.dtype}${o.roundThrough ? `~${o.roundThrough}` : ''}`).join(',');
  return `${s.op}|${s.expr}|${ops}|${s.nParams}|${s.compute}|${s.out}|${s.rank}|${s.vec}|${s.index64 ? 64 : 32}`;
}

export function pointwiseKernelName(s: PointwiseSpec): string {
  const h = createHash('sha256').update(pointwiseKey(s)).digest('hex').slice(0, 12);
  return `kiln_pw_${s.op.replace(/[^A-Za-z0-9_]/g, '_')}_${h}`;
}

export function generatePointwise(s: PointwiseSpec): GeneratedKernel {
  if (s.operands.length > OPERAND_NAMES.length) throw new Error(`pointwise codegen: at most 3 operands, got ${s.operands.length}`);
  if (s.vec > 1 && s.rank !== 0) throw new Error('pointwise codegen: vector access needs the contiguous path (rank 0)');
  const ct = computeType(s.compute);
  const name = pointwiseKernelName(s);
  // Value 0 is the output, 1.. the operands; host scalars are by-value inputs in the compute dtype.
  const values: FusedValue[] = [{ dtype: s.out, shape: [] }, ...s.operands.map((o): FusedValue => (o.kind === 'scalar' ? { dtype: s.compute, shape: [], byValue: true } : { dtype: o.dtype, shape: [] }))];
  const ids = s.operands.map((_, i) => i + 1);
  const group: FusedGroup = {
    kind: 'pointwise',
    nodes: [
      {
        kind: 'pointwise',
        op: s.op,
        args: ids.map((id) => ({ kind: 'value', id })),
        inputs: ids,
        outputs: [0],
        expr: { expr: s.expr, ct, roundThrough: s.operands.map((o) => o.roundThrough), store: (e) => storeAs(s.out, e, ct) },
      },
    ],
    rowScalars: new Set(),
    inputs: ids,
    outputs: [0],
    value: (id) => values[id]!,
    ...(s.nParams > 0 ? { params: { count: s.nParams, ct } } : {}),
  };
  // Contiguous: one dim every tensor operand walks linearly. Strided: every stride an argument (none
  // folded into the source), so one kernel serves every layout of its rank. A numel-1 operand reads
  // element 0; a scalar is no pointer at all.
  const rank = s.rank === 0 ? 1 : s.rank;
  const operand = (dtype: DType, out: boolean, element: boolean): OperandSpec => ({
    dtype,
    out,
    rowScalar: false,
    linear: element && s.rank === 0,
    outerZero: Array.from({ length: rank }, () => !element),
    rowZero: [],
    unitInner: element && s.rank === 0,
  });
  const spec: KernelSpec = {
    kind: 'pointwise',
    orank: rank,
    rrank: 0,
    ops: [operand(s.out, true, true), ...s.operands.map((o) => operand(o.kind === 'scalar' ? s.compute : o.dtype, false, o.kind === 'tensor'))],
    idx64: s.index64,
  };
  const k = emitPointwise(groupCtx(group, spec), name, { kind: 'pointwise', block: POINTWISE_BLOCK, ept: 1, vec: s.vec as 1 | 2 | 4 | 8 });
  const source = `${PRELUDE}${KVEC}
${k.source}
`;
  return { name, source, params: k.params.map((p) => p.type) };
}

// ------------------------------------------------------------------------------------------------
// Shape logic: coalescing dims and choosing the path.
// ------------------------------------------------------------------------------------------------

export interface Coalesced {
  shape: number[];
  /** strides[k] for operand k (0 = the output), one per dim of `shape`. */
  strides: number[][];
}

/**
 * Reorders dims so the output's strides descend (the output is written in memory order), drops
 * size-1 dims, and merges neighbours that every operand walks contiguously
 * (stride[d] == stride[d+1] * size[d+1]). The result indexes the same elements with fewer dims.
 */
export function coalesce(shape: readonly number[], strides: readonly (readonly number[])[]): Coalesced {
  const dims = shape.map((_, d) => d).filter((d) => shape[d] !== 1);
  const out = strides[0]!;
  // Stable sort by the output's stride, largest first (ties keep the logical order).
  dims.sort((x, y) => out[y]! - out[x]! || x - y);
  const rs: number[] = [];
  const rst: number[][] = strides.map(() => []);
  for (const d of dims) {
    const last = rs.length - 1;
    if (last >= 0 && strides.every((s, k) => rst[k]![last] === s[d]! * shape[d]!)) {
      rs[last] = rs[last]! * shape[d]!;
      strides.forEach((s, k) => (rst[k]![last] = s[d]!));
      continue;
    }
    rs.push(shape[d]!);
    strides.forEach((s, k) => rst[k]!.push(s[d]!));
  }
  return { shape: rs, strides: rst };
}

/** Largest element offset (+1) an operand reaches. */
export function reach(shape: readonly number[], strides: readonly number[]): number {
  let r = 1;
  for (let d = 0; d < shape.length; d++) r += (shape[d]! - 1) * Math.abs(strides[d]!);
  return r;
}

// The renderer's 32-bit bound (fused/spec.ts): indices, offsets and the grid-stride sum stay below 2^31.
export const INDEX32_LIMIT = IDX32_LIMIT;

/** Elements per thread for 16-byte access, given operand item sizes (the widest moves 16 bytes). */
export function vectorWidth(itemSizes: readonly number[]): number {
  const widest = Math.max(...itemSizes);
  return Math.max(1, Math.floor(16 / widest));
}
