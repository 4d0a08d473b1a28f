/**
 * Programmatic dependent launch (src/runtime/cuda/pdl.ts, launch.ts). Without a GPU: where the
 * prologue is inserted and when a kernel counts as having it. On cuda (skipped without a device):
 * a launch of a kernel without the prologue never gets the attribute; eager chains and a compiled
 * chain replayed as a CUDA graph give the same bits with PDL on and off, and the compiled chain
 * equals eager bit for bit (integer-valued float32 data, so every order of evaluation is exact and
 * any kernel that ran before its producer finished would show as wrong values).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { cubinFor, kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launchesWithPdl, launchStats, loadKernel } from '../src/runtime/cuda/launch.js';
import { hasPdlPrologue, insertPdlPrologue, pdlEnabled, setPdlEnabled, setPdlPolicy } from '../src/runtime/cuda/pdl.js';
import { DRAW_KERNELS, uniformDrawSource } from '../src/kernels/cuda/random-draw.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

const TWO = `
extern "C" __global__ void __launch_bounds__(256) first(float* __restrict__ y, const float* x, int n) {
  int i = blockIdx.x * 256 + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.f;
}
__device__ float helper(float v);
extern "C" __global__ void second(float* y, int n)
{
  if (threadIdx.x < n) y[threadIdx.x] *= 2.f;
}`;

test('insertPdlPrologue: the wait opens every kernel body, declarations are left alone, idempotent', () => {
  const out = insertPdlPrologue(TWO);
  assert.equal(out.split('griddepcontrol.wait').length - 1, 2, 'one wait per kernel definition');
  assert.equal(out.split('launch_dependents').length - 1, 0, 'no early trigger by default');
  assert.ok(hasPdlPrologue(out, 'first'));
  assert.ok(hasPdlPrologue(out, 'second'));
  // The helper's declaration (a ';' before any '{') and the rest of the text are untouched.
  assert.equal(out.replace(/\n {2}\/\/ kiln-pdl:[^]*?#endif\n/g, ''), TWO);
  assert.equal(insertPdlPrologue(out), out, 'a second insertion changes nothing');
  const early = insertPdlPrologue(TWO, 132);
  assert.equal(early.split('launch_dependents').length - 1, 2, 'early trigger for small grids in both kernels');
  assert.ok(early.indexOf('<= 132ull') < early.indexOf('griddepcontrol.wait'), 'the trigger comes before the wait');
});

test('hasPdlPrologue: only a body that starts with the prologue counts', () => {
  assert.equal(hasPdlPrologue(TWO, 'first'), false, 'no prologue');
  const withFirst = insertPdlPrologue(TWO.slice(0, TWO.indexOf('__device__')));
  const mixed = withFirst + TWO.slice(TWO.indexOf('__device__'));
  assert.equal(hasPdlPrologue(mixed, 'first'), true);
  assert.equal(hasPdlPrologue(mixed, 'second'), false, 'the other kernel of the source has no prologue');
  assert.equal(hasPdlPrologue(mixed, 'third'), false, 'no such kernel');
  const late = TWO.replace('int i = blockIdx.x', '  float unused = 0.f; // kiln-pdl: not first\n  int i = blockIdx.x');
  assert.equal(hasPdlPrologue(late, 'first'), false, 'a statement before the marker');
});

test('cuda: a kernel without the prologue is never launched with the PDL attribute', { skip }, () => {
  setPdlEnabled(true);
  try {
    const arch = deviceInfo(0).arch;
    const plain = loadKernel(0, cubinFor({ source: TWO, name: 'first', arch }), 'first', ['ptr', 'ptr', 'i32']);
    assert.equal(launchesWithPdl(plain), false, 'loaded from a source without the prologue');
    const viaCache = kernelFromSource(0, TWO, 'second', ['ptr', 'i32']);
    const sm90 = Number(deviceInfo(0).computeCapability.split('.')[0]) >= 9;
    assert.equal(launchesWithPdl(viaCache), sm90, 'kernelFromSource inserts the prologue (sm_90 and newer)');
    setPdlEnabled(false);
    assert.equal(launchesWithPdl(viaCache), false, 'PDL off: no attribute even for a prologue kernel');
    const off = kernelFromSource(0, TWO.replace('2.f', '3.f'), 'second', ['ptr', 'i32']);
    assert.equal(off.pdl, false, 'PDL off: kernelFromSource leaves the source alone');
  } finally {
    setPdlEnabled(undefined);
  }
});

/** Integer-valued float32 data in [-8, 8]: sums, products by small integers and maxima stay exact. */
function ints(shape: number[], seed: number): Tensor {
  const g = new kiln.Generator(seed);
  return kiln.randint(-8, 9, shape, { generator: g }).to('float32').to('cuda');
}

/** A chain of dependent kernels: pointwise steps, row reductions broadcast back, a transpose copy. */
function chain(x: Tensor, w: Tensor): Tensor {
  let h = x;
  for (let i = 0; i < 6; i++) {
    h = kiln.relu(h.mul(2).sub(3)).add(w);
    h = h.sub(h.amax(-1, true)).add(h.sum(-1, true).mul(0.0));
    h = h.transpose(0, 1).contiguous().transpose(0, 1).add(1);
  }
  return h;
}

function bits(t: Tensor): Uint32Array {
  return new Uint32Array(Float32Array.from(t.toFlatArray() as number[]).buffer);
}

test('cuda: eager and compiled (CUDA graph) chains are bit-identical with PDL on and off, compiled equals eager', { skip }, () => {
  const x = ints([256, 512], 1);
  const w = ints([512], 2);
  const results: Record<string, Uint32Array> = {};
  try {
    for (const on of [true, false]) {
      setPdlEnabled(on);
      const before = launchStats.pdl;
      const eager = bits(chain(x, w));
      const compiled = kiln.compile(chain, { mode: 'reduce-overhead' });
      compiled(x, w); // captures
      const replay = bits(compiled(x, w) as Tensor);
      results[`eager pdl=${on}`] = eager;
      results[`compiled pdl=${on}`] = replay;
      if (on && pdlEnabled(0)) assert.ok(launchStats.pdl > before, 'PDL on (sm_90): some launches carried the attribute');
      if (!on) assert.equal(launchStats.pdl, before, 'PDL off: no launch carried the attribute');
    }
  } finally {
    setPdlEnabled(undefined);
  }
  const ref = results['eager pdl=false']!;
  for (const [k, v] of Object.entries(results)) {
    const bad = v.findIndex((b, i) => b !== ref[i]);
    assert.equal(bad, -1, `${k}: element ${bad} differs from eager without PDL`);
  }
});

test('cuda: a PDL kernel after a device-to-device copy (not a kernel) still waits for the copy', { skip }, () => {
  setPdlEnabled(true);
  // 'all': the attribute even after a copy (the default policy would launch c normally).
  setPdlPolicy('all');
  try {
    const acc = kiln.getAccelerator('cuda');
    // 64 MiB: the copy takes ~30 us, long enough that a kernel starting early would read stale data.
    const n = 16 << 20;
    const x = ints([n], 3);
    const before = launchStats.pdl;
    for (let rep = 0; rep < 3; rep++) {
      const a = x.mul(2); // a kernel
      const b = kiln.zeros([n], { device: 'cuda' });
      acc.copyDeviceToDevice(b.storage.buffer, 0, a.storage.buffer, 0, n * 4); // a copy, then
      const c = b.add(1); // a PDL kernel reading what the copy wrote
      const got = c.toFlatArray() as number[];
      const want = x.toFlatArray() as number[];
      const bad = got.findIndex((v, i) => v !== 2 * want[i]! + 1);
      assert.equal(bad, -1, `rep ${rep}: element ${bad} is ${got[bad]}, want ${2 * want[bad]! + 1}`);
    }
    if (pdlEnabled(0)) assert.ok(launchStats.pdl > before, 'the kernels were launched with the attribute');
  } finally {
    setPdlEnabled(undefined);
    setPdlPolicy(undefined);
  }
});

test('cuda: by default only a launch that follows a kernel gets the attribute', { skip }, () => {
  setPdlEnabled(true);
  try {
    if (!pdlEnabled(0)) return; // below sm_90 nothing gets it
    const x = ints([1024], 4);
    kiln.synchronize('cuda');
    const y = x.mul(2); // follows the host-to-device copy of x: an ordinary launch
    const before = { ...launchStats };
    y.add(1); // follows a kernel: PDL
    assert.equal(launchStats.pdl - before.pdl, 1, 'the second kernel carries the attribute');
    const acc = kiln.getAccelerator('cuda');
    acc.copyDeviceToDevice(y.storage.buffer, 0, x.storage.buffer, 0, 4);
    const mid = { ...launchStats };
    y.add(1); // follows a copy: ordinary
    assert.equal(launchStats.pdl - mid.pdl, 0, 'after a copy: no attribute');
    assert.equal(launchStats.plain - mid.plain, 1);
  } finally {
    setPdlEnabled(undefined);
  }
});

test('insertPdlPrologue: a kernel defined inside a macro is left without the prologue (and never launched early)', () => {
  // random-draw.ts defines its per-dtype kernels in a macro; the prologue's #if lines inside the
  // macro body broke its compile on the H200 ("expected a declaration").
  const src = uniformDrawSource();
  const out = insertPdlPrologue(src, 132);
  assert.equal(out, src, 'no prologue inserted into the macro-defined kernels');
  for (const name of Object.values(DRAW_KERNELS)) assert.equal(hasPdlPrologue(out, name), false, `${name} gets no PDL attribute`);
  // A plain kernel next to a macro one still gets its prologue.
  const mixed = `#define K(NAME) extern "C" __global__ void NAME(float* y) { \\\n  y[0] = 1.f; \\\n}\nK(a)\n${TWO}`;
  const both = insertPdlPrologue(mixed);
  assert.equal(both.split('griddepcontrol.wait').length - 1, 2, 'the two plain kernels only');
  assert.ok(hasPdlPrologue(both, 'first') && !hasPdlPrologue(both, 'a'));
});
