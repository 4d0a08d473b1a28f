/**
 * Cooperative launches (runtime/cuda/launch.ts, LaunchDims.cooperative), the form the decode
 * megakernel's grid barriers need. On cuda (skipped without a device): a kernel whose blocks wait
 * for each other at a grid barrier, with parameters of every packed type at mixed alignments (they
 * travel as kernelParams pointers into the packed block, not as `extra`), computes what each block
 * can only know from another block's write, at the largest co-resident grid; a cooperative launch
 * larger than the device can hold at once fails with an error that says so instead of hanging.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch, launchStats } from '../src/runtime/cuda/launch.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { ptrOf, streamOf } from '../src/kernels/cuda/device.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

// Block b writes b * scale + offset, waits for every block at the barrier (thread 0 counts and
// polls with acquire loads), then reads block (b + 1) % G's value. The 2^40 in `offset` checks the
// i64's high word; `n` (i32) sits between the pointers and the i64 so their offsets need padding.
const SOURCE = `
extern "C" __global__ void __launch_bounds__(1024) kiln_test_coop(float* mine, int n, long long offset, float scale, unsigned int* bar, double* out) {
  const int b = blockIdx.x, G = gridDim.x;
  if (threadIdx.x == 0) {
    mine[b] = (float)b * scale;
    __threadfence();
    atomicAdd(bar, 1u);
    unsigned int v = 0;
    do { asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory"); } while (v < (unsigned int)G);
    const int next = (b + 1) % G;
    out[b] = (double)__ldcg(mine + next) + (double)offset + (double)n;
  }
}`;
const PARAMS = ['ptr', 'i32', 'i64', 'f32', 'ptr', 'ptr'] as const;

test('a cooperative launch runs every block at once: a grid barrier at the largest co-resident grid, parameters of every width passed right [cuda]', { skip }, () => {
  const info = deviceInfo(0);
  // 1024-thread blocks: at most two per SM (2048 threads an SM on every architecture Kiln targets).
  const perSm = Math.floor(info.maxThreadsPerSM / 1024);
  const G = info.smCount * perSm;
  const kernel = kernelFromSource(0, SOURCE, 'kiln_test_coop', PARAMS);
  const mine = kiln.zeros([G], { dtype: 'float32' }).to('cuda');
  const bar = kiln.zeros([1], { dtype: 'int32' }).to('cuda');
  const out = kiln.zeros([G], { dtype: 'float64' }).to('cuda');
  const offset = 2 ** 40 + 3;
  const before = launchStats.cooperative;
  launch(kernel, [ptrOf(mine), 7, offset, 0.5, ptrOf(bar), ptrOf(out)], { grid: G, block: 1024, cooperative: true }, streamOf(out));
  assert.equal(launchStats.cooperative, before + 1, 'the launch took the cooperative path');
  const got = out.toFlatArray() as number[];
  const want = Array.from({ length: G }, (_, b) => ((b + 1) % G) * 0.5 + offset + 7);
  assert.deepEqual(got, want);
  for (const t of [mine, bar, out]) t.dispose();
});

test('a cooperative launch larger than the device holds at once fails with an error that says so [cuda]', { skip }, () => {
  const info = deviceInfo(0);
  const G = info.smCount * Math.floor(info.maxThreadsPerSM / 1024) + 1;
  const kernel = kernelFromSource(0, SOURCE, 'kiln_test_coop', PARAMS);
  const mine = kiln.zeros([G], { dtype: 'float32' }).to('cuda');
  const bar = kiln.zeros([1], { dtype: 'int32' }).to('cuda');
  const out = kiln.zeros([G], { dtype: 'float64' }).to('cuda');
  assert.throws(
    () => launch(kernel, [ptrOf(mine), 1, 0, 1, ptrOf(bar), ptrOf(out)], { grid: G, block: 1024, cooperative: true }, streamOf(out)),
    /kiln_test_coop.*cooperative.*cannot all be resident at once.*COOPERATIVE_LAUNCH_TOO_LARGE/s,
  );
  // The context is still usable: nothing ran.
  assert.deepEqual(bar.toFlatArray(), [0]);
  for (const t of [mine, bar, out]) t.dispose();
});
