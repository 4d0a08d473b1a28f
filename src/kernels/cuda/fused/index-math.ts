/**
 * Index expressions: a linear index decomposed into coordinates over (coalesced) dims whose sizes
 * are kernel arguments, and each operand's element offset as the dot product of those coordinates
 * with its strides. Strides that the spec fixes (0: broadcast, 1: unit innermost) are folded into
 * the source; the rest are arguments. Operands addressed linearly use the index itself, so a fully
 * contiguous kernel does no div/mod at all. The same arithmetic as the JS kernels' odometers, in
 * closed form (a GPU thread starts anywhere in the iteration space).
 */
import type { Param, ParamType } from './args.js';

export interface IndexPlan {
  /** Statements computing coordinates (empty when every operand is linear). */
  readonly coords: string[];
  /** Offset expression per operand. */
  readonly offsets: string[];
  /** Stride parameters the offsets read. */
  readonly params: Param[];
}

export interface DimsOperand {
  readonly linear: boolean;
  readonly zero: readonly boolean[];
  readonly unitInner: boolean;
}

/**
 * Coordinates of index `lin` over dims named `${sizePrefix}<d>` (outermost first), and offsets of
 * each operand: `${stridePrefix}<k>_<d>` parameters. `tag` keeps variable names unique when a
 * kernel decomposes two indices (outer row index and element-in-row index).
 */
export function indexPlan(lin: string, rank: number, ops: readonly DimsOperand[], sizePrefix: string, stridePrefix: string, tag: string, idx: string, idxParam: ParamType): IndexPlan {
  const coords: string[] = [];
  const params: Param[] = [];
  const needCoords = ops.some((o) => !o.linear && o.zero.some((z) => !z));
  if (needCoords) {
    if (rank === 1) coords.push(`[[maybe_unused]] const ${idx} ${tag}0 = ${lin};`);
    else {
      coords.push(`${idx} ${tag}rem = ${lin};`);
      for (let d = rank - 1; d >= 1; d--) {
        coords.push(`[[maybe_unused]] const ${idx} ${tag}${d} = ${tag}rem % ${sizePrefix}${d};`);
        coords.push(`${tag}rem /= ${sizePrefix}${d};`);
      }
      coords.push(`[[maybe_unused]] const ${idx} ${tag}0 = ${tag}rem;`);
    }
  }
  const offsets = ops.map((o, k) => {
    if (o.linear) return lin;
    const terms: string[] = [];
    for (let d = 0; d < rank; d++) {
      if (o.zero[d]) continue;
      if (d === rank - 1 && o.unitInner) terms.push(`${tag}${d}`);
      else {
        const name = `${stridePrefix}${k}_${d}`;
        params.push({ name, type: idxParam, source: { kind: 'int', what: name } });
        terms.push(`${tag}${d} * ${name}`);
      }
    }
    return terms.length === 0 ? `(${idx})0` : terms.length === 1 ? terms[0]! : `(${terms.join(' + ')})`;
  });
  return { coords, offsets, params };
}

/** Size parameters `${prefix}0..rank-1`. */
export function sizeParams(prefix: string, rank: number, idxParam: ParamType): Param[] {
  return Array.from({ length: rank }, (_, d): Param => ({ name: `${prefix}${d}`, type: idxParam, source: { kind: 'int', what: `${prefix}${d}` } }));
}
