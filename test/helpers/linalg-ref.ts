/**
 * Independent float64 references for the linalg tests: naive loops over dense row-major values,
 * written without any of the kernels' code.
 */

function prod(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

function rowMajorIndex(idx: readonly number[], shape: readonly number[]): number {
  let off = 0;
  for (let d = 0; d < shape.length; d++) off = off * shape[d]! + idx[d]!;
  return off;
}

/** torch.matmul semantics on dense values: returns { values, shape }. */
export function refMatmul(a: readonly number[], aShape: readonly number[], b: readonly number[], bShape: readonly number[]): { values: number[]; shape: number[] } {
  const aVec = aShape.length === 1;
  const bVec = bShape.length === 1;
  const as = aVec ? [1, aShape[0]!] : [...aShape];
  const bs = bVec ? [bShape[0]!, 1] : [...bShape];
  const m = as[as.length - 2]!;
  const k = as[as.length - 1]!;
  const n = bs[bs.length - 1]!;
  if (bs[bs.length - 2] !== k) throw new Error('refMatmul: inner mismatch');
  const ba = as.slice(0, -2);
  const bb = bs.slice(0, -2);
  const rank = Math.max(ba.length, bb.length);
  const pa = [...new Array<number>(rank - ba.length).fill(1), ...ba];
  const pb = [...new Array<number>(rank - bb.length).fill(1), ...bb];
  const batch = pa.map((x, i) => Math.max(x, pb[i]!));
  const nb = prod(batch);
  const values: number[] = [];
  const idx = new Array<number>(rank).fill(0);
  for (let t = 0; t < nb; t++) {
    const ia = rowMajorIndex(idx.map((v, d) => (pa[d] === 1 ? 0 : v)), pa);
    const ib = rowMajorIndex(idx.map((v, d) => (pb[d] === 1 ? 0 : v)), pb);
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let p = 0; p < k; p++) s += a[ia * m * k + i * k + p]! * b[ib * k * n + p * n + j]!;
        values.push(s);
      }
    }
    for (let d = rank - 1; d >= 0; d--) {
      idx[d]!++;
      if (idx[d]! < batch[d]!) break;
      idx[d] = 0;
    }
  }
  const shape = [...batch];
  if (!aVec) shape.push(m);
  if (!bVec) shape.push(n);
  return { values, shape };
}

/** Transposes a dense [r, c] matrix. */
export function refTranspose(v: readonly number[], r: number, c: number): number[] {
  const out = new Array<number>(r * c);
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) out[j * r + i] = v[i * c + j]!;
  return out;
}

/** Mean and biased variance of a list. */
export function meanVar(xs: readonly number[]): { mean: number; variance: number } {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const variance = xs.reduce((a, x) => a + (x - mean) * (x - mean), 0) / xs.length;
  return { mean, variance };
}

/** layer norm over rows of length `inner`. */
export function refLayerNorm(x: readonly number[], inner: number, w: readonly number[] | null, b: readonly number[] | null, eps: number): number[] {
  const out: number[] = [];
  for (let base = 0; base < x.length; base += inner) {
    const row = x.slice(base, base + inner);
    const { mean, variance } = meanVar(row);
    row.forEach((v, i) => out.push(((v - mean) / Math.sqrt(variance + eps)) * (w ? w[i]! : 1) + (b ? b[i]! : 0)));
  }
  return out;
}

export function refRmsNorm(x: readonly number[], inner: number, w: readonly number[] | null, eps: number): number[] {
  const out: number[] = [];
  for (let base = 0; base < x.length; base += inner) {
    const row = x.slice(base, base + inner);
    const ms = row.reduce((a, v) => a + v * v, 0) / inner;
    row.forEach((v, i) => out.push((v / Math.sqrt(ms + eps)) * (w ? w[i]! : 1)));
  }
  return out;
}

/** group norm on dense NC* values. */
export function refGroupNorm(x: readonly number[], shape: readonly number[], groups: number, w: readonly number[] | null, b: readonly number[] | null, eps: number): number[] {
  const [n, c] = shape as [number, number];
  const s = prod(shape.slice(2));
  const cpg = c / groups;
  const out = new Array<number>(x.length);
  for (let i = 0; i < n; i++) {
    for (let g = 0; g < groups; g++) {
      const vals: number[] = [];
      for (let ch = g * cpg; ch < (g + 1) * cpg; ch++) for (let p = 0; p < s; p++) vals.push(x[(i * c + ch) * s + p]!);
      const { mean, variance } = meanVar(vals);
      for (let ch = g * cpg; ch < (g + 1) * cpg; ch++) {
        for (let p = 0; p < s; p++) {
          const at = (i * c + ch) * s + p;
          out[at] = ((x[at]! - mean) / Math.sqrt(variance + eps)) * (w ? w[ch]! : 1) + (b ? b[ch]! : 0);
        }
      }
    }
  }
  return out;
}

/** Per-channel values of dense NC* data. */
export function channelValues(x: readonly number[], shape: readonly number[], ch: number): number[] {
  const [n, c] = shape as [number, number];
  const s = prod(shape.slice(2));
  const vals: number[] = [];
  for (let i = 0; i < n; i++) for (let p = 0; p < s; p++) vals.push(x[(i * c + ch) * s + p]!);
  return vals;
}

/** batch norm with given per-channel mean/var on dense NC* values. */
export function refBatchNormApply(x: readonly number[], shape: readonly number[], mean: readonly number[], variance: readonly number[], w: readonly number[] | null, b: readonly number[] | null, eps: number): number[] {
  const c = shape[1]!;
  const s = prod(shape.slice(2));
  return x.map((v, at) => {
    const ch = Math.floor(at / s) % c;
    return ((v - mean[ch]!) / Math.sqrt(variance[ch]! + eps)) * (w ? w[ch]! : 1) + (b ? b[ch]! : 0);
  });
}
