/**
 * float64 erf and gelu are accurate to double precision (eager and compiled): the float32-accurate
 * erf (~1e-7 relative) used to serve float64 results too, a silent precision loss. The reference
 * integrates 2/sqrt(pi) exp(-t^2) with composite Simpson's rule (over [0, x] for |x| <= 1, else
 * erfc over [|x|, |x| + 8]; 40000 intervals), independent of the kernels' series and continued fraction.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';

/** 2/sqrt(pi) * integral of exp(-t^2) over [a, b] (composite Simpson, 40000 intervals). */
function simpson(a: number, b: number): number {
  const n = 40000;
  const h = (b - a) / n;
  const f = (t: number): number => Math.exp(-t * t);
  let s = f(a) + f(b);
  for (let i = 1; i < n; i++) s += (i % 2 === 1 ? 4 : 2) * f(a + i * h);
  return ((2 / Math.sqrt(Math.PI)) * s * h) / 3;
}

/** erf from [0, x] for |x| <= 1; beyond, 1 - erfc with erfc from [|x|, |x| + 8] (no large sum to lose bits in). */
function erfSimpson(x: number): number {
  const a = Math.abs(x);
  if (a <= 1) return simpson(0, x);
  return Math.sign(x) * (1 - simpson(a, a + 8));
}

const XS = [-5.3, -3.1, -2.5, -1.7, -0.6, -0.01, 0.003, 0.3, 1, 2.49, 2.51, 3.7, 5.9];

test('float64 erf and gelu match a double-precision reference to 1e-14, eager and compiled', () => {
  const x = kiln.tensor(XS, { dtype: 'float64' });
  const erfRef = XS.map(erfSimpson);
  const geluRef = XS.map((v) => 0.5 * v * (1 + erfSimpson(v / Math.SQRT2)));
  const compiled = kiln.compile((t: kiln.Tensor) => [kiln.erf(t), kiln.gelu(t)] as const);
  const [ce, cg] = compiled(x);
  for (const [name, got, want] of [
    ['erf', kiln.erf(x).toFlatArray(), erfRef],
    ['gelu', kiln.gelu(x).toFlatArray(), geluRef],
    ['compiled erf', ce.toFlatArray(), erfRef],
    ['compiled gelu', cg.toFlatArray(), geluRef],
  ] as const) {
    got.forEach((g, i) => {
      const tol = 1e-14 * Math.max(1, Math.abs(want[i]!));
      assert.ok(Math.abs(g - want[i]!) <= tol, `${name}(${XS[i]}) = ${g}, reference ${want[i]} (|diff| ${Math.abs(g - want[i]!)})`);
    });
  }
});

test('float32 erf stays within float32 rounding of the reference', () => {
  const got = kiln.erf(kiln.tensor(XS)).toFlatArray();
  got.forEach((g, i) => assert.ok(Math.abs(g - erfSimpson(Math.fround(XS[i]!))) <= 2.4e-7, `erf(${XS[i]}) = ${g}`));
});
