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

/** Every finite bfloat16 value, as float32 numbers. */
function allBf16(): number[] {
  const u = new Uint32Array(1);
  const f = new Float32Array(u.buffer);
  const xs: number[] = [];
  for (let b = 0; b < 0x10000; b++) {
    u[0] = b << 16;
    if (Number.isFinite(f[0]!)) xs.push(f[0]!);
  }
  return xs;
}

/** Distance in bfloat16 ulps between bfloat16 values a and b (same sign assumed near zero). */
function bf16Ulps(a: number, b: number): number {
  const key = (v: number): number => {
    const u = new Uint32Array(new Float32Array([v]).buffer)[0]! >>> 16;
    return u & 0x8000 ? -(u & 0x7fff) : u;
  };
  return Math.abs(key(a) - key(b));
}

// Kernels whose every result is bfloat16 compute tanh with tanh.approx.f32 (prelude.ts): checked
// here over all 65,280 finite bfloat16 inputs, not a sample.
test('cuda fast math: compiled bfloat16 tanh is within one ulp at every bfloat16 input', { skip }, (t) => {
  const xs = allBf16();
  const f = kiln.compile((x: Tensor) => kiln.tanh(x), { name: 'fast-math-tanh-bf16-all' });
  const x = kiln.tensor(xs, { dtype: 'float32' }).to('bfloat16').to('cuda');
  const got = kiln.noGrad(() => f(x)).toFlatArray();
  let worst = 0;
  let at = '';
  for (let i = 0; i < xs.length; i++) {
    const want = toBf16(Math.tanh(xs[i]!));
    const d = bf16Ulps(got[i]!, want);
    if (d > worst) [worst, at] = [d, `x = ${xs[i]}: got ${got[i]}, float64 rounded ${want}`];
  }
  t.diagnostic(`worst ${worst} ulps at ${at}`);
  assert.ok(worst <= 1, `worst ${worst} ulps at ${at}`);
});

// GELU's tanh form, 0.5 x (1 + tanh(u)), cancels in 1 + tanh(u) for negative x, where any tanh
// error is magnified; bfloat16 eager pays the same through rounding tanh to bfloat16 first. The
// compiled result must stay within 2 ulps or 1e-3 |x| absolute (the size of the eager composite's
// error there, from tanh rounded to bfloat16: up to 2^-9 in 1 + tanh, times |x| / 2).
test('cuda fast math: compiled bfloat16 tanh-GELU at every bfloat16 input in [-8, 8]', { skip }, (t) => {
  const xs = allBf16().filter((v) => Math.abs(v) <= 8);
  const c = Math.sqrt(2 / Math.PI);
  const ref = (v: number): number => 0.5 * v * (1 + Math.tanh(c * (v + 0.044715 * v * v * v)));
  const f = kiln.compile((x: Tensor) => kiln.nn.functional.gelu(x, 'tanh'), { name: 'fast-math-gelu-tanh-bf16' });
  const x = kiln.tensor(xs, { dtype: 'float32' }).to('bfloat16').to('cuda');
  const got = kiln.noGrad(() => f(x)).toFlatArray();
  let worst = 0;
  let worstAt = '';
  let at = '';
  for (let i = 0; i < xs.length; i++) {
    const want = ref(xs[i]!);
    const err = Math.abs(got[i]! - want);
    const ulps = bf16Ulps(got[i]!, toBf16(want));
    const ok = ulps <= 2 || err <= 1e-3 * Math.abs(xs[i]!);
    if (ulps > worst) [worst, worstAt] = [ulps, `x = ${xs[i]}: got ${got[i]}, float64 ${want}`];
    if (!ok && at === '') at = `x = ${xs[i]}: got ${got[i]}, float64 ${want} (${ulps} ulps)`;
  }
  t.diagnostic(`worst ${worst} ulps at ${worstAt}`);
  assert.equal(at, '', `outside 2 ulps and 1e-3 |x| at ${at}`);
});
