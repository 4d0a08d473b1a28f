/**
 * KILN_CPU_WEIGHT_PREFETCH_MB (kernels/cpu/native/pool-c.ts, pf_*): pool workers waiting between
 * jobs prefetch the weights that a repeating sequence of GEMVs will read next. What is checked
 * without timing: the sequence the GEMV entries note is learned weight by weight, the cycle closes
 * at the first repeat of its first weight (its byte length the sum of the weights' spans, each
 * weight's own span including a row stride wider than K), positions advance in order and wrap,
 * a weight out of order starts the learning again from it, the gated and qkv entries note every
 * weight they stream, lookahead 0 clears it, and the GEMVs' results are the same bits with the
 * prefetch on as off (it only issues prefetch instructions).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { probeToolchain, setCpuPath, setNativeThreads } from '../src/kernels/cpu/native/index.js';
import { weightPrefetchState } from '../src/kernels/cpu/native/gemv.js';
import { setOption } from '../src/runtime/config.js';
import { randomValues } from './helpers/make.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;

const bf16 = (n: number, k: number, seed: number): kiln.Tensor => kiln.tensor(randomValues(n * k, seed), { dtype: 'float32' }).reshape([n, k]).to('bfloat16');

test('weight prefetch: the GEMVs\' weight sequence is learned, closed at its first repeat, followed and relearned', { skip }, () => {
  const K = 256;
  const x = bf16(1, K, 1);
  const a = bf16(96, K, 2);
  const b = bf16(64, K, 3);
  // A row stride wider than K: the span is (n - 1) * ldw + K elements.
  const wide = bf16(40, 2 * K, 4).narrow(1, 0, K);
  const d = bf16(32, K, 5);
  const span = (t: kiln.Tensor): number => ((t.shape[0]! - 1) * t.strides[0]! + t.shape[1]!) * 2;
  setCpuPath('native');
  setNativeThreads(2);
  const lin = (w: kiln.Tensor): number[] => kiln.nn.functional.linear(x, w).to('float32').toFlatArray();
  try {
    setOption('KILN_CPU_WEIGHT_PREFETCH_MB', 0);
    const off = [a, b, wide, a, b].map(lin);
    assert.equal(weightPrefetchState().weights, 0, 'lookahead 0: nothing learned');
    setOption('KILN_CPU_WEIGHT_PREFETCH_MB', 8);
    const on = [a, b, wide].map(lin);
    let s = weightPrefetchState();
    assert.equal(s.lookahead, 8 * 2 ** 20);
    assert.deepEqual([s.weights, s.frozen], [3, false], 'three weights learned, cycle still open');
    on.push(lin(a));
    s = weightPrefetchState();
    const total = span(a) + span(b) + span(wide);
    assert.deepEqual([s.frozen, s.cycleBytes, s.pos, s.front], [true, total, 0, total + span(a)], 'the repeat of the first weight closes the cycle');
    on.push(lin(b));
    s = weightPrefetchState();
    assert.deepEqual([s.pos, s.front], [1, total + span(a) + span(b)]);
    assert.ok(s.next >= total + span(a), `prefetch position ${s.next} at or past the first unread weight`);
    assert.deepEqual(on, off, 'the same bits with the prefetch on');
    lin(wide);
    lin(a); // wraps into the third cycle
    s = weightPrefetchState();
    assert.deepEqual([s.pos, s.front], [0, 2 * total + span(a)]);
    lin(d); // out of order: learning starts again from d
    s = weightPrefetchState();
    assert.deepEqual([s.weights, s.frozen], [1, false]);
    // The gated pair notes gate then up; the qkv entry its three weights.
    kiln.llm.gateUpSiluAndMul(x, a, a.clone());
    assert.equal(weightPrefetchState().weights, 3, 'd, then gate and up');
    kiln.llm.qkvLinear(x, b, wide, bf16(16, K, 6));
    assert.equal(weightPrefetchState().weights, 6, 'then q, k and v');
    lin(d); // the repeat of d closes the cycle of six
    s = weightPrefetchState();
    assert.deepEqual([s.weights, s.frozen], [6, true]);
    setOption('KILN_CPU_WEIGHT_PREFETCH_MB', 0);
    lin(a);
    assert.deepEqual([weightPrefetchState().weights, weightPrefetchState().lookahead], [0, 0], 'turned off: cleared');
  } finally {
    setOption('KILN_CPU_WEIGHT_PREFETCH_MB', undefined);
    setNativeThreads(undefined);
    setCpuPath(undefined);
  }
});
