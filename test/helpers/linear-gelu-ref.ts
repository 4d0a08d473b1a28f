/** llm.linearGelu's float64 reference for the tests (llm-linear-gelu.test.ts, webgpu-linear-gelu.test.ts). */
import type { Tensor } from '../../src/tensor/tensor.js';
import { geluRef } from './pointwise-ref.js';

const geluTanhRef = (v: number): number => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v * v * v)));

/** gelu(x W^T + b) in float64 over [rows, K] x [N, K]. */
export function refLinearGelu(x: Tensor, w: Tensor, b: Tensor | null, approximate: 'none' | 'tanh'): number[] {
  const K = x.shape[x.ndim - 1]!;
  const N = w.shape[0]!;
  const xs = x.toFlatArray();
  const ws = w.toFlatArray();
  const bs = b?.toFlatArray();
  const out: number[] = [];
  for (let r = 0; r < xs.length / K; r++) {
    for (let n = 0; n < N; n++) {
      let s = bs ? bs[n]! : 0;
      for (let k = 0; k < K; k++) s += xs[r * K + k]! * ws[n * K + k]!;
      out.push(approximate === 'tanh' ? geluTanhRef(s) : geluRef(s));
    }
  }
  return out;
}

