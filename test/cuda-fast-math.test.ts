/**
 * The compiled CUDA kernels' fast float math (codegen/cuda prelude: kiln_fexp through ex2.approx,
 * kiln_ftanh, kiln_frcp through rcp.approx for sigmoid and silu) against float64 references, over
 * inputs that cover each function's branches and limits: zeros, the tanh Taylor/exp switch at
 * |x| = 0.03, exp's overflow and underflow, infinities and NaN. float32 results must stay within a
 * few float32 ulps: relative 5e-6 + 1.2e-7 |x| (ex2.approx's 2^-22.5, the rounding of x log2 e,
 * and tanh's 1 - e^-2|x| cancellation just above 0.03), or 1e-7 absolute near zero; bfloat16
 * results must equal the float64 value rounded to bfloat16 or a neighbour (one ulp). A result
 * below 1e-30 in magnitude may come back as zero: exp flushes subnormal results (ex2.approx.ftz),
 * and e^-x overflows float32 for x < -88.7, so silu's x / (1 + e^-x) is -0 there (in eager too).
 * Skips where no CUDA device can be used.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

const sigmoid64 = (x: number): number => 1 / (1 + Math.exp(-x));
const CASES: { name: string; fn: (x: Tensor) => Tensor; ref: (x: number) => number }[] = [
  { name: 'exp', fn: (x) => kiln.exp(x), ref: Math.exp },
  { name: 'tanh', fn: (x) => kiln.tanh(x), ref: Math.tanh },
  { name: 'sigmoid', fn: (x) => kiln.sigmoid(x), ref: sigmoid64 },
  { name: 'silu', fn: (x) => kiln.nn.functional.silu(x), ref: (x) => (Number.isFinite(x) ? x * sigmoid64(x) : x > 0 ? x : Number.NaN) },
];

/** Inputs: a sweep of magnitudes and signs plus the special values. */
function inputs(): number[] {
  const xs = [0, -0, 1e-8, 1e-4, 0.0299, 0.03, 0.0301, 0.5, 1, 2.5, 9, 15, 20, 40, 80, 87, 88.5, 89, 100, 1e4, Infinity, Number.NaN];
  for (let i = 0; i < 200; i++) xs.push(Math.sinh((i - 100) / 12));
  return [...xs, ...xs.map((x) => -x)];
}

/** float64 -> nearest float32 -> nearest bfloat16 (round to nearest even on the top 16 bits). */
function toBf16(x: number): number {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer);
  if (Number.isNaN(x)) return x;
  const lsb = (u[0]! >>> 16) & 1;
  u[0] = ((u[0]! + 0x7fff + lsb) >>> 16) << 16;
  return f[0]!;
}
/** The bfloat16 neighbours of a bfloat16 value b. */
function bf16Neighbours(b: number): number[] {
  const f = new Float32Array([b]);
  const u = new Uint32Array(f.buffer);
  const base = u[0]!;
  return [-1, 0, 1].map((d) => {
    u[0] = (base + d * 0x10000) >>> 0;
    return f[0]!;
  });
}

const sameOrBothNaN = (a: number, b: number): boolean => (Number.isNaN(a) && Number.isNaN(b)) || a === b;
const TINY = 1e-30;

for (const c of CASES) {
  test(`cuda fast math: compiled ${c.name} in float32 and bfloat16 against float64`, { skip }, () => {
    const xs = inputs();
    const f = kiln.compile((x: Tensor) => c.fn(x), { name: `fast-math-${c.name}` });
    for (const dtype of ['float32', 'bfloat16'] as const) {
      const x = kiln.tensor(xs, { dtype: 'float32' }).to(dtype).to('cuda');
      const got = kiln.noGrad(() => f(x)).toFlatArray();
      const xin = x.toFlatArray();
      for (let i = 0; i < xs.length; i++) {
        const want = c.ref(xin[i]!);
        const g = got[i]!;
        const at = `${c.name} ${dtype} at x = ${xin[i]}: got ${g}, float64 ${want}`;
        if (!Number.isFinite(Math.fround(want))) {
          assert.ok(sameOrBothNaN(g, Math.fround(want)), at);
          continue;
        }
        if (g === 0 && Math.abs(want) < TINY) continue;
        if (dtype === 'float32') {
          assert.ok(Math.abs(g - want) <= 1e-7 + (5e-6 + 1.2e-7 * Math.abs(xin[i]!)) * Math.abs(want), at);
        } else {
          assert.ok(bf16Neighbours(toBf16(want)).some((n) => sameOrBothNaN(n, g) || (n === 0 && g === 0)), at);
        }
      }
    }
  });
}
