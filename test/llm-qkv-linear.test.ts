/**
 * llm.qkvLinear (an attention layer's q, k and v projections of one input, three weights) on the
 * cpu: the native three-weight GEMV (kiln_gemv_multi; 1-4 rows, float32 and bfloat16, both weight
 * orders of KILN_CPU_GEMV_STREAM, widths that leave row tails) bit for bit against three native
 * linears and within rounding of a float64 loop; the reference composition it falls back to (5
 * rows); argument errors named by the op; Qwen3's eager cpu decode with KILN_DECODE_QKV on and off
 * gives the same greedy tokens with two GEMV calls a layer fewer.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { probeToolchain, setCpuPath } from '../src/kernels/cpu/native/index.js';
import { nativeGemvCalls } from '../src/kernels/cpu/native/gemv.js';
import { setOption } from '../src/runtime/config.js';
import { rand } from './helpers/make.js';

const skip = probeToolchain().ok ? false : 'native cpu path unavailable';

/** float64 x W^T over the tensors' own values. */
function reference(x: Tensor, w: Tensor): number[] {
  const xs = x.to('float64').contiguous().toFlatArray();
  const ws = w.to('float64').contiguous().toFlatArray();
  const [n, k] = w.shape as [number, number];
  const out: number[] = [];
  for (let i = 0; i < xs.length / k; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += xs[i * k + p]! * ws[j * k + p]!;
      out.push(s);
    }
  }
  return out;
}

test('llm.qkvLinear on the native GEMV: one call, the bits of three linears, float64 agreement (1 and 3 threads: each weight split on its own); 5 rows fall back to the composition', { skip }, async () => {
  const { setNativeThreads } = await import('../src/kernels/cpu/native/threads.js');
  setCpuPath('native');
  try {
    for (const dtype of ['float32', 'bfloat16'] as const) {
      for (const [stream, threads] of [[false, 1], [true, 1], [true, 3]] as const) {
        setOption('KILN_CPU_GEMV_STREAM', stream);
        setNativeThreads(threads);
        for (const [rows, k, nq, nkv] of [[1, 1024, 2048, 1024], [3, 200, 48, 24], [4, 64, 37, 5], [5, 40, 16, 8]] as const) {
          const x = rand([rows, k], 1 + rows, 'contiguous', dtype);
          const ws = [rand([nq, k], 2, 'contiguous', dtype, -0.2, 0.2), rand([nkv, k], 3, 'contiguous', dtype, -0.2, 0.2), rand([nkv, k], 4, 'contiguous', dtype, -0.2, 0.2)] as const;
          const before = nativeGemvCalls();
          const { q, k: kk, v } = kiln.llm.qkvLinear(x, ...ws);
          const calls = nativeGemvCalls() - before;
          const what = `${dtype} ${rows}x${k} -> ${nq}/${nkv}/${nkv}${stream ? ' (stream order)' : ''}, ${threads} thread(s)`;
          assert.equal(calls, rows <= 4 ? 1 : 0, `${what}: one native GEMV call (none past 4 rows)`);
          for (const [i, got] of [q, kk, v].entries()) {
            assert.deepEqual(got.shape, [rows, ws[i]!.shape[0]]);
            assert.equal(got.dtype, dtype);
            const alone = kiln.nn.functional.linear(x, ws[i]!).to('float32').toFlatArray();
            const mine = got.to('float32').toFlatArray();
            assert.deepEqual(mine, alone, `${what} output ${i}: the bits of a linear alone`);
            const want = reference(x, ws[i]!);
            const tol = dtype === 'float32' ? 1e-4 : 2 ** -7;
            for (let j = 0; j < want.length; j++) assert.ok(Math.abs(mine[j]! - want[j]!) <= tol * (1 + Math.abs(want[j]!)), `${what} output ${i}[${j}]: ${mine[j]} vs ${want[j]}`);
          }
        }
      }
    }
  } finally {
    setOption('KILN_CPU_GEMV_STREAM', undefined);
    setNativeThreads(undefined);
    setCpuPath(undefined);
  }
});

test('llm.qkvLinear: argument errors name the op, the argument and the shapes', () => {
  const x = kiln.ones([2, 8]);
  assert.throws(() => kiln.llm.qkvLinear(x, kiln.ones([4, 8]), kiln.ones([2, 7]), kiln.ones([2, 8])), /llm\.qkvLinear: argument 'kWeight' must be \[N, 8\] \(K = the last dim of 'input'\), got .*\[2, 7\]/);
  assert.throws(() => kiln.llm.qkvLinear(x, kiln.ones([4, 8]), kiln.ones([2, 8]), kiln.ones([2, 8], { dtype: 'float64' })), /llm\.qkvLinear: .*vWeight/);
  assert.throws(() => kiln.llm.qkvLinear(kiln.ones([]), kiln.ones([4, 8]), kiln.ones([2, 8]), kiln.ones([2, 8])), /llm\.qkvLinear: argument 'input' must have at least 1 dim/);
});

test("Qwen3's eager cpu decode: KILN_DECODE_QKV on and off give the same greedy tokens (bfloat16, tiny config), with two GEMV calls a layer fewer", { skip }, () => {
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_TINY, { seed: 3, dtype: 'bfloat16', device: 'cpu' });
  model.eval();
  const run = (on: boolean): number[][] => {
    // The native path (the suite also runs with KILN_CPU_PATH=wasm / js, where no GEMV runs).
    setCpuPath('native');
    setOption('KILN_DECODE_QKV', on);
    // The eager graph's ops (batch-1 steps would otherwise run the cpu's whole-step decoder).
    setOption('KILN_DECODE_MEGAKERNEL', false);
    try {
      const engine = new kiln.serve.Engine(model, { numBlocks: 16, maxNumSeqs: 1, decode: 'eager', prefixCaching: false });
      engine.addRequest([5, 9, 2, 7], { maxNewTokens: 6, ignoreEos: true });
      const ids: number[][] = [];
      for (let s = 0; s < 7; s++) for (const o of engine.step()) ids.push([...o.outputIds]);
      engine.dispose();
      return ids;
    } finally {
      setOption('KILN_DECODE_QKV', undefined);
      setOption('KILN_DECODE_MEGAKERNEL', undefined);
      setCpuPath(undefined);
    }
  };
  let before = nativeGemvCalls();
  const on = run(true);
  const callsOn = nativeGemvCalls() - before;
  before = nativeGemvCalls();
  const off = run(false);
  const callsOff = nativeGemvCalls() - before;
  assert.deepEqual(on, off, 'the same greedy tokens step by step');
  assert.equal(on.at(-1)!.length, 6, 'six tokens generated');
  // Decode steps (5 of them; the prompt's step is not a GEMV step) save two calls per layer.
  const layers = kiln.models.QWEN3_TINY.numHiddenLayers;
  assert.equal(callsOff - callsOn, 5 * 2 * layers, `GEMV calls with / without: ${callsOn} / ${callsOff}`);
});
