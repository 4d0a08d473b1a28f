/**
 * Plain-JS float64 references for the indexing group, written over multi-indices (unravel/ravel)
 * rather than strides so that they share no logic with the kernels.
 */

export function size(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function unravel(i: number, shape: readonly number[]): number[] {
  const pos = new Array<number>(shape.length).fill(0);
  for (let d = shape.length - 1; d >= 0; d--) {
    pos[d] = i % shape[d]!;
    i = Math.floor(i / shape[d]!);
  }
  return pos;
}

export function ravel(pos: readonly number[], shape: readonly number[]): number {
  let i = 0;
  for (let d = 0; d < shape.length; d++) i = i * shape[d]! + pos[d]!;
  return i;
}

/** Position in a (right-aligned) broadcast operand of `shape` for a position in the output. */
export function bcastPos(pos: readonly number[], shape: readonly number[]): number[] {
  const off = pos.length - shape.length;
  return shape.map((s, d) => (s === 1 ? 0 : pos[off + d]!));
}

export function refGather(x: number[], xs: number[], dim: number, idx: number[], is: number[]): number[] {
  return idx.map((v, i) => {
    const pos = unravel(i, is);
    pos[dim] = v;
    return x[ravel(pos, xs)]!;
  });
}

export function refIndexSelect(x: number[], xs: number[], dim: number, idx: number[]): { values: number[]; shape: number[] } {
  const shape = [...xs];
  shape[dim] = idx.length;
  const values: number[] = [];
  for (let i = 0; i < size(shape); i++) {
    const pos = unravel(i, shape);
    pos[dim] = idx[pos[dim]!]!;
    values.push(x[ravel(pos, xs)]!);
  }
  return { values, shape };
}

export type RefReduce = null | 'sum' | 'prod' | 'mean' | 'amax' | 'amin';

export function refScatter(
  x: number[],
  xs: number[],
  dim: number,
  idx: number[],
  is: number[],
  src: number[] | number,
  srcShape: number[],
  reduce: RefReduce,
  intDiv = false,
): number[] {
  const out = [...x];
  const count = new Array<number>(out.length).fill(0);
  idx.forEach((v, i) => {
    const pos = unravel(i, is);
    const s = typeof src === 'number' ? src : src[ravel(pos, srcShape)]!;
    pos[dim] = v;
    const p = ravel(pos, xs);
    count[p]!++;
    if (reduce === null) out[p] = s;
    else if (reduce === 'sum' || reduce === 'mean') out[p] = out[p]! + s;
    else if (reduce === 'prod') out[p] = out[p]! * s;
    else if (reduce === 'amax') out[p] = Math.max(out[p]!, s);
    else out[p] = Math.min(out[p]!, s);
  });
  if (reduce === 'mean') {
    for (let p = 0; p < out.length; p++) {
      if (count[p]! > 0) out[p] = intDiv ? Math.floor(out[p]! / (count[p]! + 1)) : out[p]! / (count[p]! + 1);
    }
  }
  return out;
}

export function refMaskedFill(x: number[], xs: number[], m: number[], ms: number[], value: number): { values: number[]; shape: number[] } {
  const rank = Math.max(xs.length, ms.length);
  const shape: number[] = [];
  for (let d = 0; d < rank; d++) {
    const a = xs[d - (rank - xs.length)] ?? 1;
    const b = ms[d - (rank - ms.length)] ?? 1;
    shape.push(a === 1 ? b : a);
  }
  const values: number[] = [];
  for (let i = 0; i < size(shape); i++) {
    const pos = unravel(i, shape);
    values.push(m[ravel(bcastPos(pos, ms), ms)] ? value : x[ravel(bcastPos(pos, xs), xs)]!);
  }
  return { values, shape };
}

/**
 * index_put reference for int index lists (null = full slice) after masks are expanded by the
 * caller. Enumerates the indexing result's positions and writes the broadcast value there.
 */
export function refIndexPut(
  x: number[],
  xs: number[],
  indices: ({ values: number[]; shape: number[] } | null)[],
  vals: number[] | number,
  vs: number[],
  accumulate: boolean,
): number[] {
  const out = [...x];
  const advDims = indices.map((e, d) => (e ? d : -1)).filter((d) => d >= 0);
  const shapes = advDims.map((d) => indices[d]!.shape);
  const br = Math.max(0, ...shapes.map((s) => s.length));
  const b: number[] = new Array<number>(br).fill(1);
  for (const s of shapes) s.forEach((v, i) => (b[br - s.length + i] = v === 1 ? b[br - s.length + i]! : v));
  const adjacent = advDims.length > 0 && advDims[advDims.length - 1]! - advDims[0]! === advDims.length - 1;
  const slices = xs.map((_, d) => d).filter((d) => !advDims.includes(d));
  // Result layout: list of ['b', i] or ['s', d].
  const layout: [string, number][] = [];
  if (advDims.length === 0) slices.forEach((d) => layout.push(['s', d]));
  else if (adjacent) {
    slices.filter((d) => d < advDims[0]!).forEach((d) => layout.push(['s', d]));
    b.forEach((_, i) => layout.push(['b', i]));
    slices.filter((d) => d > advDims[0]!).forEach((d) => layout.push(['s', d]));
  } else {
    b.forEach((_, i) => layout.push(['b', i]));
    slices.forEach((d) => layout.push(['s', d]));
  }
  const rs = layout.map(([k, i]) => (k === 'b' ? b[i]! : xs[i]!));
  for (let i = 0; i < size(rs); i++) {
    const rpos = unravel(i, rs);
    const bpos = layout.map(([k], j) => (k === 'b' ? rpos[j]! : -1)).filter((v) => v >= 0);
    const target = new Array<number>(xs.length).fill(0);
    layout.forEach(([k, d], j) => {
      if (k === 's') target[d] = rpos[j]!;
    });
    for (const d of advDims) {
      const e = indices[d]!;
      let v = e.values[ravel(bcastPos(bpos, e.shape), e.shape)]!;
      if (v < 0) v += xs[d]!;
      target[d] = v;
    }
    const v = typeof vals === 'number' ? vals : vals[ravel(bcastPos(rpos, vs), vs)]!;
    const p = ravel(target, xs);
    out[p] = accumulate ? out[p]! + v : v;
  }
  return out;
}

export function refCat(parts: { values: number[]; shape: number[] }[], dim: number): { values: number[]; shape: number[] } {
  const kept = parts.filter((p) => !(p.shape.length === 1 && p.shape[0] === 0));
  const shape = [...kept[0]!.shape];
  shape[dim] = kept.reduce((a, p) => a + p.shape[dim]!, 0);
  const values: number[] = [];
  for (let i = 0; i < size(shape); i++) {
    const pos = unravel(i, shape);
    let k = 0;
    let at = pos[dim]!;
    while (at >= kept[k]!.shape[dim]!) at -= kept[k++]!.shape[dim]!;
    pos[dim] = at;
    values.push(kept[k]!.values[ravel(pos, kept[k]!.shape)]!);
  }
  return { values, shape };
}

export function refStack(parts: number[][], shape: number[], dim: number): { values: number[]; shape: number[] } {
  const out = [...shape];
  out.splice(dim, 0, parts.length);
  const values: number[] = [];
  for (let i = 0; i < size(out); i++) {
    const pos = unravel(i, out);
    const k = pos.splice(dim, 1)[0]!;
    values.push(parts[k]![ravel(pos, shape)]!);
  }
  return { values, shape: out };
}

export function refTri(x: number[], xs: number[], diagonal: number, lower: boolean): number[] {
  return x.map((v, i) => {
    const pos = unravel(i, xs);
    const r = pos[xs.length - 2]!;
    const c = pos[xs.length - 1]!;
    const keep = lower ? c - r <= diagonal : c - r >= diagonal;
    return keep ? v : 0;
  });
}

/** Slice of a flat row-major array along dim: [start, start + len). */
export function refSlice(x: number[], xs: number[], dim: number, start: number, len: number): number[] {
  const shape = [...xs];
  shape[dim] = len;
  const out: number[] = [];
  for (let i = 0; i < size(shape); i++) {
    const pos = unravel(i, shape);
    pos[dim]! += start;
    out.push(x[ravel(pos, xs)]!);
  }
  return out;
}
