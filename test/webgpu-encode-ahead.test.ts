/**
 * Encoding a recording's next replay ahead (KILN_WEBGPU_ENCODE_AHEAD, runtime/webgpu/worker.ts,
 * issue #20): after a replay the device thread encodes the next one in idle slices, and the next
 * replay submits those command buffers. The commands are encoded before the replay's inputs are
 * written, so these tests check that every replay still computes from the values its inputs hold
 * when it is issued (float64 CPU references, per call), that the ahead path really ran (the device
 * thread's aheadDispatches counter grows), that encoding ahead on and off give the same values, in
 * chunks of a few dispatches (KILN_WEBGPU_REPLAY_SUBMIT) and in one, and that a recording whose
 * buffers are freed after its next replay was encoded ahead is recorded again and stays right.
 * Needs a real adapter (SwiftShader in CI); skips on Dawn's null backend.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { setOption } from '../src/runtime/config.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

const close = (got: readonly number[], want: readonly number[], label: string): void => {
  assert.equal(got.length, want.length, label);
  got.forEach((g, i) => assert.ok(Math.abs(g - want[i]!) <= 1e-4 * (1 + Math.abs(want[i]!)), `${label}: element ${i}: ${g}, want ${want[i]}`));
};

/** A few dependent dispatches: linear, add, relu, a row softmax, their product's row sum. */
const fn = (a: Tensor, b: Tensor): Tensor => {
  const y = kiln.nn.functional.linear(a, b);
  return kiln.relu(kiln.add(y, 0.25)).mul(kiln.softmax(y, -1)).sum(-1);
};

/** Waits for the device thread's idle turns (encoding ahead runs there). */
const idle = (): Promise<void> => new Promise((r) => setTimeout(r, 20));

async function run(ahead: boolean, submitEvery: number, seed: number): Promise<{ values: number[][]; aheadDispatches: number }> {
  const acc = kiln.getAccelerator('webgpu') as unknown as WebgpuAccelerator;
  setOption('KILN_WEBGPU_ENCODE_AHEAD', ahead);
  setOption('KILN_WEBGPU_REPLAY_SUBMIT', submitEvery);
  try {
    kiln.manualSeed(seed);
    const wHost = kiln.randn([7, 5]);
    const w = wHost.to('webgpu');
    const x = kiln.zeros([3, 5]).to('webgpu');
    const cf = kiln.compile(fn, { mode: 'reduce-overhead' });
    const before = acc.deviceThreadStats().aheadDispatches ?? 0;
    const values: number[][] = [];
    for (let call = 0; call < 7; call++) {
      const xHost = kiln.randn([3, 5]);
      // The input is written after the previous replay, i.e. after this call's commands may have
      // been encoded ahead: the replay must still read it.
      kiln.copy_(x, xHost.to('webgpu'));
      const ref = fn(xHost.to('float64'), wHost.to('float64')).toFlatArray() as number[];
      const got = cf(x, w).toFlatArray() as number[];
      close(got, ref, `ahead ${ahead}, submit every ${submitEvery}, call ${call}`);
      values.push(got);
      await idle();
    }
    return { values, aheadDispatches: (acc.deviceThreadStats().aheadDispatches ?? 0) - before };
  } finally {
    setOption('KILN_WEBGPU_ENCODE_AHEAD', undefined);
    setOption('KILN_WEBGPU_REPLAY_SUBMIT', undefined);
  }
}

test('webgpu encoding ahead: every replay reads its inputs as written before it; on and off give the same values', { skip }, async () => {
  for (const submitEvery of [0, 2]) {
    const on = await run(true, submitEvery, 11);
    const off = await run(false, submitEvery, 11);
    assert.ok(on.aheadDispatches > 0, `submit every ${submitEvery}: the replays used commands encoded ahead (aheadDispatches ${on.aheadDispatches})`);
    assert.equal(off.aheadDispatches, 0, 'with the option off nothing is encoded ahead');
    assert.deepEqual(on.values, off.values, `submit every ${submitEvery}: the same values with and without encoding ahead`);
  }
});

test('webgpu encoding ahead: a recording whose input buffer is freed after its next replay was encoded ahead records again and stays right', { skip }, async () => {
  setOption('KILN_WEBGPU_ENCODE_AHEAD', true);
  try {
    kiln.manualSeed(5);
    const wHost = kiln.randn([7, 5]);
    const w = wHost.to('webgpu');
    const cf = kiln.compile(fn, { mode: 'reduce-overhead' });
    for (let round = 0; round < 3; round++) {
      // A fresh input buffer each round: the previous one is freed once its replay was encoded
      // ahead, which drops those commands (they name a destroyed buffer) and records again.
      const x = kiln.zeros([3, 5]).to('webgpu');
      for (let call = 0; call < 4; call++) {
        const xHost = kiln.randn([3, 5]);
        kiln.copy_(x, xHost.to('webgpu'));
        const ref = fn(xHost.to('float64'), wHost.to('float64')).toFlatArray() as number[];
        close(cf(x, w).toFlatArray() as number[], ref, `round ${round}, call ${call}`);
        await idle();
      }
      x.dispose();
      kiln.emptyCache('webgpu');
      await idle();
    }
    kiln.synchronize('webgpu');
  } finally {
    setOption('KILN_WEBGPU_ENCODE_AHEAD', undefined);
  }
});
