/**
 * float64 reference of llm.qkNormRotary for the cpu and cuda tests: per row of the last dim,
 * rms-normalise with the weight, round the normalised values (`round`: the dtype's rounding, as
 * the unfused norm's output would be), then rotate (neox halves or gpt-j pairs).
 */
import type { Tensor } from '../../src/tensor/tensor.js';

/** t broadcast to `shape`, read back as float64 (from any device). */
const dense = (t: Tensor, shape: readonly number[]): number[] => t.to('cpu').to('float64').expand([...shape]).contiguous().toFlatArray();

export function refNormRotary(x: Tensor, w: Tensor, eps: number, cos: Tensor, sin: Tensor, isNeox: boolean, round: (v: number) => number = (v) => v): number[] {
  const d = x.shape[x.ndim - 1]!;
  const xv = dense(x, x.shape);
  const wv = w.to('cpu').to('float64').toFlatArray();
  const cv = dense(cos, x.shape);
  const sv = dense(sin, x.shape);
  const out = new Array<number>(xv.length);
  for (let base = 0; base < xv.length; base += d) {
    let ss = 0;
    for (let i = 0; i < d; i++) ss += xv[base + i]! ** 2;
    const r = 1 / Math.sqrt(ss / d + eps);
    const n = Array.from({ length: d }, (_, i) => round(xv[base + i]! * r * wv[i]!));
    const h = d / 2;
    for (let i = 0; i < d; i++) {
      const rot = isNeox ? (i < h ? -n[i + h]! : n[i - h]!) : i % 2 === 0 ? -n[i + 1]! : n[i - 1]!;
      out[base + i] = n[i]! * cv[base + i]! + rot * sv[base + i]!;
    }
  }
  return out;
}

/**
 * The caches llm.qkNormRotaryCache (or qkNormRotary + reshapeAndCache) leaves, flat: row n of the
 * new keys `kRows` and values `vRows` (`row` elements each: kv heads x head dim) in slot slots[n]
 * of copies of `keyCache` / `valueCache` (as they were before the call); a negative slot (padding)
 * or one past the caches writes nothing.
 */
export function refCacheWrite(keyCache: readonly number[], valueCache: readonly number[], kRows: readonly number[], vRows: readonly number[], slots: readonly number[], row: number): { keys: number[]; values: number[] } {
  const keys = [...keyCache];
  const values = [...valueCache];
  slots.forEach((s, n) => {
    if (s < 0 || (s + 1) * row > keys.length) return;
    for (let i = 0; i < row; i++) {
      keys[s * row + i] = kRows[n * row + i]!;
      values[s * row + i] = vRows[n * row + i]!;
    }
  });
  return { keys, values };
}
