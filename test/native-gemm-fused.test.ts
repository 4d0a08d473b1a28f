/**
 * The native GEMM's prepacked-B path and generated epilogues against float64 reference loops
 * written here: packed vs unpacked operands over odd shapes (1 and 2 threads, the shared-A path of
 * short activations), and compiled linears on the native path with GELU / residual / multi-input
 * epilogues folded in, a weight update that must repack, and inputs the runner declines (strided
 * activation) falling back to the eager linear. Skips with the reason where no C compiler works.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { nativeGemm, nativeGemmCalls, probeToolchain, setCpuPath } from '../src/kernels/cpu/native/index.js';
import { rng } from './helpers/make.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;

function onPath<T>(fn: () => T): T {
  setCpuPath('native');
  try {
    return fn();
  } finally {
    setCpuPath(undefined);
  }
}

function erf(x: number): number {
  if (Math.abs(x) > 5) return Math.sign(x);
  let term = x;
  let sum = x;
  for (let n = 1; n < 200; n++) {
    term *= (-x * x) / n;
    sum += term / (2 * n + 1);
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}
const gelu = (v: number): number => 0.5 * v * (1 + erf(v / Math.SQRT2));

/** y[i, j] = sum_p x[i, p] w[j, p] + b[j] in float64, plus the sum of |terms| for the tolerance. */
function linearRef(x: readonly number[], w: readonly number[], b: readonly number[] | null, M: number, K: number, N: number): { y: number[]; mag: number[] } {
  const y: number[] = [];
  const mag: number[] = [];
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = b ? b[j]! : 0;
      let a = Math.abs(s);
      for (let p = 0; p < K; p++) {
        s += x[i * K + p]! * w[j * K + p]!;
        a += Math.abs(x[i * K + p]! * w[j * K + p]!);
      }
      y.push(s);
      mag.push(a);
    }
  }
  return { y, mag };
}

function assertNear(got: ArrayLike<number>, want: readonly number[], mag: readonly number[], what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const tol = 3e-6 * (mag[i]! + 1) + 2e-6 * Math.abs(want[i]!);
    if (!(Math.abs(got[i]! - want[i]!) <= tol)) assert.fail(`${what}: [${i}] = ${got[i]}, expected ${want[i]} (tol ${tol})`);
  }
}

const rand = (n: number, seed: number, scale = 1): number[] => {
  const r = rng(seed);
  return Array.from({ length: n }, () => (r() * 2 - 1) * scale);
};

test('native sgemm: a prepacked B gives the unpacked results, across panels, slabs and thread counts', { skip }, () => {
  const lib = nativeGemm();
  for (const [m, n, k, threads] of [
    [5, 17, 3, 1],
    [64, 100, 300, 2],
    [7, 33, 513, 2],
    [150, 40, 260, 2],
    [300, 35, 20, 1],
  ] as const) {
    const A = Float32Array.from(rand(m * k, m + n + k));
    const W = Float32Array.from(rand(n * k, m * n + k));
    const bias = Float32Array.from(rand(n, 7));
    // B[k, n] = W[n, k] (a transposed weight, as linear reads it).
    const packed = lib.packB(k, n, { data: W, offset: 0, rowStride: 1, colStride: k });
    const C = new Float32Array(m * n);
    lib.sgemm(m, n, k, 1, { data: A, offset: 0, rowStride: k, colStride: 1 }, packed, 0, { data: C, offset: 0, stride: 1, ldc: n }, { bias: { data: bias, offset: 0, stride: 1 }, threads });
    const ref = linearRef(Array.from(A), Array.from(W), Array.from(bias), m, k, n);
    assertNear(C, ref.y, ref.mag, `packed ${m}x${n}x${k} threads ${threads}`);
    const C2 = new Float32Array(m * n);
    lib.sgemm(m, n, k, 1, { data: A, offset: 0, rowStride: k, colStride: 1 }, { data: W, offset: 0, rowStride: 1, colStride: k }, 0, { data: C2, offset: 0, stride: 1, ldc: n }, { bias: { data: bias, offset: 0, stride: 1 }, threads });
    assert.deepEqual(C2, C, `unpacked and packed agree bit for bit (${m}x${n}x${k})`);
  }
  const packed = lib.packB(4, 8, { data: new Float32Array(32), offset: 0, rowStride: 8, colStride: 1 });
  assert.throws(
    () => lib.sgemm(2, 8, 5, 1, { data: new Float32Array(10), offset: 0, rowStride: 5, colStride: 1 }, packed, 0, { data: new Float32Array(16), offset: 0, stride: 1, ldc: 8 }),
    /packed for \[4, 8\], the product needs \[5, 8\]/,
  );
});

test('compiled on the native path: GELU and residual epilogues folded into the GEMM match float64', { skip }, () => {
  const [M, K, H] = [37, 70, 90];
  const xs = rand(M * K, 1);
  const w1s = rand(H * K, 2, 0.3);
  const b1s = rand(H, 3);
  const w2s = rand(K * H, 4, 0.3);
  const b2s = rand(K, 5);
  const x = kiln.tensor(xs, { dtype: 'float32' }).reshape([M, K]);
  const w1 = kiln.tensor(w1s, { dtype: 'float32' }).reshape([H, K]);
  const b1 = kiln.tensor(b1s, { dtype: 'float32' });
  const w2 = kiln.tensor(w2s, { dtype: 'float32' }).reshape([K, H]);
  const b2 = kiln.tensor(b2s, { dtype: 'float32' });
  const fx = (t: Tensor, a: Tensor, ab: Tensor, c: Tensor, cb: Tensor): Tensor =>
    kiln.add(t, kiln.nn.functional.linear(kiln.nn.functional.gelu(kiln.nn.functional.linear(t, a, ab)), c, cb));
  // Reference from float32-rounded inputs.
  const xr = x.toFlatArray();
  const h = linearRef(xr, w1.toFlatArray(), b1.toFlatArray(), M, K, H);
  const hg = h.y.map(gelu);
  const o = linearRef(hg, w2.toFlatArray(), b2.toFlatArray(), M, H, K);
  const want = o.y.map((v, i) => v + xr[i]!);
  // Errors of the first product carry through GELU (slope <= 1.13) into the second.
  const mag = o.mag.map((v, i) => v + Math.abs(xr[i]!) + 2 * Math.sqrt(H) * (h.mag[Math.floor(i / K) * H] ?? 1));
  onPath(() => {
    const c = kiln.compile(fx);
    const before = nativeGemmCalls();
    const got = kiln.noGrad(() => c(x, w1, b1, w2, b2));
    assert.equal(nativeGemmCalls() - before, 2, 'both linears ran the native GEMM');
    const text = c.programs().inference.map((p) => p.describe()).join('\n');
    assert.match(text, /gemm linear\(.*\+ epilogue \[[a-z, ]*erf[a-z, ]*\].* native BLIS GEMM/, 'GELU folded');
    assert.match(text, /gemm linear\(.*\+ epilogue \[add\]\(%\d+:full\) native BLIS GEMM/, 'residual folded');
    assertNear(got.toFlatArray(), want, mag, 'mlp + residual');
    // A weight update repacks on the next call.
    const p = c.programs().inference[0] as unknown as { weightPacks: number };
    const packs = p.weightPacks;
    kiln.noGrad(() => w2.mul_(2));
    const got2 = kiln.noGrad(() => c(x, w1, b1, w2, b2)).toFlatArray();
    assert.equal(p.weightPacks, packs + 1, 'the updated weight was repacked');
    const b2f = b2.toFlatArray();
    const want2 = o.y.map((v, i) => 2 * (v - b2f[i % K]!) + b2f[i % K]! + xr[i]!);
    assertNear(got2, want2, mag.map((v) => 2 * v), 'after w2 *= 2');
  });
});

test('compiled on the native path: an epilogue with row and full inputs, and a strided activation falling back', { skip }, () => {
  const [M, K, N] = [20, 33, 19];
  const xs = rand(M * K, 11);
  const ws = rand(N * K, 12, 0.5);
  const rs = rand(N, 13);
  const fs = rand(M * N, 14);
  const x = kiln.tensor(xs, { dtype: 'float32' }).reshape([M, K]);
  const xt = kiln.tensor(xs, { dtype: 'float32' }).reshape([K, M]);
  const w = kiln.tensor(ws, { dtype: 'float32' }).reshape([N, K]);
  const r = kiln.tensor(rs, { dtype: 'float32' });
  const f = kiln.tensor(fs, { dtype: 'float32' }).reshape([M, N]);
  const fn = (t: Tensor, wt: Tensor, rt: Tensor, ft: Tensor): Tensor => kiln.sub(kiln.mul(kiln.tanh(kiln.nn.functional.linear(t, wt)), rt), ft);
  onPath(() => {
    const c = kiln.compile(fn);
    const got = kiln.noGrad(() => c(x, w, r, f)).toFlatArray();
    const text = c.programs().inference.map((p) => p.describe()).join('\n');
    assert.match(text, /epilogue \[tanh, mul, sub\]\(%\d+:row, %\d+:full\) native BLIS GEMM/);
    const ref = linearRef(x.toFlatArray(), w.toFlatArray(), null, M, K, N);
    const rr = r.toFlatArray();
    const fr = f.toFlatArray();
    assertNear(
      got,
      ref.y.map((v, i) => Math.tanh(v) * rr[i % N]! - fr[i]!),
      ref.mag.map((v, i) => v * Math.abs(rr[i % N]!) + Math.abs(fr[i]!)),
      'tanh(x w^T) * r - f',
    );
    // A transposed activation view: the runner declines it, the eager linear + epilogue kernel run.
    const c2 = kiln.compile((t: Tensor, wt: Tensor, rt: Tensor, ft: Tensor) => fn(kiln.transpose(t, 0, 1), wt, rt, ft));
    const got2 = kiln.noGrad(() => c2(xt, w, r, f)).toFlatArray();
    const xtr = xt.toFlatArray();
    const xT = Array.from({ length: M * K }, (_, q) => xtr[(q % K) * M + Math.floor(q / K)]!);
    const ref2 = linearRef(xT, w.toFlatArray(), null, M, K, N);
    assertNear(
      got2,
      ref2.y.map((v, i) => Math.tanh(v) * rr[i % N]! - fr[i]!),
      ref2.mag.map((v, i) => v * Math.abs(rr[i % N]!) + Math.abs(fr[i]!)),
      'transposed activation',
    );
  });
});

test('compiled on the native path: row-reduction kernels (residual + layer norm, softmax, max) run in C and match float64', { skip }, () => {
  const [R, N] = [40, 300];
  const xs = rand(R * N, 31, 3);
  const hs = rand(R * N, 32, 3);
  const ws = rand(N, 33);
  const bs = rand(N, 34);
  const x = kiln.tensor(xs, { dtype: 'float32' }).reshape([2, R / 2, N]);
  const h = kiln.tensor(hs, { dtype: 'float32' }).reshape([2, R / 2, N]);
  const w = kiln.tensor(ws, { dtype: 'float32' });
  const b = kiln.tensor(bs, { dtype: 'float32' });
  const fn = (t: Tensor, u: Tensor, wt: Tensor, bt: Tensor): Tensor[] => {
    const s = kiln.add(t, u);
    return [kiln.nn.functional.layerNorm(s, [N], wt, bt, 1e-5), kiln.softmax(s, -1), kiln.amax(kiln.mul(t, 2), [-1])];
  };
  const xf = x.toFlatArray();
  const hf = h.toFlatArray();
  const wf = w.toFlatArray();
  const bf = b.toFlatArray();
  const ln: number[] = [];
  const sm: number[] = [];
  const mx: number[] = [];
  for (let r = 0; r < R; r++) {
    const row = Array.from({ length: N }, (_, i) => Math.fround(xf[r * N + i]! + hf[r * N + i]!));
    const mean = row.reduce((p, q) => p + q, 0) / N;
    const vr = row.reduce((p, q) => p + (q - mean) ** 2, 0) / N;
    row.forEach((q, i) => ln.push(((q - mean) / Math.sqrt(vr + 1e-5)) * wf[i]! + bf[i]!));
    const m = Math.max(...row);
    const z = row.reduce((p, q) => p + Math.exp(q - m), 0);
    row.forEach((q) => sm.push(Math.exp(q - m) / z));
    mx.push(Math.max(...Array.from({ length: N }, (_, i) => 2 * xf[r * N + i]!)));
  }
  onPath(() => {
    const c = kiln.compile(fn);
    const [a, s, m] = kiln.noGrad(() => c(x, h, w, b));
    const text = c.programs().inference.map((p) => p.describe()).join('\n');
    assert.match(text, /kiln native row kernel/, 'a C row kernel');
    assertNear(a!.toFlatArray(), ln, ln.map(() => 30), 'layer norm');
    assertNear(s!.toFlatArray(), sm, sm.map(() => 0), 'softmax');
    assert.deepEqual(m!.toFlatArray(), mx.map(Math.fround), 'amax is exact');
    // A transposed input: the row does not coalesce to unit stride; the strided C loop runs.
    const xt = kiln.contiguous(kiln.transpose(x, 1, 2));
    const c2 = kiln.compile((t: Tensor) => kiln.softmax(kiln.transpose(t, 1, 2), -1));
    const got = kiln.noGrad(() => c2(xt)).toFlatArray();
    const want = kiln.noGrad(() => {
      setCpuPath('js');
      try {
        return kiln.softmax(kiln.transpose(xt, 1, 2), -1).toFlatArray();
      } finally {
        setCpuPath('native');
      }
    });
    assertNear(got, want, want.map(() => 0), 'softmax over a strided row vs the JS kernel');
  });
});

test('eager linear on the native path: the cached weight packing follows weight updates and views', { skip }, () => {
  const [M, K, N] = [9, 40, 70];
  const x = kiln.tensor(rand(M * K, 41), { dtype: 'float32' }).reshape([M, K]);
  const big = kiln.tensor(rand(2 * N * K, 42, 0.5), { dtype: 'float32' }).reshape([2 * N, K]);
  const b = kiln.tensor(rand(N, 43), { dtype: 'float32' });
  const ref = (w: Tensor): { y: number[]; mag: number[] } => linearRef(x.toFlatArray(), kiln.contiguous(w).toFlatArray(), b.toFlatArray(), M, K, N);
  onPath(() => {
    // Two views of one storage alternate (each call must read its own rows).
    const top = kiln.narrow(big, 0, 0, N);
    const bottom = kiln.narrow(big, 0, N, N);
    for (let i = 0; i < 2; i++) {
      for (const w of [top, bottom]) {
        const r = ref(w);
        assertNear(kiln.noGrad(() => kiln.nn.functional.linear(x, w, b)).toFlatArray(), r.y, r.mag, `view ${i}`);
      }
    }
    // An in-place update of the weight invalidates the packing.
    kiln.noGrad(() => big.mul_(-3));
    const r = ref(top);
    assertNear(kiln.noGrad(() => kiln.nn.functional.linear(x, top, b)).toFlatArray(), r.y, r.mag, 'after big *= -3');
  });
});
