/**
 * The tensor-core skinny GEMM (src/kernels/cuda/mma-gemv.ts): bfloat16 `linear` with 2..64 rows
 * and KILN_MMA_GEMV_MAX_ROWS=64 runs on it (its run counter moves) and equals a float64 product of
 * the same bfloat16 inputs within the float32 accumulation bound plus one bfloat16 rounding, for
 * Qwen3-0.6B's decode shapes (the LM head checked on sampled columns), odd shapes (N not a
 * multiple of 16, K below one 64-wide step or with a tail), M = 2, 3, 5, 8, 13, 16, 33, 64, a
 * bias, strided x rows, every launch configuration forced in turn (k split over 1..8 warps and
 * 1..4 cluster blocks, 1 or 2 tiles per warp), and the gated variant behind llm.linearSiluAndMul.
 * The configuration heuristic and the source generator's argument checks run without a GPU.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { ptrOf, streamOf } from '../src/kernels/cuda/device.js';
import { mmaGemvConfig, mmaGemvSource, mmaGemvStats, runMmaGemv, type MmaGemvConfig } from '../src/kernels/cuda/mma-gemv.js';
import { setOption } from '../src/runtime/config.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { hostF64, toBf16, worstRel } from './helpers/rounding-ref.js';
import { refLinearSiluMul } from './helpers/linear-silu-mul-ref.js';
import { rand } from './helpers/make.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
const ROWS = [2, 3, 5, 8, 13, 16, 33, 64] as const;

/** x [M, K] uniform in [-1, 1) and W [N, K] normal * 0.05, bfloat16, made on the device. */
function operands(m: number, n: number, k: number): { x: Tensor; w: Tensor } {
  const x = kiln.sub(kiln.mul(kiln.rand([m, k], { device: 'cuda' }), 2), 1).to('bfloat16');
  const w = kiln.mul(kiln.randn([n, k], { device: 'cuda' }), 0.05).to('bfloat16');
  return { x, w };
}

/**
 * Worst |got - want| / (2^-8 |want| + 1.01 K 2^-24 sum_k |x w|) over the columns `cols` (all when
 * absent) of out [M, N]: the float32 sum's error bound plus one round-to-nearest to bfloat16 (<= 1 passes).
 */
function worstBound(got: Float64Array, xv: Float64Array, wRows: Float64Array, cols: readonly number[], rowOf: (c: number) => number, m: number, n: number, k: number, bias: Float64Array | null): number {
  let worst = 0;
  let mag = 0;
  for (let r = 0; r < m; r++) {
    for (let ci = 0; ci < cols.length; ci++) {
      const col = cols[ci]!;
      const wo = rowOf(ci) * k;
      let s = 0;
      let a = 0;
      for (let i = 0; i < k; i++) {
        const p = xv[r * k + i]! * wRows[wo + i]!;
        s += p;
        a += Math.abs(p);
      }
      if (bias) s += bias[col]!;
      const g = got[r * n + col]!;
      const tol = 2 ** -8 * Math.abs(s) + 1.01 * k * 2 ** -24 * (a + (bias ? Math.abs(bias[col]!) : 0));
      worst = Math.max(worst, Math.abs(g - s) / tol);
      mag = Math.max(mag, Math.abs(g));
    }
  }
  assert.ok(mag > 1e-2, 'a real result (not all zeros)');
  return worst;
}

const f64 = (t: Tensor): Float64Array => Float64Array.from(hostF64(t));
const allCols = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

function withRows<T>(fn: () => T): T {
  setOption('KILN_MMA_GEMV_MAX_ROWS', 64);
  setOption('KILN_GEMV_MAX_ROWS', 1);
  try {
    return fn();
  } finally {
    setOption('KILN_MMA_GEMV_MAX_ROWS', undefined);
    setOption('KILN_GEMV_MAX_ROWS', undefined);
  }
}

for (const [label, n, k] of [
  ['qkv', 4096, 1024],
  ['o', 1024, 2048],
  ['gate_up', 6144, 1024],
  ['down', 1024, 3072],
  ['odd N=1000 K=72', 1000, 72],
  ['odd N=37 K=520', 37, 520],
  ['odd N=3001 K=1032', 3001, 1032],
  ['odd N=9000 K=200', 9000, 200],
] as const) {
  test(`mma-gemv bf16 linear ${label} [M x ${k}] x [${n} x ${k}]^T, M = ${ROWS.join(',')}, equals float64 within fp32 sum + one rounding`, { skip }, () => withRows(() => {
    for (const m of ROWS) {
      kiln.scope(() => {
        const { x, w } = operands(m, n, k);
        const withBias = m % 2 === 1;
        const b = withBias ? kiln.mul(kiln.randn([n], { device: 'cuda' }), 0.5).to('bfloat16') : null;
        const before = mmaGemvStats.runs;
        const y = kiln.nn.functional.linear(x, w, b);
        assert.equal(mmaGemvStats.runs, before + 1, `${label} M=${m}: ran on the mma-gemv kernel`);
        const e = worstBound(f64(y), f64(x), f64(w), allCols(n), (c) => c, m, n, k, b ? f64(b) : null);
        assert.ok(e <= 1, `${label} M=${m} bias ${withBias}: worst error ${e} of the bound`);
      });
    }
  }));
}

test('mma-gemv bf16 linear: the LM head [151936 x 1024] on sampled columns (first, middle, last 64), M = 2, 8, 33, 64', { skip }, () => withRows(() => {
  const [n, k] = [151936, 1024];
  const w = kiln.keep(kiln.mul(kiln.randn([n, k], { device: 'cuda' }), 0.05).to('bfloat16'));
  const starts = [0, 75000, n - 64];
  const cols = starts.flatMap((s) => Array.from({ length: 64 }, (_, i) => s + i));
  const wRows = Float64Array.from(starts.flatMap((s) => hostF64(kiln.narrow(w, 0, s, 64))));
  for (const m of [2, 8, 33, 64]) {
    kiln.scope(() => {
      const x = kiln.sub(kiln.mul(kiln.rand([m, k], { device: 'cuda' }), 2), 1).to('bfloat16');
      const before = mmaGemvStats.runs;
      const y = kiln.nn.functional.linear(x, w, null);
      assert.equal(mmaGemvStats.runs, before + 1, `M=${m}: ran on the mma-gemv kernel`);
      // Only the sampled columns come back to the host.
      const got = new Float64Array(m * n);
      for (const s of starts) {
        const part = hostF64(kiln.narrow(y, 1, s, 64));
        for (let r = 0; r < m; r++) for (let i = 0; i < 64; i++) got[r * n + s + i] = part[r * 64 + i]!;
      }
      const e = worstBound(got, f64(x), wRows, cols, (ci) => ci, m, n, k, null);
      assert.ok(e <= 1, `LM head M=${m}: worst error ${e} of the bound`);
    });
  }
  w.dispose();
}));

test('mma-gemv: every launch configuration (k over 1..8 warps x 1..4 cluster blocks, 1 or 2 tiles a warp) on N=300 K=1032, M = 13 and 64', { skip }, () => {
  const [n, k] = [300, 1032];
  for (const m of [13, 64]) kiln.scope(() => {
    const { x, w } = operands(m, n, k);
    const xv = f64(x);
    const wv = f64(w);
    for (const nt of [1, 2]) {
      for (const kw of [1, 2, 4, 8]) {
        for (const c of [1, 2, 4]) {
          if (c > 1 && kw < 2) continue;
          const cfg: MmaGemvConfig = { mp: Math.ceil(m / 8) * 8, nt, kw, c, gated: false, fast: false };
          const out = kiln.empty([m, n], { dtype: 'bfloat16', device: 'cuda' });
          runMmaGemv(out.device.index, streamOf(out), { m, n, k, x: ptrOf(x), ldx: k, w: ptrOf(w), ldw: k, out: ptrOf(out), ldo: n }, false, false, cfg);
          const e = worstBound(f64(out), xv, wv, allCols(n), (col) => col, m, n, k, null);
          assert.ok(e <= 1, `M=${m} ${JSON.stringify(cfg)}: worst error ${e} of the bound`);
        }
      }
    }
  });
});

test('mma-gemv: x rows at a stride (a narrowed activation) and a compiled linear; 65 rows go to cuBLASLt', { skip }, () => withRows(() => kiln.scope(() => {
  const [m, n, k] = [5, 300, 256];
  const wide = kiln.sub(kiln.mul(kiln.rand([m, 2 * k], { device: 'cuda' }), 2), 1).to('bfloat16');
  const x = kiln.narrow(wide, 1, k, k); // rows of K at a stride of 2K, starting 512 bytes in
  const w = kiln.mul(kiln.randn([n, k], { device: 'cuda' }), 0.05).to('bfloat16');
  const xv = f64(x);
  const wv = f64(w);
  let before = mmaGemvStats.runs;
  assert.ok(worstBound(f64(kiln.nn.functional.linear(x, w, null)), xv, wv, allCols(n), (c) => c, m, n, k, null) <= 1, 'strided');
  assert.equal(mmaGemvStats.runs, before + 1, 'strided x ran on the kernel');
  const f = kiln.compile((a: kiln.Tensor) => kiln.nn.functional.linear(a, w, null), { capturedTensors: 'allow' });
  assert.ok(worstBound(f64(f(x)), xv, wv, allCols(n), (c) => c, m, n, k, null) <= 1, 'compiled');
  const x65 = kiln.sub(kiln.mul(kiln.rand([65, k], { device: 'cuda' }), 2), 1).to('bfloat16');
  before = mmaGemvStats.runs;
  assert.ok(worstBound(f64(kiln.nn.functional.linear(x65, w, null)), f64(x65), wv, allCols(n), (c) => c, 65, n, k, null) <= 1, '65 rows');
  assert.equal(mmaGemvStats.runs, before, '65 rows run on cuBLASLt');
})));

test('mma-gemv gated (llm.linearSiluAndMul) equals the float64 loop: I = 3072 / 1000 / 37, M = 2, 5, 16, 33, 64, bias or none', { skip }, () => withRows(() => {
  for (const [half, k] of [[3072, 1024], [1000, 520], [37, 72]] as const) {
    for (const m of [2, 5, 16, 33, 64]) {
      for (const withBias of [false, true]) {
        const label = `I=${half} K=${k} M=${m} bias ${withBias}`;
        const x = rand([m, k], half + m, 'contiguous', 'bfloat16', -1, 1).to('cuda');
        const w = rand([2 * half, k], 2, 'contiguous', 'bfloat16', -0.1, 0.1).to('cuda');
        const b = withBias ? rand([2 * half], 3, 'contiguous', 'bfloat16', -0.5, 0.5).to('cuda') : null;
        const before = mmaGemvStats.runs;
        const got = hostF64(kiln.llm.linearSiluAndMul(x, w, b));
        assert.equal(mmaGemvStats.runs, before + 1, `${label}: the gated mma-gemv ran`);
        assert.ok(got.reduce((a, v) => Math.max(a, Math.abs(v)), 0) > 1e-2, `${label}: a real result`); // no spread: 196608 values overflow the call stack
        // The output's bfloat16 rounding and the rounded projections (as gemv's gated test bounds them).
        const e = worstRel(got, refLinearSiluMul(x, w, b, toBf16), 2 ** -7);
        assert.ok(e <= 1, `${label}: worst error ${e}`);
      }
    }
  }
}));

test('mma-gemv configuration: o/down at 132 SMs split K over a cluster, wide weights need none; bad configurations are refused', () => {
  // Qwen3-0.6B o projection (N = 1024: 64 row tiles of 16) on an H200: K over the 8 warps and a cluster.
  const o = mmaGemvConfig(8, 1024, 2048, false, false, 132, true);
  assert.ok(o.c > 1 && (64 / (8 / o.kw)) * o.c >= 132, `o: ${JSON.stringify(o)}`);
  // Without clusters (sm_80/89) the same shape splits over warps only.
  assert.equal(mmaGemvConfig(8, 1024, 2048, false, false, 132, false).c, 1);
  // The LM head has blocks to spare: no split, two tiles a warp from 32 rows on.
  assert.deepEqual(mmaGemvConfig(33, 151936, 1024, false, false, 132, true), { mp: 40, nt: 2, kw: 1, c: 1, gated: false, fast: false });
  // Up to 8 rows: k over all 8 warps first, then the fewest cluster blocks for ~1.4 blocks per SM
  // (the H200 sweep's fastest at M = 8: bench/results/h200-s17-measure-2026-12-03.json).
  const pick = (n: number, k: number, gated = false) => {
    const c = mmaGemvConfig(8, n, k, gated, false, 132, true);
    return [c.nt, c.kw, c.c];
  };
  assert.deepEqual(pick(4096, 1024), [1, 8, 1]); // q|k|v
  assert.deepEqual(pick(3072, 1024, true), [2, 8, 1]); // gate|up with silu * mul
  assert.deepEqual(pick(1024, 2048), [1, 8, 4]); // o
  assert.deepEqual(pick(1024, 3072), [1, 8, 4]); // down
  // K of one 64-wide step: never more slices than steps.
  const tiny = mmaGemvConfig(2, 64, 64, false, false, 132, true);
  assert.equal(tiny.kw * tiny.c, 1);
  assert.throws(() => mmaGemvSource({ mp: 12, nt: 1, kw: 1, c: 1, gated: false, fast: false }), /multiple of 8/);
  assert.throws(() => mmaGemvSource({ mp: 8, nt: 1, kw: 1, c: 2, gated: false, fast: false }), /unsupported configuration/);
  assert.match(mmaGemvSource({ mp: 16, nt: 1, kw: 4, c: 2, gated: false, fast: false }), /__cluster_dims__\(2, 1, 1\)/);
});
