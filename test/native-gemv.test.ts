/**
 * The native GEMV (kernels/cpu/native/gemv.ts) that runs decode-sized linears: float32 and
 * bfloat16 weights, 1-4 rows, with and without bias, sizes that leave vector and 4-row tails, a
 * strided single row, a weight view with a row stride; against float64 references of the same
 * (bfloat16-exact) inputs, in both weight orders (KILN_CPU_GEMV_STREAM). Each case asserts the GEMV ran; 5 rows fall back to the GEMM. Skips
 * where no C compiler works.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { buildSharedObjectSync, loadLibrary, probeToolchain, setCpuPath } from '../src/kernels/cpu/native/index.js';
import { GEMV_C_SOURCE } from '../src/kernels/cpu/native/gemv-c.js';
import { bfloat16BitsToFloat32 } from '../src/tensor/half.js';
import { nativeGemvCalls } from '../src/kernels/cpu/native/gemv.js';
import { randomValues } from './helpers/make.js';
import { setOption } from '../src/runtime/config.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;

/** float64 x W^T + b over the tensors' own (already rounded) values. */
function reference(x: Tensor, w: Tensor, b: Tensor | null): number[] {
  const xs = x.to('float32').contiguous().toFlatArray();
  const ws = w.to('float32').contiguous().toFlatArray();
  const bs = b ? b.to('float32').toFlatArray() : null;
  const [n, k] = w.shape as [number, number];
  const m = xs.length / k;
  const out: number[] = [];
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = bs ? bs[j]! : 0;
      for (let p = 0; p < k; p++) s += xs[i * k + p]! * ws[j * k + p]!;
      out.push(s);
    }
  }
  return out;
}

/** Runs the linear in both weight orders (KILN_CPU_GEMV_STREAM off and on). */
function check(x: Tensor, w: Tensor, b: Tensor | null, what: string): void {
  for (const stream of [false, true]) {
    setOption('KILN_CPU_GEMV_STREAM', stream);
    try {
      checkOnce(x, w, b, `${what}${stream ? ' (stream order)' : ''}`);
    } finally {
      setOption('KILN_CPU_GEMV_STREAM', undefined);
    }
  }
}

function checkOnce(x: Tensor, w: Tensor, b: Tensor | null, what: string): void {
  setCpuPath('native');
  try {
    const before = nativeGemvCalls();
    const y = kiln.nn.functional.linear(x, w, b ?? undefined);
    assert.equal(nativeGemvCalls() - before, 1, `${what}: the GEMV ran`);
    assert.equal(y.dtype, w.dtype);
    assert.deepEqual(y.shape, [...x.shape.slice(0, -1), w.shape[0]]);
    const got = y.to('float32').toFlatArray();
    const want = reference(x, w, b);
    const k = w.shape[1]!;
    for (let i = 0; i < want.length; i++) {
      // float32 accumulation over k terms of size <= 4 (|x|, |w| <= 2); bfloat16 adds one rounding of the output.
      const tol = w.dtype === 'bfloat16' ? 2 ** -8 * Math.abs(want[i]!) + 1e-5 * k : 2e-6 * k;
      assert.ok(Math.abs(got[i]! - want[i]!) <= tol, `${what}[${i}]: got ${got[i]}, expected ${want[i]} (tol ${tol})`);
    }
  } finally {
    setCpuPath(undefined);
  }
}

const t = (n: number, shape: number[], dtype: 'float32' | 'bfloat16', seed: number): Tensor => kiln.tensor(randomValues(n, seed), { dtype }).view(shape);

test('GEMV linear matches float64 for float32 and bfloat16 weights, 1-4 rows, tails, bias', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16'] as const) {
    for (const [m, n, k] of [[1, 37, 70], [1, 256, 1024], [2, 9, 33], [3, 130, 64], [4, 1001, 300], [1, 5, 3]] as const) {
      for (const withBias of [false, true]) {
        const x = t(m * k, [m, k], dtype, m + n + k);
        const w = t(n * k, [n, k], dtype, 7 * n + k);
        const b = withBias ? t(n, [n], dtype, n) : null;
        check(x, w, b, `${dtype} [${m}, ${k}] x [${n}, ${k}]^T${withBias ? ' + b' : ''}`);
      }
    }
  }
});

test('GEMV linear: 3-d input, a strided single row, a weight with a padded row stride', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16'] as const) {
    check(t(2 * 48, [1, 2, 48], dtype, 1), t(20 * 48, [20, 48], dtype, 2), null, `${dtype} 3-d`);
    // Row 1, columns 8..47 of a [3, 64] matrix: a single row read in place through its offset.
    const base = t(3 * 64, [3, 64], dtype, 3);
    check(kiln.narrow(base, 1, 8, 40).narrow(0, 1, 1), t(11 * 40, [11, 40], dtype, 4), null, `${dtype} sliced row`);
    const wide = t(17 * 80, [17, 80], dtype, 5);
    check(t(64, [1, 64], dtype, 6), kiln.narrow(wide, 1, 16, 64), t(17, [17], dtype, 7), `${dtype} weight row stride 80`);
  }
});

test('five rows or a transposed weight skip the GEMV', { skip }, () => {
  setCpuPath('native');
  try {
    const before = nativeGemvCalls();
    kiln.nn.functional.linear(t(5 * 32, [5, 32], 'float32', 1), t(8 * 32, [8, 32], 'float32', 2));
    kiln.nn.functional.linear(t(32, [1, 32], 'float32', 1), t(8 * 32, [32, 8], 'float32', 2).t());
    assert.equal(nativeGemvCalls() - before, 0);
  } finally {
    setCpuPath(undefined);
  }
});

test('GEMV linear, bfloat16: 8-row dot-product blocks with row and column tails, 1-4 rows', { skip }, () => {
  for (const [m, n, k] of [[1, 69, 1007], [2, 24, 96], [3, 1029, 65], [4, 17, 33], [1, 8, 32], [1, 7, 31]] as const) {
    for (const withBias of [false, true]) {
      const x = t(m * k, [m, k], 'bfloat16', 3 * m + k);
      const w = t(n * k, [n, k], 'bfloat16', 5 * n + k);
      const b = withBias ? t(n, [n], 'bfloat16', n + 1) : null;
      check(x, w, b, `bfloat16 [${m}, ${k}] x [${n}, ${k}]^T${withBias ? ' + b' : ''}`);
    }
  }
});

/** bfloat16 bits of v (truncated): the inputs below are made bfloat16-exact with it. */
function bf16Bits(v: number): number {
  const f = new Float32Array([v]);
  return new Uint32Array(f.buffer)[0]! >>> 16;
}

test('GEMV C kernel, both bfloat16 paths (dot-product instructions where built, portable widening): bfloat16 or float32 x and y vs float64', { skip }, () => {
  if (!probe.ok) return;
  const sig = 'int32_t kiln_gemv(int64_t m, int64_t n, int64_t k, void *x, int64_t xo, int64_t ldx, int32_t xbf16, void *w, int64_t wo, int64_t ldw, int32_t wbf16, void *bias, int64_t biaso, int64_t bs, void *y, int64_t yo, int64_t ldy, int32_t ybf16, int32_t nthreads, int32_t flags)';
  const fns = [GEMV_C_SOURCE, `#define GV_PORTABLE 1\n${GEMV_C_SOURCE}`].map((src, i) => loadLibrary(buildSharedObjectSync(`kiln_gemv_test${i}`, src, probe.toolchain)).func(sig));
  for (const [m, n, k] of [[1, 45, 1000], [3, 67, 129], [4, 130, 40], [2, 3, 5]] as const) {
    const xv = randomValues(m * k, m + k).map((v) => bfloat16BitsToFloat32(bf16Bits(v)));
    const wv = randomValues(n * k, n + k).map((v) => bfloat16BitsToFloat32(bf16Bits(v)));
    const bias = new Float32Array(randomValues(n, n));
    const xb = new Uint16Array(xv.map(bf16Bits));
    const wb = new Uint16Array(wv.map(bf16Bits));
    for (const fn of fns) {
      for (const [xbf16, ybf16] of [[1, 1], [1, 0], [0, 0]] as const) {
        // One padding element in front: offsets into x, W and y are honoured.
        const x = xbf16 ? new Uint16Array([0, ...xb]) : new Float32Array([0, ...xv]);
        // flags 1: the stream order (GV_STREAM). y starts as NaN each time, so each pass writes all of it.
        for (const flags of [0, 1]) {
          const y = ybf16 ? new Uint16Array(m * n + 1).fill(0x7fc0) : new Float32Array(m * n + 1).fill(NaN);
          const rc = fn(m, n, k, x, 1, k, xbf16, new Uint16Array([0, ...wb]), 1, k, 1, bias, 0, 1, y, 1, n, ybf16, 2, flags) as number;
          assert.equal(rc, 0);
          for (let i = 0; i < m; i++) {
            for (let j = 0; j < n; j++) {
              let s = bias[j]!;
              for (let p = 0; p < k; p++) s += xv[i * k + p]! * wv[j * k + p]!;
              const got = ybf16 ? bfloat16BitsToFloat32(y[1 + i * n + j]!) : y[1 + i * n + j]!;
              const tol = (ybf16 ? 2 ** -8 * Math.abs(s) : 0) + 2e-6 * k;
              assert.ok(Math.abs(got - s) <= tol, `[${m}, ${n}, ${k}] x${xbf16 ? 'bf16' : 'f32'} y${ybf16 ? 'bf16' : 'f32'} flags ${flags} (${i}, ${j}): got ${got}, expected ${s}`);
            }
          }
        }
      }
    }
  }
});

test('GEMV split gating: one item per thread only up to KILN_CPU_GEMV_SPLIT_MAX_THREADS threads, and only with KILN_CPU_GEMV_SPLIT', async () => {
  const { gemvFlags } = await import('../src/kernels/cpu/native/gemv.js');
  const split = (threads: number): boolean => (gemvFlags(threads) & 2) !== 0;
  try {
    assert.deepEqual([1, 2, 4, 5, 16].map(split), [true, true, true, false, false], 'default: up to 4 threads');
    setOption('KILN_CPU_GEMV_SPLIT_MAX_THREADS', 16);
    assert.equal(split(16), true);
    assert.equal(split(17), false);
    setOption('KILN_CPU_GEMV_SPLIT', false);
    assert.deepEqual([1, 2, 16].map(split), [false, false, false], 'off at any thread count');
    // The item size and stream bits do not depend on the thread count.
    assert.equal(gemvFlags(2) & ~2, gemvFlags(16) & ~2);
  } finally {
    setOption('KILN_CPU_GEMV_SPLIT', undefined);
    setOption('KILN_CPU_GEMV_SPLIT_MAX_THREADS', undefined);
  }
});

test('GEMV work items (KILN_CPU_GEMV_ITEM_KIB, KILN_CPU_GEMV_SPLIT): the same bits at 1, 16 and 64 KiB and split over 1, 2, 3 and 5 threads, and float64 agreement', { skip }, async () => {
  const { setNativeThreads } = await import('../src/kernels/cpu/native/threads.js');
  // 1 KiB rounds up to the 8-row minimum: 300 rows of 512 bfloat16 (1 KiB each) are 38 items at
  // 1 KiB, 19 at 16 KiB (16 rows) and 5 at 64 KiB; 300 KiB of weights, above the 256 KiB under which
  // the GEMV runs on one thread, so two threads share the items. Split, 300 rows are 1 item of 304
  // rows (1 thread), 2 of 152, 3 of 104 (the last 92 rows) and 5 of 64 (the last 44).
  const x = kiln.tensor(randomValues(2 * 512, 41), { dtype: 'float32' }).reshape([2, 512]).to('bfloat16');
  const w = kiln.tensor(randomValues(300 * 512, 42), { dtype: 'float32' }).reshape([300, 512]).to('bfloat16');
  setCpuPath('native');
  try {
    const run = (label: string): number[] => {
      const before = nativeGemvCalls();
      const y = kiln.nn.functional.linear(x, w);
      assert.equal(nativeGemvCalls() - before, 1, `${label}: the GEMV ran`);
      return y.to('float32').toFlatArray();
    };
    setOption('KILN_CPU_GEMV_SPLIT', false);
    setNativeThreads(2);
    const bits: number[][] = [];
    for (const kib of [1, 16, 64]) {
      setOption('KILN_CPU_GEMV_ITEM_KIB', kib);
      bits.push(run(`${kib} KiB`));
    }
    assert.deepEqual(bits[0], bits[2], '1 KiB items give the 64 KiB bits');
    assert.deepEqual(bits[1], bits[2], '16 KiB items give the 64 KiB bits');
    setOption('KILN_CPU_GEMV_SPLIT', true);
    setOption('KILN_CPU_GEMV_SPLIT_MAX_THREADS', 8); // the default (4) would leave 5 threads unsplit
    for (const threads of [1, 2, 3, 5]) {
      setNativeThreads(threads);
      assert.deepEqual(run(`split over ${threads}`), bits[2], `split over ${threads} threads gives the 64 KiB bits`);
    }
    const ref = reference(x, w, null);
    for (let i = 0; i < ref.length; i++) assert.ok(Math.abs(bits[0]![i]! - ref[i]!) <= 1e-2 * (1 + Math.abs(ref[i]!)), `element ${i}: ${bits[0]![i]} vs ${ref[i]}`);
  } finally {
    setOption('KILN_CPU_GEMV_ITEM_KIB', undefined);
    setOption('KILN_CPU_GEMV_SPLIT', undefined);
    setOption('KILN_CPU_GEMV_SPLIT_MAX_THREADS', undefined);
    setNativeThreads(undefined);
    setCpuPath(undefined);
  }
});
