/**
 * float64 reference of llm.linearSiluAndMul for the cpu and cuda tests: y = x W^T (+ b), each
 * entry rounded (`round`: the dtype's rounding, as the linear stores it), then silu(g) * u of the
 * gate half g and the up half u, unrounded (the caller's tolerance covers the output rounding).
 */
import type { Tensor } from '../../src/tensor/tensor.js';

const host = (t: Tensor): number[] => t.to('cpu').to('float64').contiguous().toFlatArray();

export function refLinearSiluMul(x: Tensor, w: Tensor, b: Tensor | null, round: (v: number) => number = (v) => v): number[] {
  const k = x.shape[x.ndim - 1]!;
  const n2 = w.shape[0]!;
  const half = n2 / 2;
  const [xv, wv] = [host(x), host(w)];
  const bv = b ? host(b) : null;
  const rows = xv.length / k;
  const out: number[] = [];
  for (let r = 0; r < rows; r++) {
    const y = (n: number): number => {
      let s = 0;
      for (let i = 0; i < k; i++) s += xv[r * k + i]! * wv[n * k + i]!;
      return round(s + (bv ? bv[n]! : 0));
    };
    for (let n = 0; n < half; n++) {
      const g = y(n);
      out.push((g / (1 + Math.exp(-g))) * y(half + n));
    }
  }
  return out;
}
