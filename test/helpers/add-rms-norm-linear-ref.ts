/**
 * float64 reference of llm.addRmsNormLinear for the cpu and cuda tests: s = x + r (r null: x),
 * h = round(s), y = round(s * rsqrt(mean(s^2) + eps) * gamma), lin = y W^T (+ b); plain: lin
 * unrounded; gated: silu(round(g)) * round(u) of the halves, unrounded (the caller's tolerance
 * covers the output rounding). `round`: the dtype's rounding where the op stores.
 */
import type { Tensor } from '../../src/tensor/tensor.js';

const host = (t: Tensor): number[] => t.to('cpu').to('float64').contiguous().toFlatArray();

export function refAddRmsNormLinear(
  x: Tensor,
  r: Tensor | null,
  gamma: Tensor,
  eps: number,
  w: Tensor,
  b: Tensor | null,
  gated: boolean,
  round: (v: number) => number = (v) => v,
): { out: number[]; h: number[] } {
  const k = x.shape[x.ndim - 1]!;
  const nw = w.shape[0]!;
  const n = gated ? nw / 2 : nw;
  const [xv, wv, gv] = [host(x), host(w), host(gamma)];
  const rv = r ? host(r) : null;
  const bv = b ? host(b) : null;
  const rows = xv.length / k;
  const out: number[] = [];
  const h: number[] = [];
  for (let row = 0; row < rows; row++) {
    const s = Array.from({ length: k }, (_, i) => xv[row * k + i]! + (rv ? rv[row * k + i]! : 0));
    for (const v of s) h.push(round(v));
    const rstd = 1 / Math.sqrt(s.reduce((a, v) => a + v * v, 0) / k + eps);
    const y = s.map((v, i) => round(v * rstd * gv[i]!));
    const lin = (j: number): number => {
      let acc = 0;
      for (let i = 0; i < k; i++) acc += y[i]! * wv[j * k + i]!;
      return acc + (bv ? bv[j]! : 0);
    };
    for (let j = 0; j < n; j++) {
      if (!gated) {
        out.push(lin(j));
        continue;
      }
      const g = round(lin(j));
      out.push((g / (1 + Math.exp(-g))) * round(lin(n + j)));
    }
  }
  return { out, h };
}
