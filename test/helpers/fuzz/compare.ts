/**
 * Comparison of a Kiln result with torch's recorded one. Tolerances are per output dtype, loose
 * enough for a few ulps of difference compounded over a 4-op chain (kernels may sum in another
 * order, and float16/bfloat16 round at every step), and exact for integers and bool. NaN matches
 * NaN; an infinity must match with its sign.
 */
import type { Tensor } from '../../../src/index.js';
import { decodeValue, type EncOutput, type EncValue } from './fixture.js';

export const TOLERANCE: Record<string, { atol: number; rtol: number }> = {
  float64: { atol: 1e-10, rtol: 1e-9 },
  float32: { atol: 2e-5, rtol: 1e-4 },
  float16: { atol: 4e-3, rtol: 8e-3 },
  bfloat16: { atol: 3e-2, rtol: 3e-2 },
};

/** Float dtypes from the most precise to the least. */
const FLOAT_ORDER = ['float64', 'float32', 'float16', 'bfloat16'];

/**
 * The tolerance a result gets is its least precise float dtype so far in the chain: compiled code
 * may keep a float16 intermediate in float32 (as Inductor does), so a float64 result of a float16
 * chain is only as good as float16.
 */
export function loosest(dtypes: readonly string[]): string {
  let worst = 'float64';
  for (const d of dtypes) if (FLOAT_ORDER.indexOf(d) > FLOAT_ORDER.indexOf(worst)) worst = d;
  return worst;
}

export interface Diff {
  kind: 'dtype' | 'shape' | 'value';
  detail: string;
}

function close(got: number, want: number, tol: { atol: number; rtol: number } | undefined): boolean {
  if (Number.isNaN(want)) return Number.isNaN(got);
  if (!Number.isFinite(want)) return got === want;
  if (!tol) return got === want;
  return Math.abs(got - want) <= tol.atol + tol.rtol * Math.abs(want);
}

/** Compares values; returns a description of the first bad element, or null. */
export function compareValues(got: readonly number[], want: readonly EncValue[], dtype: string): { bad: string | null; exact: boolean } {
  if (got.length !== want.length) return { bad: `${got.length} elements, expected ${want.length}`, exact: false };
  const tol = TOLERANCE[dtype];
  let exact = true;
  for (let i = 0; i < got.length; i++) {
    const w = decodeValue(want[i]!);
    const g = got[i]!;
    if (!Object.is(g, w) && !(Number.isNaN(g) && Number.isNaN(w))) exact = false;
    if (!close(g, w, tol)) return { bad: `element ${i}: kiln ${g}, torch ${w}`, exact: false };
  }
  return { bad: null, exact };
}

/**
 * `exact`: every element bit-equal to torch's, so a later discontinuous op (a comparison, a cast to
 * an integer) may be held to torch's answer exactly.
 */
export function compareTensor(t: Tensor, want: EncOutput, tolDtype = want.dtype): { diff: Diff | null; exact: boolean } {
  if (t.dtype !== want.dtype) return { diff: { kind: 'dtype', detail: `kiln ${t.dtype}, torch ${want.dtype}` }, exact: false };
  if (t.shape.length !== want.shape.length || t.shape.some((s, i) => s !== want.shape[i])) {
    return { diff: { kind: 'shape', detail: `kiln [${t.shape.join(', ')}], torch [${want.shape.join(', ')}]` }, exact: false };
  }
  const { bad, exact } = compareValues(t.toFlatArray(), want.values, FLOAT_ORDER.includes(want.dtype) ? tolDtype : want.dtype);
  return { diff: bad ? { kind: 'value', detail: bad } : null, exact };
}
