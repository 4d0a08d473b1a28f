/**
 * The native float32 GEMM (kernels/cpu/native) against float64 reference loops written here: odd
 * shapes across every block edge (MR 6, NR 16, MC 192, KC 512), transposed and strided operands
 * (a row-major A with few row blocks is read in place, others packed), alpha/beta, bias +
 * activation epilogues, k = 0, 1 vs 2 threads; and the eager ops (matmul, bmm, linear, addmm)
 * on each forced CPU path. Skips with the reason where no C compiler works.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { cpuPath, loadGemmLibrary, nativeGemm, nativeGemmCalls, probeToolchain, setCpuPath, sgemm, sharedPoolStats, type GemmAct } from '../src/kernels/cpu/native/index.js';
import { gemmCSource } from '../src/kernels/cpu/native/gemm-c.js';
import { refMatmul } from './helpers/linalg-ref.js';
import { assertClose } from './helpers/assert.js';
import { rand, rng } from './helpers/make.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;

/** A logical [rows, cols] matrix stored either row-major or column-major (transposed) with padding. */
function matrix(rows: number, cols: number, seed: number, layout: 'row' | 'col' | 'padded'): { data: Float32Array; offset: number; rowStride: number; colStride: number; at(r: number, c: number): number } {
  const r = rng(seed);
  const offset = 3;
  const rowStride = layout === 'row' ? cols : layout === 'col' ? 1 : cols + 5;
  const colStride = layout === 'col' ? rows : 1;
  const data = new Float32Array(offset + rows * cols + rows * 5 + cols + 8).fill(Number.NaN);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) data[offset + i * rowStride + j * colStride] = r() * 2 - 1;
  return { data, offset, rowStride, colStride, at: (i, j) => data[offset + i * rowStride + j * colStride]! };
}

function act(v: number, a: GemmAct): number {
  switch (a) {
    case 'relu':
      return Math.max(v, 0);
    case 'gelu':
      return 0.5 * v * (1 + erf(v / Math.SQRT2));
    case 'geluTanh':
      return 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
    default:
      return v;
  }
}

/** erf by its Taylor series (converges fast for |x| < 3, the range these tests produce) with a tail clamp. */
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

interface Case {
  m: number;
  n: number;
  k: number;
  la: 'row' | 'col' | 'padded';
  lb: 'row' | 'col' | 'padded';
  alpha?: number;
  beta?: number;
  bias?: boolean;
  act?: GemmAct;
  threads?: number;
}

function runCase(c: Case, seed: number): Float32Array {
  const { m, n, k } = c;
  const alpha = c.alpha ?? 1;
  const beta = c.beta ?? 0;
  const A = matrix(m, k, seed, c.la);
  const B = matrix(k, n, seed + 1, c.lb);
  const ldc = n + 2;
  const r = rng(seed + 2);
  const C = new Float32Array(m * ldc + 1).map(() => r() - 0.5);
  const C0 = Float64Array.from(C);
  const bias = c.bias ? new Float32Array(2 * n).map(() => r() - 0.5) : null;
  sgemm(m, n, k, alpha, A, B, beta, { data: C, offset: 1, stride: 1, ldc }, { bias: bias && { data: bias, offset: 1, stride: 2 }, act: c.act ?? 'none', threads: c.threads ?? 2 });
  let worst = 0;
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      let mag = 0;
      for (let p = 0; p < k; p++) {
        s += A.at(i, p) * B.at(p, j);
        mag += Math.abs(A.at(i, p) * B.at(p, j));
      }
      let v = alpha * s + (beta === 0 ? 0 : beta * C0[1 + i * ldc + j]!);
      if (bias) v += bias[1 + 2 * j]!;
      const want = act(v, c.act ?? 'none');
      const got = C[1 + i * ldc + j]!;
      // float32 accumulation: error grows with the sum of |terms| (plus erff/tanhf's few ulps).
      const tol = 2e-6 * (Math.abs(alpha) * mag + 1) + 1e-6 * Math.abs(want);
      worst = Math.max(worst, Math.abs(got - want) / tol);
      if (!(Math.abs(got - want) <= tol)) assert.fail(`${JSON.stringify(c)}: C[${i}, ${j}] = ${got}, expected ${want} (tol ${tol})`);
    }
  }
  // Padding between rows of C is never written.
  for (let i = 0; i < m; i++) for (let j = n; j < ldc && 1 + i * ldc + j < C.length; j++) assert.equal(C[1 + i * ldc + j], Math.fround(C0[1 + i * ldc + j]!), `C padding at row ${i} col ${j} overwritten`);
  assert.ok(worst <= 1);
  return C;
}

test('native sgemm: odd shapes across tile and block edges, every operand layout', { skip }, () => {
  const shapes = [[1, 1, 1], [7, 13, 5], [6, 16, 512], [13, 33, 513], [97, 83, 301], [150, 40, 70], [5, 300, 260], [200, 20, 1030]] as const;
  let seed = 1;
  for (const [m, n, k] of shapes) {
    for (const la of ['row', 'col', 'padded'] as const) {
      for (const lb of ['row', 'col', 'padded'] as const) runCase({ m, n, k, la, lb }, (seed += 3));
    }
  }
});

test('native sgemm: alpha, beta (accumulating into C across K slabs) and k = 0', { skip }, () => {
  runCase({ m: 37, n: 45, k: 600, la: 'row', lb: 'col', alpha: 0.5, beta: 0.75 }, 11);
  runCase({ m: 37, n: 45, k: 600, la: 'padded', lb: 'row', alpha: -2, beta: 1 }, 12);
  runCase({ m: 9, n: 21, k: 0, la: 'row', lb: 'row', beta: 0.5, bias: true, act: 'relu' }, 13);
  runCase({ m: 9, n: 21, k: 0, la: 'row', lb: 'row', beta: 0 }, 14);
});

test('native sgemm: bias and activation epilogues (relu, gelu erf, gelu tanh)', { skip }, () => {
  for (const a of ['none', 'relu', 'gelu', 'geluTanh'] as const) {
    runCase({ m: 50, n: 70, k: 300, la: 'row', lb: 'col', bias: true, act: a }, 20);
    runCase({ m: 3, n: 17, k: 7, la: 'col', lb: 'row', bias: false, act: a, beta: 0.5 }, 21);
  }
});

test('native sgemm: 1 and 2 threads give identical results (row and column splits)', { skip }, () => {
  for (const [m, n, k] of [[300, 200, 300], [4, 1000, 400], [400, 70, 700]] as const) {
    const c1 = runCase({ m, n, k, la: 'row', lb: 'row', threads: 1, bias: true, act: 'gelu' }, 30);
    const c2 = runCase({ m, n, k, la: 'row', lb: 'row', threads: 2, bias: true, act: 'gelu' }, 30);
    // Each element sums the same terms in the same order whatever the partition.
    assert.deepEqual(c1, c2);
  }
});

test('native sgemm: rejects an unknown activation and a strided C', { skip }, () => {
  const a = matrix(2, 2, 1, 'row');
  const c = { data: new Float32Array(4), offset: 0, ldc: 2 };
  assert.throws(() => sgemm(2, 2, 2, 1, a, a, 0, { ...c, stride: 1 }, { act: 'swish' as GemmAct }), /unknown activation 'swish'/);
  assert.throws(() => sgemm(2, 2, 2, 1, a, a, 0, { ...c, stride: 2 }), /unit column stride/);
});

/** Eager float32 products on one CPU path against float64 references. */
function eagerChecks(): void {
  const tol = (k: number): { atol: number; rtol: number } => ({ atol: 4e-6 * k, rtol: 1e-5 });
  const a = rand([70, 130], 1, 'transposed');
  const b = rand([130, 45], 2);
  const r = refMatmul(a.toFlatArray(), a.shape, b.toFlatArray(), b.shape);
  assertClose(kiln.matmul(a, b), r.values, r.shape, tol(130));
  // bmm with a broadcast batch and a batched right operand.
  const x = rand([3, 2, 19, 40], 3);
  const y = rand([2, 40, 23], 4, 'transposed');
  const rb = refMatmul(x.toFlatArray(), x.shape, y.toFlatArray(), y.shape);
  assertClose(kiln.matmul(x, y), rb.values, rb.shape, tol(40));
  const p = rand([5, 31, 17], 5);
  const q = rand([5, 17, 29], 6, 'strided');
  const rq = refMatmul(p.toFlatArray(), p.shape, q.toFlatArray(), q.shape);
  assertClose(kiln.bmm(p, q), rq.values, rq.shape, tol(17));
  // linear with bias: the bias becomes the native epilogue.
  const inp = rand([2, 33, 64], 7);
  const w = rand([50, 64], 8);
  const bias = rand([50], 9);
  const wt = kiln.transpose(w, 0, 1);
  const rl = refMatmul(inp.toFlatArray(), inp.shape, wt.toFlatArray(), wt.shape);
  const bv = bias.toFlatArray();
  const want = rl.values.map((v, i) => v + bv[i % 50]!);
  assertClose(kiln.nn.functional.linear(inp, w, bias), want, rl.shape, tol(64));
  // addmm: beta * self + alpha * mat1 @ mat2 with a broadcast self.
  const self = rand([45], 10);
  const m1 = rand([20, 130], 11);
  const ra = refMatmul(m1.toFlatArray(), m1.shape, b.toFlatArray(), b.shape);
  const sv = self.toFlatArray();
  assertClose(kiln.addmm(self, m1, b, 0.5, 2), ra.values.map((v, i) => 2 * v + 0.5 * sv[i % 45]!), ra.shape, tol(130));
}

for (const path of ['native', 'wasm', 'js'] as const) {
  test(`eager float32 matmul / bmm / linear / addmm on the forced '${path}' path`, { skip: path === 'native' ? skip : false }, () => {
    setCpuPath(path);
    try {
      assert.equal(cpuPath(), path);
      const before = nativeGemmCalls();
      eagerChecks();
      // The native engine ran every product on the native path and none elsewhere.
      if (path === 'native') assert.ok(nativeGemmCalls() - before >= 5, `native sgemm calls: ${nativeGemmCalls() - before}`);
      else assert.equal(nativeGemmCalls(), before);
    } finally {
      setCpuPath(undefined);
    }
  });
}

test('native sgemm: a deep K narrows the packed panel (K = 70000 x N = 300)', { skip }, () => {
  // K * N exceeds the 16 M-float packing cap only when N > 239; 300 columns take two panels.
  runCase({ m: 3, n: 300, k: 70000, la: 'row', lb: 'col' }, 40);
});

test('native sgemm: the base GEMM and a GEMM variant share the process-wide thread pool', { skip }, () => {
  // Each object finds kiln_pool_run_shared (pool.ts loads it with RTLD_GLOBAL) instead of starting
  // its own workers; a variant with a generated epilogue is a separate shared object.
  assert.equal(nativeGemm().poolShared(), true);
  const variant = loadGemmLibrary(gemmCSource('static inline void kiln_epi(int64_t w, float *restrict c, const float *restrict e0, const float *restrict e1, const float *restrict e2, const float *restrict e3) {\n  (void)e0; (void)e1; (void)e2; (void)e3;\n  for (int64_t j = 0; j < w; j++) c[j] = c[j] * 2.0f;\n}'));
  assert.equal(variant.poolShared(), true);
  // And the variant's jobs run correctly on it: C = 2 * (A . B) over a product big enough for 2 threads.
  const [m, n, k] = [64, 96, 300];
  const A = matrix(m, k, 50, 'row');
  const B = matrix(k, n, 51, 'col');
  const C = new Float32Array(m * n);
  variant.sgemm(m, n, k, 1, A, B, 0, { data: C, offset: 0, stride: 1, ldc: n }, { threads: 2 });
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += A.at(i, p) * B.at(p, j);
      assert.ok(Math.abs(C[i * n + j]! - 2 * s) <= 1e-4 * (1 + Math.abs(s)), `C[${i}, ${j}] = ${C[i * n + j]}, expected ${2 * s}`);
    }
  }
});

test('native sgemm: the shared pool counts its jobs and who ran the items', { skip }, () => {
  const stats = sharedPoolStats();
  assert.ok(stats, 'the shared pool object is loaded');
  const [m, n, k] = [64, 512, 512];
  const A = matrix(m, k, 60, 'row');
  const B = matrix(k, n, 61, 'col');
  const C = new Float32Array(m * n);
  const run = (threads: number): void => nativeGemm().sgemm(m, n, k, 1, A, B, 0, { data: C, offset: 0, stride: 1, ldc: n }, { threads });
  // One thread never touches the pool.
  run(1);
  const s0 = sharedPoolStats()!;
  run(1);
  const s1 = sharedPoolStats()!;
  assert.deepEqual(s1, s0, 'a 1-thread GEMM runs on the calling thread alone');
  // Two threads: packing B (not prepacked) and the compute items are pool jobs; every item ran
  // exactly once, by the caller or a worker, and a worker joins a job at most once.
  run(2);
  const s2 = sharedPoolStats()!;
  const jobs = s2.jobs - s1.jobs;
  const items = s2.itemsCaller - s1.itemsCaller + (s2.itemsWorkers - s1.itemsWorkers);
  assert.ok(jobs >= 2, `pack and compute jobs, got ${jobs}`);
  assert.ok(items >= 2 * jobs, `every job has several items, got ${items} items in ${jobs} jobs`);
  assert.ok(s2.joins - s1.joins <= jobs, 'at most one worker (2 threads) joins each job');
  assert.ok(s2.joinNs >= s1.joinNs && s2.sleeps >= s1.sleeps, 'counters only grow');
});
