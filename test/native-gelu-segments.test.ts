/**
 * The segmented erf-GELU of the native path (c-math.ts `k_gelu_row`, codegen/c/gemm.ts
 * `kiln_epi`): 64-value segments whose 8-lane chunks all have |x / sqrt 2| < 1 skip the erfc
 * branch, a segment with at most 2 wide chunks fixes those chunks up, one with more runs the full
 * function. The inputs below are laid out so that every case occurs (all-near segments, fix-ups
 * at the first and last lane, full segments, NaN / infinities, values on either side of the
 * branch threshold, a tail shorter than a segment), and each result is checked against float64
 * references: the eager gelu op, the GEMM's gelu activation, and a compiled linear -> GELU whose
 * decomposed erf runs in the GEMM epilogue; and transcendental unary ops split over 2 threads
 * on the work-sharing pool. Skips where no C compiler works.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { nativeGemm, nativeGemmCalls, probeToolchain, setCpuPath, setNativeThreads, sharedPoolStats } from '../src/kernels/cpu/native/index.js';
import { nativeOpCalls } from '../src/kernels/cpu/native/ops.js';
import { randomValues, rng } from './helpers/make.js';
import { erfRef, geluRef } from './helpers/pointwise-ref.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;

function onNative<T>(fn: () => T): T {
  setCpuPath('native');
  try {
    return fn();
  } finally {
    setCpuPath(undefined);
  }
}

const SEG = 64;
/** Just below and above the threshold |x| = sqrt 2 (float32 neighbours of 1.4142135). */
const EDGE = [1.4142134, 1.4142135, 1.4142137, -1.4142134, -1.4142135, -1.4142137];

/**
 * Five segments and a 13-value tail of small values (|x| < 1.2, near) with wide values placed at:
 * segment 1 the first and last lane (2 wide chunks: fix-ups), segment 2 three chunks (full),
 * segment 3 the threshold neighbours in two chunks, segment 4 `special` (NaN / infinities: only
 * the eager op, a GEMM would spread them over the row), the tail two values.
 */
function layout(special: boolean): number[] {
  const r = rng(7);
  const v = Array.from({ length: 5 * SEG + 13 }, () => (r() * 2 - 1) * 1.2);
  v[SEG] = -3;
  v[2 * SEG - 1] = 2.5;
  v[2 * SEG + 1] = -5;
  v[2 * SEG + 27] = 7;
  v[2 * SEG + 60] = -1.5;
  EDGE.slice(0, 3).forEach((e, i) => (v[3 * SEG + 2 + i] = e));
  EDGE.slice(3).forEach((e, i) => (v[3 * SEG + 40 + i] = e));
  if (special) {
    v[4 * SEG + 3] = NaN;
    v[4 * SEG + 20] = -Infinity;
    v[4 * SEG + 21] = Infinity;
  } else {
    v[4 * SEG + 20] = -9;
  }
  v[5 * SEG + 1] = -12;
  v[5 * SEG + 12] = 3;
  return v.map(Math.fround);
}

function assertClose(got: ArrayLike<number>, want: readonly number[], tol: (w: number, x: number) => number, xs: readonly number[], what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!;
    const w = want[i]!;
    if (Number.isNaN(w)) assert.ok(Number.isNaN(g), `${what}[${i}] (x = ${xs[i]}): got ${g}, expected NaN`);
    else if (!Number.isFinite(w)) assert.equal(g, w, `${what}[${i}]`);
    else if (!(Math.abs(g - w) <= tol(w, xs[i]!))) assert.fail(`${what}[${i}] (x = ${xs[i]}): got ${g}, expected ${w}`);
  }
}

// The eager bound of native-eager.test.ts: relative 2e-6 (the erfc tail carries a few ulp), atol 1e-12.
const eagerTol = (w: number): number => 1e-12 + 2e-6 * Math.abs(w);

test('native eager gelu: segments with near, fixed-up and full chunks match float64', { skip }, () => {
  const xs = layout(true);
  onNative(() => {
    const before = nativeOpCalls();
    const got = kiln.nn.functional.gelu(kiln.tensor(xs, { dtype: 'float32' })).toFlatArray();
    assert.equal(nativeOpCalls() - before, 1, 'the native unary kernel ran');
    assertClose(got, xs.map(geluRef), eagerTol, xs, 'gelu');
  });
});

test('native sgemm gelu activation: segmented epilogue rows match float64', { skip }, () => {
  // C = X . I + bias 0 reproduces X exactly (one product of 1, the rest exact zeros), so the
  // activation sees the laid-out values; rows of 333 columns leave a 13-wide tail per row.
  const xs = layout(false);
  const n = xs.length;
  const m = 3;
  const a = new Float32Array(m * n);
  for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) a[i * n + j] = xs[(j + 64 * i) % n]!;
  const eye = new Float32Array(n * n);
  for (let j = 0; j < n; j++) eye[j * n + j] = 1;
  const c = new Float32Array(m * n);
  onNative(() => nativeGemm().sgemm(m, n, n, 1, { data: a, offset: 0, rowStride: n, colStride: 1 }, { data: eye, offset: 0, rowStride: n, colStride: 1 }, 0, { data: c, offset: 0, stride: 1, ldc: n }, { act: 'gelu', threads: 1 }));
  const ax = Array.from(a);
  assertClose(c, ax.map(geluRef), eagerTol, ax, 'sgemm act gelu');
});

test('compiled linear -> GELU on the native path: the segmented erf epilogue matches float64', { skip }, () => {
  const xs = layout(false);
  const n = xs.length;
  const x = kiln.tensor(xs, { dtype: 'float32' }).reshape([1, n]);
  const eye = kiln.eye(n, { dtype: 'float32' });
  const bias = kiln.zeros([n], { dtype: 'float32' });
  const f = (t: kiln.Tensor, w: kiln.Tensor, b: kiln.Tensor): kiln.Tensor => kiln.nn.functional.gelu(kiln.nn.functional.linear(t, w, b));
  onNative(() => {
    const c = kiln.compile(f);
    const before = nativeGemmCalls();
    const got = kiln.noGrad(() => c(x, eye, bias)).toFlatArray();
    assert.equal(nativeGemmCalls() - before, 1, 'the native GEMM ran');
    assert.match(c.programs().inference.map((p) => p.describe()).join('\n'), /epilogue \[[a-z, ]*erf[a-z, ]*\].* native BLIS GEMM/, 'GELU folded into the GEMM');
    // The compiled GELU is 0.5 x (1 + erf(x / sqrt 2)): erf's absolute error (a few ulp of 1)
    // times 0.5 |x|, plus the float32 rounding of the result.
    const want = xs.map((v) => 0.5 * v * (1 + erfRef(v / Math.SQRT2)));
    assertClose(got, want, (w, v) => 3e-7 * Math.abs(v) + 2e-7 * Math.abs(w) + 1e-12, xs, 'compiled gelu');
  });
});

test('native eager unary ops on 2 threads: the pool splits 20 K values into chunks, each value matches float64', { skip }, () => {
  // 20 000 values (5 chunks of 4096) of a transcendental op run as one pool job on 2 threads.
  const xs = randomValues(20000, 11, -6, 6).map(Math.fround);
  const x = kiln.tensor(xs, { dtype: 'float32' });
  setNativeThreads(2);
  try {
    onNative(() => {
      for (const [name, f, ref] of [
        ['gelu', (t: kiln.Tensor) => kiln.nn.functional.gelu(t), geluRef],
        ['tanh', kiln.tanh, Math.tanh],
      ] as const) {
        const jobs = sharedPoolStats()!.jobs;
        const got = f(x).toFlatArray();
        assert.equal(sharedPoolStats()!.jobs - jobs, 1, `${name}: one pool job`);
        assertClose(got, xs.map(ref), (w) => 1e-12 + 2e-6 * Math.abs(w), xs, name);
      }
    });
  } finally {
    setNativeThreads(undefined);
  }
});
