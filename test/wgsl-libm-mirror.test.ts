/**
 * The branch-free WGSL exp and tanh of issue #20 (wgsl-libm/exp-log.ts, special.ts), mirrored in
 * JavaScript with every float32 operation rounded (Math.fround), against float64 over dense sweeps
 * (a million inputs and more per range, ten times the density test/webgpu-math.test.ts runs on an
 * adapter) and at the edges: once with each a * b + c rounded twice, as SwiftShader computes, and
 * once with it fused (an FMA, which NVIDIA's compiler may contract to). The mirror is read from the
 * WGSL text's constants, so a changed coefficient changes what is checked. No adapter needed.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import { WGSL_LIBM } from '../src/kernels/math/wgsl-libm/index.js';

const f = Math.fround;
const dv = new DataView(new ArrayBuffer(4));
const bitsOf = (x: number): number => (dv.setFloat32(0, x), dv.getInt32(0));
const fromBits = (i: number): number => (dv.setInt32(0, i | 0), dv.getFloat32(0));

/** The value of a WGSL hexadecimal float literal such as -0x1.55554ap-2f. */
function hexLit(s: string): number {
  const m = /^(-?)0x([0-9a-f])\.?([0-9a-f]*)p(-?\d+)f$/.exec(s);
  if (!m) throw new Error(`not a hex float literal: ${s}`);
  const v = (parseInt(m[2]! + m[3]!, 16) / 16 ** m[3]!.length) * 2 ** Number(m[4]);
  return m[1] ? -v : v;
}
/** The hex float literals of library function `name`, in text order. */
const litsOf = (name: string): number[] => (WGSL_LIBM.get(name)!.match(/-?0x[0-9a-f.]+p-?\d+f/g) ?? []).map(hexLit);

const [LOG2E, M, M2, LN2_HI, LN2_LO] = litsOf('kiln_exp');
const EXPM1 = litsOf('kiln_expm1_poly');
const TANH = litsOf('kiln_tanh_poly');

function mirror(fma: boolean) {
  const ma = (a: number, b: number, c: number): number => (fma ? f(a * b + c) : f(f(a * b) + c));
  const horner = (cs: number[], x: number): number => cs.slice(0, -1).reduceRight((acc, c) => ma(x, acc, c), cs[cs.length - 1]!);
  /** n and its bits as kiln_exp's: b = bits of c log2 e + 1.5 2^23, n = the masked bits less 1.5 2^23. */
  const reduce = (c: number): { b: number; r: number } => {
    const b = bitsOf(ma(c, LOG2E!, M!));
    const n = f(fromBits((b & 0x7fffff) | 0x4b000000) - M2!);
    return { b, r: ma(-n, LN2_LO!, ma(-n, LN2_HI!, c)) };
  };
  const expm1r = (r: number): number => ma(f(r * r), horner(EXPM1, r), r);
  const pow2 = (k: number): number => fromBits((k + 127) << 23);
  const exp = (x: number): number => {
    if (Number.isNaN(x)) return x;
    const { b, r } = reduce(Math.min(Math.max(x, -104), 89));
    const k = b - 0x4b400000;
    const k1 = k >> 1;
    return f(f(f(1 + expm1r(r)) * pow2(k1)) * pow2(k - k1));
  };
  const tanh = (x: number): number => {
    if (Number.isNaN(x)) return x;
    const a = Math.min(Math.abs(x), 9.1);
    const z = f(a * a);
    const tp = ma(f(a * z), horner(TANH, z), a);
    const c = f(2 * a);
    const { b, r } = reduce(c);
    const e = f(f(1 + expm1r(r)) * pow2(b - 0x4b400000));
    const t = a < 0.55 ? tp : f(1 - f(2 / f(e + 1)));
    return x < 0 || Object.is(x, -0) ? -t : t;
  };
  return { exp, tanh };
}

const MIN_NORMAL = 2 ** -126;
function ulp(v: number): number {
  const a = Math.max(Math.abs(f(v)), MIN_NORMAL);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  return 2 ** (e - 23);
}
function ulpError(got: number, ref: number): number {
  const want = f(ref);
  if (!Number.isFinite(want)) return Object.is(got, want) || (Number.isNaN(got) && Number.isNaN(want)) ? 0 : Infinity;
  if (Math.abs(want) < MIN_NORMAL && Math.abs(got) <= MIN_NORMAL) return 0;
  return Math.abs(got - ref) / ulp(want);
}
/** The largest error of fn over n float32 inputs from lo to hi (log: geometric), and where. */
function sweep(fn: (x: number) => number, ref: (x: number) => number, lo: number, hi: number, n: number, log = false): { ulp: number; at: number } {
  let worst = { ulp: 0, at: NaN };
  for (let i = 0; i < n; i++) {
    const t = i / (n - 1);
    const x = f(log ? Math.sign(lo) * Math.exp(Math.log(Math.abs(lo)) + t * (Math.log(Math.abs(hi)) - Math.log(Math.abs(lo)))) : lo + t * (hi - lo));
    const e = ulpError(fn(x), ref(x));
    if (e > worst.ulp) worst = { ulp: e, at: x };
  }
  return worst;
}

test('the mirror reads the constants it expects from the WGSL text', () => {
  assert.equal(LOG2E, f(Math.LOG2E));
  assert.equal(M, 1.5 * 2 ** 23);
  assert.ok(Math.abs(LN2_HI! + LN2_LO! - Math.LN2) < 1e-12);
  assert.equal(EXPM1.length, 5);
  assert.equal(TANH.length, 5);
});

for (const fma of [false, true]) {
  const { exp, tanh } = mirror(fma);
  test(`exp (v2) within 1.5 ulp of float64 on [-87, 88.7] and [-1, 1], subnormal results flushed or within 1 ulp, edges exact (${fma ? 'fused' : 'unfused'} a * b + c)`, () => {
    for (const [lo, hi, bound] of [
      [-87, 88.7, 1.5],
      [-1, 1, 1.5],
      [-104, -87, 1.5],
    ] as const) {
      const w = sweep(exp, Math.exp, lo, hi, 1_000_001);
      assert.ok(w.ulp <= bound, `exp on [${lo}, ${hi}]: ${w.ulp.toFixed(3)} ulp at ${w.at}`);
    }
    assert.ok(Number.isNaN(exp(NaN)));
    assert.equal(exp(Infinity), Infinity);
    assert.equal(exp(-Infinity), 0);
    assert.equal(exp(88.72284), Infinity);
    assert.equal(exp(88.72283), f(Math.exp(88.72283)));
    assert.equal(exp(-103.98), 0);
    assert.equal(exp(3.4e38), Infinity);
    assert.equal(exp(0), 1);
    assert.equal(exp(-0), 1);
  });
  test(`tanh (v2) within 2 ulp of float64 on [-10, 10], [1e-6, 0.1] and [1e-37, 1e-6], odd, 1 beyond 9.1 (${fma ? 'fused' : 'unfused'} a * b + c)`, () => {
    for (const [lo, hi, log] of [
      [-10, 10, false],
      [1e-6, 0.1, true],
      [1e-37, 1e-6, true],
      [0.5, 0.6, false],
    ] as const) {
      const w = sweep(tanh, Math.tanh, lo, hi, 1_000_001, log);
      assert.ok(w.ulp <= 2, `tanh on [${lo}, ${hi}]: ${w.ulp.toFixed(3)} ulp at ${w.at}`);
    }
    assert.ok(Number.isNaN(tanh(NaN)));
    assert.equal(tanh(Infinity), 1);
    assert.equal(tanh(-Infinity), -1);
    assert.ok(Object.is(tanh(-0), -0));
    assert.equal(tanh(9.2), 1);
    assert.equal(tanh(-3e38), -1);
  });
}
