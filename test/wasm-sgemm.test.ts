/**
 * The Wasm cpu path's float32 GEMM (kernels/cpu/wasm-sgemm*.ts, wasm-threads.ts) against float64
 * reference loops written here: odd M / N / K across the 4 x 8 tile and the KC = 256 / 32-sliver /
 * 128-sliver blocks, row-major / transposed / padded operands, alpha / beta, k = 0, chunked passes;
 * 1 vs 2 threads bit-identical (workers really running); the relaxed-SIMD (FMA) kernel in a child
 * process started with V8's flag; a process that used the workers exits by itself; and the eager
 * ops dispatching to it on the forced wasm path.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { setCpuPath } from '../src/kernels/cpu/native/index.js';
import { setWasmThreads, shutdownWasmThreads, warmWasmThreads, wasmSgemm, wasmSgemmAvailable, wasmSgemmCalls, wasmSgemmInfo } from '../src/kernels/cpu/wasm-sgemm-run.js';
import { refMatmul } from './helpers/linalg-ref.js';
import { refConv2d } from './helpers/nn-ref.js';
import { assertClose } from './helpers/assert.js';
import { rand, rng } from './helpers/make.js';
import { HANG_GUARD_MS } from './helpers/limits.js';

const skip = wasmSgemmAvailable() ? false : 'WebAssembly SIMD unavailable';

type Layout = 'row' | 'col' | 'padded';

/** A logical [rows, cols] matrix stored row-major, column-major (transposed) or with padded rows; NaN in the gaps. */
function matrix(rows: number, cols: number, seed: number, layout: Layout): { data: Float32Array; offset: number; rowStride: number; colStride: number; at(r: number, c: number): number } {
  const r = rng(seed);
  const offset = 3;
  const rowStride = layout === 'row' ? cols : layout === 'col' ? 1 : cols + 5;
  const colStride = layout === 'col' ? rows : 1;
  const data = new Float32Array(offset + rows * cols + rows * 5 + cols + 8).fill(Number.NaN);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) data[offset + i * rowStride + j * colStride] = r() * 2 - 1;
  return { data, offset, rowStride, colStride, at: (i, j) => data[offset + i * rowStride + j * colStride]! };
}

interface Case {
  m: number;
  n: number;
  k: number;
  la: Layout;
  lb: Layout;
  alpha?: number;
  beta?: number;
  /** C column stride (1 = dense rows). */
  ccs?: number;
  passBytes?: number;
}

/** Runs one product through wasmSgemm and checks every element of C (and C's untouched gaps). */
function runCase(c: Case, seed: number): Float32Array {
  const { m, n, k } = c;
  const alpha = c.alpha ?? 1;
  const beta = c.beta ?? 0;
  const ccs = c.ccs ?? 1;
  const A = matrix(m, k, seed, c.la);
  const B = matrix(k, n, seed + 1, c.lb);
  const ldc = n * ccs + 2;
  const r = rng(seed + 2);
  const C = new Float32Array(m * ldc + 1).map(() => r() - 0.5);
  const C0 = Float64Array.from(C);
  wasmSgemm(m, n, k, alpha, A, B, beta, { data: C, offset: 1, rowStride: ldc, colStride: ccs }, { passBytes: c.passBytes });
  const written = new Set<number>();
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      let mag = 0;
      for (let p = 0; p < k; p++) {
        s += A.at(i, p) * B.at(p, j);
        mag += Math.abs(A.at(i, p) * B.at(p, j));
      }
      const at = 1 + i * ldc + j * ccs;
      written.add(at);
      const want = alpha * s + (beta === 0 ? 0 : beta * C0[at]!);
      const got = C[at]!;
      // float32 accumulation: the error grows with the sum of |terms|.
      const tol = 2e-6 * (Math.abs(alpha) * mag + Math.abs(beta * C0[at]!) + 1);
      if (!(Math.abs(got - want) <= tol)) assert.fail(`${JSON.stringify(c)}: C[${i}, ${j}] = ${got}, expected ${want} (tol ${tol})`);
    }
  }
  for (let q = 0; q < C.length; q++) if (!written.has(q)) assert.equal(C[q], Math.fround(C0[q]!), `C gap at ${q} overwritten`);
  return C;
}

test('wasm sgemm: odd shapes across tile and block edges, every operand layout', { skip }, () => {
  setWasmThreads(1);
  try {
    const shapes = [[1, 1, 1], [3, 7, 5], [4, 8, 1], [5, 9, 256], [13, 33, 257], [97, 83, 301], [129, 20, 70], [6, 1030, 40], [33, 17, 513]] as const;
    let seed = 1;
    for (const [m, n, k] of shapes) {
      for (const la of ['row', 'col', 'padded'] as const) {
        for (const lb of ['row', 'col', 'padded'] as const) runCase({ m, n, k, la, lb }, (seed += 3));
      }
    }
  } finally {
    setWasmThreads(undefined);
  }
});

test('wasm sgemm: alpha, beta, strided C, k = 0, and chunked passes', { skip }, () => {
  runCase({ m: 37, n: 45, k: 600, la: 'row', lb: 'col', alpha: 0.5, beta: 0.75 }, 11);
  runCase({ m: 37, n: 45, k: 600, la: 'padded', lb: 'row', alpha: -2, beta: 1, ccs: 3 }, 12);
  runCase({ m: 9, n: 21, k: 0, la: 'row', lb: 'row', beta: 0.5 }, 13);
  runCase({ m: 9, n: 21, k: 0, la: 'row', lb: 'row', beta: 0 }, 14);
  // ~40 KiB per pass: C is cut into several row and column chunks, each with the whole K.
  runCase({ m: 70, n: 90, k: 100, la: 'row', lb: 'col', beta: 0.5, passBytes: 40_000 }, 15);
});

test('wasm sgemm: 1 and 2 threads give identical results (column and row splits)', { skip }, async () => {
  const ready = await warmWasmThreads(2);
  const info = wasmSgemmInfo();
  if (info.sharedMemory) assert.equal(ready, 1, 'one worker thread should be ready');
  try {
    // A 'row': read in place (macroRow); A 'col': packed slivers (macro).
    for (const [m, n, k, la] of [[300, 200, 300, 'row'], [400, 12, 600, 'col'], [129, 1000, 65, 'row'], [130, 90, 257, 'col']] as const) {
      setWasmThreads(1);
      const c1 = runCase({ m, n, k, la, lb: 'row' }, 30);
      setWasmThreads(2);
      const c2 = runCase({ m, n, k, la, lb: 'row' }, 30);
      // Each element sums the same terms in the same order whatever the split.
      assert.deepEqual(c1, c2);
    }
  } finally {
    setWasmThreads(undefined);
    await shutdownWasmThreads();
  }
  assert.equal(wasmSgemmInfo().workersReady, 0);
});

const self = fileURLToPath(import.meta.url);
const childScript = `
  const { wasmSgemm, wasmSgemmInfo, warmWasmThreads, setWasmThreads } = await import(${JSON.stringify(self.replace(/test[/\\\\]wasm-sgemm\.test\.js$/, 'src/kernels/cpu/wasm-sgemm-run.js'))});
  const m = 70, n = 90, k = 333;
  const A = new Float32Array(m * k).map((_, i) => Math.sin(i));
  const B = new Float32Array(k * n).map((_, i) => Math.cos(i));
  const C = new Float32Array(m * n);
  await warmWasmThreads(2);
  setWasmThreads(2);
  wasmSgemm(m, n, k, 1, { data: A, offset: 0, rowStride: k, colStride: 1 }, { data: B, offset: 0, rowStride: n, colStride: 1 }, 0, { data: C, offset: 0, rowStride: n, colStride: 1 });
  let worst = 0;
  for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) {
    let s = 0, mag = 0;
    for (let p = 0; p < k; p++) { s += A[i * k + p] * B[p * n + j]; mag += Math.abs(A[i * k + p] * B[p * n + j]); }
    worst = Math.max(worst, Math.abs(C[i * n + j] - s) / (2e-6 * (mag + 1)));
  }
  console.log(JSON.stringify({ ...wasmSgemmInfo(), worst }));
`;

function child(flags: string[]): { info: { relaxedSimd: boolean; workersReady: number; worst: number }; ms: number } {
  const t0 = Date.now();
  const r = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', childScript], { encoding: 'utf8', timeout: HANG_GUARD_MS });
  assert.equal(r.status, 0, `child failed (signal ${r.signal}): ${r.stderr}`);
  return { info: JSON.parse(r.stdout.trim().split('\n').pop()!), ms: Date.now() - t0 };
}

test('wasm sgemm: relaxed-SIMD FMA kernel where V8 has it; a process using the workers exits by itself', { skip }, () => {
  // Without the flag Node 20 has no relaxed SIMD: mul + add, and the same bound holds.
  const plain = child([]);
  assert.ok(plain.info.worst <= 1, `mul+add kernel error ${plain.info.worst} x tolerance`);
  // The child never calls process.exit: finishing at all (spawnSync's hang guard would kill it) shows the unref'd workers don't hold it.
  if (wasmSgemmInfo().sharedMemory) assert.equal(plain.info.workersReady, 1);
  const fma = child(['--experimental-wasm-relaxed-simd']);
  assert.equal(fma.info.relaxedSimd, true, 'relaxed SIMD should validate with the V8 flag');
  // Node refuses V8 flags in a worker's execArgv: the pool must still start its worker.
  if (wasmSgemmInfo().sharedMemory) assert.equal(fma.info.workersReady, 1);
  assert.ok(fma.info.worst <= 1, `relaxed_madd kernel error ${fma.info.worst} x tolerance`);
});

test('eager float32 products and conv2d run on the Wasm GEMM on the forced wasm path', { skip }, () => {
  setCpuPath('wasm');
  try {
    const before = wasmSgemmCalls();
    const a = rand([70, 130], 1, 'transposed');
    const b = rand([130, 45], 2);
    const r = refMatmul(a.toFlatArray(), a.shape, b.toFlatArray(), b.shape);
    assertClose(kiln.matmul(a, b), r.values, r.shape, { atol: 4e-6 * 130, rtol: 1e-5 });
    const x = rand([3, 2, 19, 40], 3);
    const y = rand([2, 40, 23], 4, 'transposed');
    const rb = refMatmul(x.toFlatArray(), x.shape, y.toFlatArray(), y.shape);
    assertClose(kiln.matmul(x, y), rb.values, rb.shape, { atol: 4e-6 * 40, rtol: 1e-5 });
    assert.ok(wasmSgemmCalls() - before >= 2, `wasm sgemm calls: ${wasmSgemmCalls() - before}`);
    // float64 keeps the float64-accumulating engine.
    const n0 = wasmSgemmCalls();
    kiln.matmul(rand([20, 30], 5, 'contiguous', 'float64'), rand([30, 20], 6, 'contiguous', 'float64'));
    assert.equal(wasmSgemmCalls(), n0);
  } finally {
    setCpuPath(undefined);
  }
  setCpuPath('js');
  try {
    const n0 = wasmSgemmCalls();
    kiln.matmul(rand([20, 30], 5), rand([30, 20], 6));
    assert.equal(wasmSgemmCalls(), n0, 'the js path never uses the Wasm GEMM');
  } finally {
    setCpuPath(undefined);
  }
});

test('wasm conv2d (implicit GEMM): channels_last and NCHW, stride, dilation, asymmetric padding, bias; groups fall back; weight updates repack; 1 and 2 threads agree', { skip }, async () => {
  const cases: { x: [number, number, number, number]; w: [number, number, number, number]; stride: [number, number]; pad: [number, number, number, number]; dil: [number, number]; groups: number; layout: 'channelsLast' | 'contiguous' | 'strided'; gemms: number }[] = [
    // one GEMM over both images (channels_last pixels are evenly strided); K = 147
    { x: [2, 3, 17, 15], w: [8, 3, 7, 7], stride: [2, 2], pad: [3, 3, 3, 3], dil: [1, 1], groups: 1, layout: 'channelsLast', gemms: 1 },
    // K = 40 * 9 = 360 crosses the KC = 256 block in the middle of a channel run
    { x: [1, 40, 9, 11], w: [19, 40, 3, 3], stride: [1, 1], pad: [1, 1, 1, 1], dil: [1, 1], groups: 1, layout: 'channelsLast', gemms: 1 },
    // NCHW output: one GEMM per image
    { x: [2, 5, 10, 9], w: [7, 5, 3, 2], stride: [1, 2], pad: [0, 1, 2, 1], dil: [2, 1], groups: 1, layout: 'contiguous', gemms: 2 },
    { x: [1, 4, 8, 8], w: [6, 4, 1, 1], stride: [1, 1], pad: [0, 0, 0, 0], dil: [1, 1], groups: 1, layout: 'strided', gemms: 1 },
    // direct path (K runs >= 32 read in place from a padded copy): dilated width (runs of c), NCHW in and out, ow not a multiple of 4, o not of 8
    { x: [2, 33, 9, 10], w: [13, 33, 3, 3], stride: [2, 1], pad: [1, 0, 2, 1], dil: [1, 2], groups: 1, layout: 'contiguous', gemms: 1 },
    // direct path, channels_last, runs of 3 * 24 = 72
    { x: [2, 24, 11, 13], w: [20, 24, 3, 3], stride: [1, 1], pad: [1, 1, 1, 1], dil: [1, 1], groups: 1, layout: 'channelsLast', gemms: 1 },
    // direct path, a 1x1 conv over 300 channels: the run is cut into K blocks of 256 + 44; strided input
    { x: [1, 300, 5, 6], w: [9, 300, 1, 1], stride: [1, 1], pad: [0, 0, 0, 0], dil: [1, 1], groups: 1, layout: 'strided', gemms: 1 },
    // grouped: the JS im2col kernel (its GEMMs are float32 too, so they still count here)
    { x: [1, 6, 7, 7], w: [4, 3, 3, 3], stride: [1, 1], pad: [1, 1, 1, 1], dil: [1, 1], groups: 2, layout: 'contiguous', gemms: -1 },
  ];
  setCpuPath('wasm');
  try {
    cases.forEach((c, i) => {
      const x = rand(c.x, 30 + i, c.layout);
      const w = rand(c.w, 40 + i, 'contiguous', 'float32', -0.5, 0.5);
      const b = rand([c.w[0]], 50 + i);
      const before = wasmSgemmCalls();
      const y = kiln.conv2d(x, w, b, c.stride, c.pad, c.dil, c.groups);
      if (c.gemms >= 0) assert.equal(wasmSgemmCalls() - before, c.gemms, `case ${i}: Wasm GEMM calls`);
      const ref = refConv2d(x.toFlatArray(), c.x, w.toFlatArray(), c.w, b.toFlatArray(), c.stride, c.pad, c.dil, c.groups);
      const k = c.w[1] * c.w[2] * c.w[3];
      assertClose(y, ref.values, ref.shape, { atol: 4e-6 * k, rtol: 1e-5 });
      if (c.layout === 'channelsLast') assert.ok(y.isContiguous('channelsLast'), `case ${i}: channels_last output`);
    });
    const x = rand([1, 3, 6, 6], 60, 'channelsLast');
    const w = rand([4, 3, 3, 3], 61);
    const y1 = kiln.conv2d(x, w, null, 1, 1).toFlatArray();
    kiln.noGrad(() => w.mul_(-1));
    const y2 = kiln.conv2d(x, w, null, 1, 1).toFlatArray();
    assert.deepEqual(y2, y1.map((v) => -v), 'conv after weight *= -1');
    // Output rows are dealt to the threads whole: the same sums in the same order.
    await warmWasmThreads(2);
    for (const layout of ['channelsLast', 'contiguous'] as const) {
      const xt = rand([2, 64, 16, 16], 70, layout);
      const wt = rand([64, 64, 3, 3], 71, 'contiguous', 'float32', -0.2, 0.2);
      setWasmThreads(1);
      const t1 = kiln.conv2d(xt, wt, null, 1, 1).toFlatArray();
      setWasmThreads(2);
      const t2 = kiln.conv2d(xt, wt, null, 1, 1).toFlatArray();
      assert.deepEqual(t2, t1, `${layout}: 2 threads == 1 thread`);
    }
  } finally {
    setWasmThreads(undefined);
    setCpuPath(undefined);
    await shutdownWasmThreads();
  }
});
