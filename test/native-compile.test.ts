/**
 * Native fused pointwise kernels (codegen/c) in kiln.compile: compiled vs eager parity on a chain
 * of every op the C generator handles, with broadcast and transposed inputs and special values;
 * exp / tanh / sigmoid / erf / gelu accuracy against Math.* in float64 over wide ranges; the native
 * candidate is the default only on the native path; a kernel whose C does not compile falls back to
 * its JS kernel with a warning. Skips with the reason where no C compiler works.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { buildNativeKernels } from '../src/compile/codegen/c/runtime.js';
import type { KernelFn } from '../src/compile/codegen/js/compile.js';
import { probeToolchain, setCpuPath } from '../src/kernels/cpu/native/index.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;

function onPath<T>(p: 'native' | 'wasm', fn: () => T): T {
  setCpuPath(p);
  try {
    return fn();
  } finally {
    setCpuPath(undefined);
  }
}

/** The chosen config of every kernel of a compiled function's programs, from describe(). */
function kernelImpls(f: { programs(): { inference: readonly { describe(): string }[] } }): string[] {
  return f.programs().inference.flatMap((p) => [...p.describe().matchAll(/config (\{[^}]*\})/g)].map((m) => (JSON.parse(m[1]!) as { impl?: string }).impl ?? 'reduce'));
}

const SPECIALS = [NaN, Infinity, -Infinity, -0, 0, 1e-40, -1e-40, 3e38, -3e38, 88.5, -88.5, 100, -110, 0.625, -0.625, 1, -1];

function values(n: number, seed: number, scale: number): number[] {
  let s = seed;
  return Array.from({ length: n }, (_, i) => {
    if (i < SPECIALS.length) return SPECIALS[i]!;
    s = (s * 1103515245 + 12345) % 2147483648;
    return (s / 2147483648 - 0.5) * 2 * scale;
  });
}

/** |a - b| within rtol * |b| + atol, NaN matching NaN and infinities matching exactly. */
function assertAllClose(got: readonly number[], want: readonly number[], rtol: number, atol: number, what: string): void {
  assert.equal(got.length, want.length);
  for (let i = 0; i < got.length; i++) {
    const g = got[i]!;
    const w = want[i]!;
    if (Number.isNaN(w)) {
      assert.ok(Number.isNaN(g), `${what}[${i}]: got ${g}, expected NaN`);
      continue;
    }
    if (!Number.isFinite(w)) {
      assert.equal(g, w, `${what}[${i}]`);
      continue;
    }
    assert.ok(Math.abs(g - w) <= rtol * Math.abs(w) + atol, `${what}[${i}]: got ${g}, expected ${w}`);
  }
}

test('compiled native pointwise matches eager on a fused chain with broadcast and transposed inputs', { skip }, () => {
  const fn = (x: Tensor, y: Tensor, b: Tensor): Tensor => {
    let t = kiln.add(kiln.mul(x, 1.5), b);
    t = kiln.add(kiln.mul(kiln.relu(t), kiln.sigmoid(y)), kiln.tanh(kiln.mul(x, 0.5)));
    t = kiln.sub(t, kiln.mul(kiln.exp(kiln.neg(kiln.mul(x, x))), 0.1), 2);
    t = kiln.add(t, kiln.nn.functional.gelu(y));
    t = kiln.add(t, kiln.nn.functional.gelu(x, 'tanh'));
    t = kiln.maximum(t, kiln.clamp(kiln.erf(y), -0.5, 0.75));
    t = kiln.div(t, kiln.add(kiln.sqrt(kiln.abs(y)), 1));
    return kiln.add(t, kiln.nn.functional.silu(kiln.log(kiln.add(kiln.abs(x), 1))));
  };
  const rows = 37;
  const cols = 700; // more than one 512-column chunk, with a ragged tail
  const x = kiln.tensor(values(rows * cols, 1, 6), { dtype: 'float32' }).reshape([rows, cols]);
  const yT = kiln.tensor(values(rows * cols, 2, 4), { dtype: 'float32' }).reshape([cols, rows]).transpose(0, 1);
  const b = kiln.tensor(values(cols, 3, 1).map((v) => (Number.isFinite(v) ? v : 0.25)), { dtype: 'float32' });
  const want = fn(x, yT, b).toFlatArray();
  onPath('native', () => {
    const c = kiln.compile(fn);
    const got = c(x, yT, b).toFlatArray();
    assert.ok(kernelImpls(c).includes('native'), `kernels: ${kernelImpls(c).join(', ')}`);
    // float32 everywhere; the vector exp/tanh/erf are within a few ulp of libm.
    assertAllClose(got, want, 2e-5, 2e-6, 'compiled');
  });
});

/** Compiles `op` on the native path over x and compares with `ref` (float64 Math.*) at the float32 inputs. */
function checkUnary(name: string, op: (t: Tensor) => Tensor, ref: (v: number) => number, xs: number[], rtol: number, atol: number): void {
  const x = kiln.tensor(xs, { dtype: 'float32' });
  const xf = x.toFlatArray();
  onPath('native', () => {
    const c = kiln.compile((t: Tensor) => kiln.add(op(t), 0));
    const got = c(x).toFlatArray();
    assert.deepEqual(kernelImpls(c), ['native'], name);
    assertAllClose(got, xf.map((v) => Math.fround(ref(v))), rtol, atol, name);
  });
}

function erf64(x: number): number {
  // Abramowitz-Stegun 7.1.26 is too coarse; use the series below 3 and the continued fraction above.
  const a = Math.abs(x);
  if (Number.isNaN(x)) return NaN;
  if (a === Infinity) return Math.sign(x);
  if (a < 3) {
    let term = a;
    let sum = a;
    for (let n = 1; n < 300; n++) {
      term *= (-a * a) / n;
      sum += term / (2 * n + 1);
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc(a) by Lentz's continued fraction.
  let f = a;
  let cc = a;
  let d = 0;
  for (let i = 1; i < 200; i++) {
    const an = i / 2;
    d = a + an * d;
    d = 1 / d;
    cc = a + an / cc;
    const delta = cc * d;
    f *= delta;
  }
  const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}

test('native vector math: exp, tanh, sigmoid, erf, gelu against Math.* in float64', { skip }, () => {
  const grid = (lo: number, hi: number, n: number): number[] => [...SPECIALS, ...Array.from({ length: n }, (_, i) => lo + ((hi - lo) * i) / (n - 1))];
  // Relative tolerances of a few float32 ulps (2^-23 ~ 1.2e-7); atol covers results that underflow to denormals.
  checkUnary('exp', kiln.exp, Math.exp, grid(-104, 89, 4001), 4e-7, 1e-44);
  checkUnary('tanh', kiln.tanh, Math.tanh, grid(-12, 12, 4001), 5e-7, 1e-38);
  // sigmoid decomposes to 1 / (1 + exp(-x)): below -88.7 exp(-x) overflows float32 (eager rounds the same way).
  checkUnary('sigmoid', kiln.sigmoid, (v) => 1 / (1 + Math.exp(-v)), grid(-87, 30, 4001), 6e-7, 1e-44);
  checkUnary('erf', kiln.erf, erf64, grid(-6, 6, 4001), 6e-7, 1e-38);
  // gelu decomposes to (0.5 x) (1 + erf(x / sqrt 2)) in float32 steps (1 + erf cancels for x < -3):
  // the reference rounds the same steps, the error left is erf's few ulp times 0.5 |x|.
  const f = Math.fround;
  checkUnary('gelu', (t) => kiln.nn.functional.gelu(t), (v) => f(f(0.5 * v) * f(1 + f(erf64(f(v * f(Math.SQRT1_2)))))), grid(-12, 12, 4001), 2e-6, 1e-6);
});

test('the native candidate exists only on the native path', { skip }, () => {
  const f = (t: Tensor): Tensor => kiln.exp(kiln.mul(t, 2));
  const x = kiln.randn([64, 64]);
  const nat = onPath('native', () => {
    const c = kiln.compile(f);
    c(x);
    return kernelImpls(c);
  });
  const wasm = onPath('wasm', () => {
    const c = kiln.compile(f);
    c(x);
    return kernelImpls(c);
  });
  assert.deepEqual(nat, ['native']);
  assert.ok(!wasm.includes('native'), `wasm path kernels: ${wasm.join(', ')}`);
});

test('a native kernel whose C does not compile falls back to its JS kernel with a warning', { skip }, () => {
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(w.message);
  process.on('warning', onWarning);
  const fallback: KernelFn = () => {};
  try {
    const fns = buildNativeKernels([{ source: 'void kiln_pw_broken(void) { this is not C; }\n', symbol: 'kiln_pw_broken', nOutputs: 1, nInputs: 1 }], [fallback]);
    assert.equal(fns[0], fallback);
  } catch (e) {
    process.off('warning', onWarning);
    throw e;
  }
  // Warnings are delivered on a later tick.
  return new Promise<void>((resolve) =>
    setImmediate(() => {
      process.off('warning', onWarning);
      assert.ok(warnings.some((w) => /native kernel kiln_pw_broken does not compile/.test(w) && /generated line 1/.test(w)), warnings.join('\n'));
      resolve();
    }),
  );
});

test('on the native path compiled linears run the native GEMM with the consumer folded into its epilogue and match a float64 reference', { skip }, () => {
  const [M, K, N] = [37, 70, 45];
  const x = kiln.tensor(values(M * K, 5, 1), { dtype: 'float32' }).reshape([M, K]);
  const w = kiln.tensor(values(N * K, 6, 1).map((v) => (Number.isFinite(v) ? Math.max(-1, Math.min(1, v)) : 0.5)), { dtype: 'float32' }).reshape([N, K]);
  const b = kiln.tensor(values(N, 7, 1).map((v) => (Number.isFinite(v) ? Math.max(-1, Math.min(1, v)) : 0.5)), { dtype: 'float32' });
  const xs = x.toFlatArray().map((v) => (Number.isFinite(v) ? Math.max(-1, Math.min(1, v)) : 0.25));
  const xc = kiln.tensor(xs, { dtype: 'float32' }).reshape([M, K]);
  const ws = w.toFlatArray();
  const bs = b.toFlatArray();
  const want: number[] = [];
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = bs[j]!;
      for (let p = 0; p < K; p++) s += xs[i * K + p]! * ws[j * K + p]!;
      want.push(Math.max(s, 0));
    }
  }
  onPath('native', () => {
    const c = kiln.compile((t: Tensor, wt: Tensor, bt: Tensor) => kiln.relu(kiln.nn.functional.linear(t, wt, bt)));
    const got = c(xc, w, b).toFlatArray();
    const text = c.programs().inference.map((p) => p.describe()).join('\n');
    assert.match(text, /= gemm linear\(.*\+ epilogue \[relu\].* native BLIS GEMM/, 'a native gemm step with relu folded');
    assert.doesNotMatch(text, /f32x4 wasm/, 'no Wasm gemm step on the native path');
    assertAllClose(got, want, 1e-5, 2e-6 * K, 'linear + relu');
  });
});

test('KILN_CPU_PATH decides the compiled kernels: wasm -> Wasm pointwise + Wasm GEMM, js -> neither', () => {
  const f = (t: Tensor, w: Tensor): Tensor => kiln.tanh(kiln.mul(kiln.nn.functional.linear(t, w), 2));
  const x = kiln.randn([16, 96]);
  const w = kiln.randn([80, 96]);
  const want = f(x, w).toFlatArray();
  for (const p of ['wasm', 'js'] as const) {
    setCpuPath(p);
    try {
      const c = kiln.compile(f);
      assertAllClose(c(x, w).toFlatArray(), want, 1e-5, 1e-5, p);
      const text = c.programs().inference.map((q) => q.describe()).join('\n');
      if (p === 'wasm') assert.match(text, /= gemm linear/, 'the wasm path runs the linear as a Wasm GEMM step');
      else {
        assert.doesNotMatch(text, /= gemm /, 'no Wasm GEMM on the js path');
        assert.ok(!kernelImpls(c).some((i) => i === 'wasm' || i === 'native'), `js path kernels: ${kernelImpls(c).join(', ')}`);
      }
    } finally {
      setCpuPath(undefined);
    }
  }
});
