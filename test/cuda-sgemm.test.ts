/**
 * The SIMT fp32 linear kernel (src/kernels/cuda/sgemm.ts, experiment behind KILN_SGEMM=1) against a
 * float64 CPU reference: M below, at and above one 128-row tile, N with a partial column tile, K
 * split 1 to 16 ways (the deterministic workspace reduction), the bias, a row-strided input view;
 * layouts it does not take (W as [K, N], an odd N) fall back to cuBLASLt. Also the plan rule (no GPU).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { setSimtLinear, simtPlan, simtStats } from '../src/kernels/cuda/sgemm.js';
import { skipUnlessCuda } from './cuda-util.js';
import { maxRelError } from './helpers/assert.js';

const skip = skipUnlessCuda();

test('SIMT linear plan: Qwen3 shapes split K to about one block per SM; the lm head and K not a multiple of 16 do not split', () => {
  const sms = 132;
  assert.deepEqual(simtPlan(128, 4096, 1024, sms), { tile: { bm: 128, bn: 128, bk: 16 }, splits: 4 });
  assert.deepEqual(simtPlan(128, 1024, 2048, sms), { tile: { bm: 128, bn: 128, bk: 16 }, splits: 16 });
  assert.deepEqual(simtPlan(128, 1024, 3072, sms), { tile: { bm: 128, bn: 128, bk: 16 }, splits: 16 });
  assert.equal(simtPlan(128, 151936, 1024, sms)!.splits, 1);
  assert.equal(simtPlan(128, 4096, 1000, sms), null);
});

test('SIMT fp32 linear matches a float64 reference (splits 1-16, bias, partial tiles, strided rows) and falls back for other layouts', { skip }, () => {
  setSimtLinear(true);
  try {
    const g = new kiln.Generator(3);
    const cases = [
      { m: 128, k: 1024, n: 4096 },
      { m: 128, k: 2048, n: 128 },
      { m: 5, k: 64, n: 12 },
      { m: 200, k: 512, n: 1000 },
      { m: 64, k: 3072, n: 256 },
    ];
    for (const c of cases) {
      for (const withBias of [false, true]) {
        const x = kiln.randn([c.m, c.k], { generator: g });
        const w = kiln.randn([c.n, c.k], { generator: g });
        const b = withBias ? kiln.randn([c.n], { generator: g }) : null;
        const before = { ...simtStats };
        const got = kiln.linear(x.to('cuda'), w.to('cuda'), b ? b.to('cuda') : null).toFlatArray();
        assert.equal(simtStats.runs - before.runs, 1, `[${c.m}x${c.k}]x[${c.n}]: ran on the SIMT kernel`);
        const ref = kiln.linear(x.to('float64'), w.to('float64'), b ? b.to('float64') : null).toFlatArray();
        const e = maxRelError(got, ref);
        assert.ok(e < 1e-5, `[${c.m}x${c.k}] x [${c.n}x${c.k}]^T${withBias ? ' + bias' : ''}: relative error ${e.toExponential(2)}`);
      }
    }
    assert.ok(simtStats.split > 0, 'some cases split K');
    // Rows of a wider tensor (row stride 96 for K = 64): read in place.
    const base = kiln.randn([16, 96], { generator: g });
    const w = kiln.randn([32, 64], { generator: g });
    const strided = base.to('cuda').narrow(1, 0, 64);
    assert.equal(strided.strides[0], 96);
    const e1 = maxRelError(kiln.linear(strided, w.to('cuda'), null).toFlatArray(), kiln.linear(base.to('float64').narrow(1, 0, 64), w.to('float64'), null).toFlatArray());
    assert.ok(e1 < 1e-5, `strided rows: relative error ${e1.toExponential(2)}`);
    // x @ W with W [K, N] row-major, and N = 10 (not a multiple of 4): cuBLASLt, still right.
    const runs = simtStats.runs;
    const a = kiln.randn([8, 64], { generator: g });
    const wk = kiln.randn([64, 10], { generator: g });
    const e2 = maxRelError(kiln.matmul(a.to('cuda'), wk.to('cuda')).toFlatArray(), kiln.matmul(a.to('float64'), wk.to('float64')).toFlatArray());
    assert.ok(e2 < 1e-5, `fallback: relative error ${e2.toExponential(2)}`);
    assert.equal(simtStats.runs, runs, 'layouts the kernel does not take fall back');
  } finally {
    setSimtLinear(false);
  }
});
