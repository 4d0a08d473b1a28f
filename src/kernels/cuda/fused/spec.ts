/**
 * What a generated kernel's source depends on besides its group: the launch layout of a group
 * (operands' sizes and strides over the iteration space, coalesced; computed by the caller, the
 * compiler's layout.ts or an eager kernel) and the spec it reduces to. Moved here from
 * compile/codegen/cuda/layout.ts with the renderer.
 *
 * `kernelSpec` reduces a layout to what is baked into generated source: ranks, dtypes, which
 * operands are addressed by the linear index, which strides are 0 (broadcast) or 1 (innermost,
 * vectorisable), and the index width. Sizes and the remaining strides are kernel arguments, so one
 * compiled kernel serves every size of a symbolic dim that keeps the spec.
 */
import type { DType } from '../../../tensor/dtype.js';
import { contiguousStrides } from '../../../tensor/layout.js';

export interface OperandLayout {
  readonly value: number;
  readonly dtype: DType;
  readonly out: boolean;
  /** A per-row value of a reduce group (stride 0 over the row dims). */
  readonly rowScalar: boolean;
  /** Element offset of the operand's first element. */
  readonly offset: number;
  /** Elements from the offset to one past the furthest addressed element (for the index width). */
  readonly span: number;
}

export interface KernelLayout {
  readonly kind: 'pointwise' | 'reduce';
  /** Outputs first, then inputs (the group's order). */
  readonly operands: readonly OperandLayout[];
  /** Pointwise: the iteration space; reduce: the outer (one per row) dims. Never empty. */
  readonly oshape: readonly number[];
  readonly ost: readonly (readonly number[])[];
  /** Reduce: the row dims (empty for pointwise). */
  readonly rshape: readonly number[];
  readonly rst: readonly (readonly number[])[];
}

export const prod = (xs: readonly number[]): number => xs.reduce((a, b) => a * b, 1);

export interface OperandSpec {
  readonly dtype: DType;
  readonly out: boolean;
  readonly rowScalar: boolean;
  /**
   * Pointwise: the element offset equals the linear index over the iteration space (no stride
   * arguments). Reduce: the row offset equals the linear index within the row.
   */
  readonly linear: boolean;
  /** Outer dims (pointwise: all dims) with stride 0. */
  readonly outerZero: readonly boolean[];
  /** Row dims with stride 0 (reduce only). */
  readonly rowZero: readonly boolean[];
  /** The innermost stride (pointwise: of the iteration space; reduce: of the row) is 1. */
  readonly unitInner: boolean;
}

export interface KernelSpec {
  readonly kind: 'pointwise' | 'reduce';
  readonly orank: number;
  readonly rrank: number;
  readonly ops: readonly OperandSpec[];
  /** 64-bit index math (some tensor or the iteration space is too large for int). */
  readonly idx64: boolean;
}

/**
 * Element counts at or above this switch index math to 64 bits. 2^31 less a margin: grid-stride
 * loops compute `i + step` one step past the end, and the step (grid x block x elements per thread)
 * is capped well below 2^26 by the launch geometry (configs.ts), so the sum never overflows int.
 */
export const IDX32_LIMIT = 2 ** 31 - 2 ** 26;

function equal(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export function kernelSpec(L: KernelLayout): KernelSpec {
  const total = prod(L.oshape) * Math.max(1, prod(L.rshape));
  const idx64 = total >= IDX32_LIMIT || L.operands.some((o) => o.offset + o.span >= IDX32_LIMIT);
  const oc = contiguousStrides(L.oshape);
  const rc = contiguousStrides(L.rshape);
  const ops = L.operands.map((o, k): OperandSpec => {
    const os = L.ost[k]!;
    const rs = L.rst[k]!;
    if (L.kind === 'pointwise') {
      return { dtype: o.dtype, out: o.out, rowScalar: false, linear: equal(os, oc), outerZero: os.map((s) => s === 0), rowZero: [], unitInner: os[os.length - 1] === 1 };
    }
    return {
      dtype: o.dtype,
      out: o.out,
      rowScalar: o.rowScalar,
      linear: rs.length > 0 && equal(rs, rc),
      outerZero: os.map((s) => s === 0),
      rowZero: rs.map((s) => s === 0),
      unitInner: rs[rs.length - 1] === 1,
    };
  });
  return { kind: L.kind, orank: L.oshape.length, rrank: L.rshape.length, ops, idx64 };
}

/** A stable string for a spec (the compiled-kernel cache key within a program). */
export function specKey(s: KernelSpec): string {
  const op = (o: OperandSpec): string =>
    `${o.dtype}${o.out ? 'o' : 'i'}${o.rowScalar ? 'r' : ''}${o.linear ? 'L' : ''}${o.unitInner ? 'U' : ''}:${o.outerZero.map((z) => (z ? 0 : 1)).join('')}/${o.rowZero.map((z) => (z ? 0 : 1)).join('')}`;
  return `${s.kind}|${s.orank}|${s.rrank}|${s.idx64 ? 64 : 32}|${s.ops.map(op).join(',')}`;
}
