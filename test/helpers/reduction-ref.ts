/**
 * Float64 references for the reduction group, written independently of the kernels: they work on
 * a tensor's logical values (row-major, as toFlatArray gives them) by unravelling every flat index.
 */

export interface RefResult {
  values: number[];
  shape: number[];
}

function unravel(i: number, shape: readonly number[]): number[] {
  const idx = new Array<number>(shape.length).fill(0);
  for (let d = shape.length - 1; d >= 0; d--) {
    idx[d] = i % shape[d]!;
    i = Math.floor(i / shape[d]!);
  }
  return idx;
}

function ravel(idx: readonly number[], shape: readonly number[]): number {
  let f = 0;
  for (let d = 0; d < shape.length; d++) f = f * shape[d]! + idx[d]!;
  return f;
}

/** Normalised, de-duplicated dims; null means every dim. */
export function refDims(dim: number | readonly number[] | null, rank: number): number[] {
  if (dim === null) return Array.from({ length: rank }, (_, i) => i);
  const list = typeof dim === 'number' ? [dim] : [...dim];
  if (list.length === 0) return Array.from({ length: rank }, (_, i) => i);
  return list.map((d) => (d < 0 ? d + rank : d));
}

/**
 * Groups the values by output position (each group in the input's row-major order, which is the
 * row-major order of the reduced dims) and applies `f` to each group.
 */
export function refReduce(
  values: readonly number[],
  shape: readonly number[],
  dim: number | readonly number[] | null,
  keepdim: boolean,
  f: (group: number[]) => number,
): RefResult {
  const dims = refDims(dim, shape.length);
  const keptShape = shape.filter((_, d) => !dims.includes(d));
  const outShape = keepdim ? shape.map((s, d) => (dims.includes(d) ? 1 : s)) : keptShape;
  const groups: number[][] = Array.from({ length: keptShape.reduce((a, b) => a * b, 1) }, () => []);
  for (let i = 0; i < values.length; i++) {
    const idx = unravel(i, shape);
    const kept = idx.filter((_, d) => !dims.includes(d));
    groups[ravel(kept, keptShape)]!.push(values[i]!);
  }
  return { values: groups.map(f), shape: outShape };
}

/** Applies `f` to each line along `dim`; `f` returns the new line (possibly of another length). */
export function refAlong(values: readonly number[], shape: readonly number[], dim: number, f: (line: number[]) => number[]): RefResult {
  const rank = shape.length;
  if (rank === 0) return { values: f([values[0]!]), shape: [] };
  const d0 = dim < 0 ? dim + rank : dim;
  const len = shape[d0]!;
  const otherShape = shape.filter((_, d) => d !== d0);
  const nLines = otherShape.reduce((a, b) => a * b, 1);
  const lines: number[][] = Array.from({ length: nLines }, () => []);
  for (let i = 0; i < values.length; i++) {
    const idx = unravel(i, shape);
    lines[ravel(idx.filter((_, d) => d !== d0), otherShape)]![idx[d0]!] = values[i]!;
  }
  const results = lines.map((l) => f(l.length === len ? l : Array.from({ length: len }, (_, i) => l[i]!)));
  const outLen = results.length > 0 ? results[0]!.length : len;
  const outShape = [...shape];
  outShape[d0] = outLen;
  const out = new Array<number>(outShape.reduce((a, b) => a * b, 1));
  for (let o = 0; o < out.length; o++) {
    const idx = unravel(o, outShape);
    out[o] = results[ravel(idx.filter((_, d) => d !== d0), otherShape)]![idx[d0]!]!;
  }
  return { values: out, shape: outShape };
}

export const refSum = (g: number[]): number => g.reduce((a, b) => a + b, 0);
export const refProd = (g: number[]): number => g.reduce((a, b) => a * b, 1);
export const refMean = (g: number[]): number => refSum(g) / g.length;
export function refMax(g: number[]): number {
  if (g.some(Number.isNaN)) return NaN;
  return Math.max(...g);
}
export function refMin(g: number[]): number {
  if (g.some(Number.isNaN)) return NaN;
  return Math.min(...g);
}
/** First index of the extreme value; a NaN wins at its first position. */
export function refArgExt(g: number[], largest: boolean): number {
  const nan = g.findIndex(Number.isNaN);
  if (nan >= 0) return nan;
  const m = largest ? Math.max(...g) : Math.min(...g);
  return g.indexOf(m);
}
export function refVar(g: number[], correction: number): number {
  const mu = refMean(g);
  let ss = 0;
  for (const x of g) ss += (x - mu) ** 2;
  return ss / Math.max(0, g.length - correction);
}
/** Naive log(sum(exp)) shifted by the max; only -inf/inf/NaN groups need care. */
export function refLogsumexp(g: number[]): number {
  if (g.some(Number.isNaN)) return NaN;
  const m = Math.max(-Infinity, ...g);
  if (m === -Infinity || m === Infinity) return m;
  return m + Math.log(g.reduce((a, x) => a + Math.exp(x - m), 0));
}

export function refSoftmax(line: number[]): number[] {
  const m = Math.max(...line);
  const e = line.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}
export function refLogSoftmax(line: number[]): number[] {
  const m = Math.max(...line);
  const lse = m + Math.log(line.reduce((a, x) => a + Math.exp(x - m), 0));
  return line.map((x) => x - lse);
}
export function refCumsum(line: number[]): number[] {
  let s = 0;
  return line.map((x) => (s += x));
}
export function refCumprod(line: number[]): number[] {
  let s = 1;
  return line.map((x) => (s *= x));
}

/** Stable insertion sort of (value, index); NaN above every number. Returns the index order. */
export function refSortOrder(line: readonly number[], descending: boolean): number[] {
  // "a before b" for distinct keys: ascending by value with NaN last; descending reversed.
  const key = (x: number): number => (Number.isNaN(x) ? Infinity : x);
  const rank = (x: number): number => (Number.isNaN(x) ? 1 : 0); // breaks inf vs NaN
  const less = (a: number, b: number): boolean => {
    const ka = key(a);
    const kb = key(b);
    if (ka !== kb) return descending ? ka > kb : ka < kb;
    const ra = rank(a);
    const rb = rank(b);
    return descending ? ra > rb : ra < rb;
  };
  const order: number[] = [];
  for (let i = 0; i < line.length; i++) {
    let j = order.length;
    while (j > 0 && less(line[i]!, line[order[j - 1]!]!)) j--;
    order.splice(j, 0, i);
  }
  return order;
}
