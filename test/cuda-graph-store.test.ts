/**
 * On a cuda device: the stored first-call facts of CUDA graph programs (decision-store.ts) and the
 * graph program's repeated-call path. A second kiln.compile of the same function builds a new
 * program with the same cache key, as a new process would: it must reuse the stored whole-call
 * capture failure (going straight to pieces) and the stored graph-or-plain decision, and its
 * results must equal eager's. Each test uses its own KILN_CACHE_DIR.
 * Every test skips with the reason where no CUDA device can be used.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import { PiecewiseGraphProgram } from '../src/compile/cuda-graphs/piecewise.js';
import { getDiskCache } from '../src/runtime/cache/disk-cache.js';
import type { CompiledProgram } from '../src/compile/backend.js';
import { skipUnlessCuda } from './cuda-util.js';
import { withCacheDir as withCacheDirAt } from './helpers/cache-dir.js';

const skip = skipUnlessCuda();
const randn = (shape: number[], seed: number): Tensor => kiln.randn(shape, { generator: new kiln.Generator(seed) }).to('cuda');

function assertClose(label: string, got: Tensor, want: Tensor): void {
  assert.deepEqual([...got.shape], [...want.shape], `${label}: shape`);
  const g = got.toFlatArray();
  const w = want.toFlatArray();
  for (let i = 0; i < w.length; i++) if (!(Math.abs(g[i]! - w[i]!) <= 1e-4 + 1e-4 * Math.abs(w[i]!))) assert.fail(`${label}: element ${i}: compiled ${g[i]}, eager ${w[i]}`);
}

function graphProgram(cf: { programs(): { inference: readonly CompiledProgram[] } }): CudaGraphProgram {
  const p = cf.programs().inference.find((q) => q instanceof CudaGraphProgram);
  assert.ok(p instanceof CudaGraphProgram);
  return p;
}

const withCacheDir = (f: () => void): void => withCacheDirAt(f, 'kiln-graph-store-');

test('a stored whole-call capture failure sends a new program straight to its pieces', { skip }, () => {
  withCacheDir(() => {
    const src = randn([3, 32], 1);
    // The cuda scatterAdd kernel range-checks its indices on the host first: a host sync.
    const fn = (ids: Tensor, x: Tensor): Tensor => kiln.scatterAdd(x, 0, ids, src).add(x).mul(2);
    const idsOf = (shift: number): Tensor => kiln.tensor(Array.from({ length: 3 }, (_, r) => Array.from({ length: 32 }, (_, c) => (r * 7 + c + shift) % 6)), { dtype: 'int64' }).to('cuda');
    const ids = idsOf(1);
    const x = randn([6, 32], 2);
    const first = kiln.compile(fn);
    assertClose('first process', kiln.noGrad(() => first(ids, x)) as Tensor, fn(ids, x));
    const p1 = graphProgram(first);
    assert.ok(p1.piecewise() instanceof PiecewiseGraphProgram);
    assert.doesNotMatch(p1.stats.disabled!, /stored/, 'the first program found out by capturing');
    getDiskCache().clearMemory(); // as a new process: only the disk
    const second = kiln.compile(fn);
    for (let i = 0; i < 3; i++) assertClose(`second process, call ${i}`, kiln.noGrad(() => second(ids, x)) as Tensor, fn(ids, x));
    const p2 = graphProgram(second);
    assert.match(p2.stats.disabled!, /stored by an earlier process/);
    assert.equal(p2.stats.captures, 0, 'no whole-call graph');
    assert.ok(p2.piecewise() instanceof PiecewiseGraphProgram, 'the call runs in pieces');
    const ids2 = idsOf(5);
    assertClose('second process, new inputs', kiln.noGrad(() => second(ids2, x)) as Tensor, fn(ids2, x));
  });
});

test('a stored graph-or-plain decision is reused; repeated in-place calls replay through the last-call path', { skip }, () => {
  withCacheDir(() => {
    // Many small kernels on a small tensor: host-bound when launched one by one, a clear win for the graph.
    const fn = (x: Tensor): Tensor => {
      let y = x;
      for (let i = 0; i < 12; i++) y = kiln.softmax(y.mul(1.01), -1).add(x);
      return y;
    };
    const x = randn([8, 64], 3);
    const first = kiln.compile(fn);
    assertClose('first', kiln.noGrad(() => first(x)) as Tensor, fn(x));
    const p1 = graphProgram(first);
    const d1 = p1.stats.lastDecision;
    assert.ok(d1, 'mode default measured');
    assert.equal(p1.stats.decisionsLoaded, 0);
    getDiskCache().clearMemory();
    const second = kiln.compile(fn);
    assertClose('second', kiln.noGrad(() => second(x)) as Tensor, fn(x));
    const p2 = graphProgram(second);
    const clear = Math.max(d1.plainMs, d1.graphMs) >= 1.5 * Math.min(d1.plainMs, d1.graphMs);
    assert.equal(p2.stats.decisionsLoaded, clear ? 1 : 0, `decision ${JSON.stringify(d1)}: stored only when clear`);
    if (clear) assert.deepEqual(p2.stats.lastDecision, d1);
    // Repeated calls on the same buffers: results stay equal to eager, and (graph chosen) replays count up.
    const replays = p2.stats.replays;
    const outs: Tensor[] = [];
    for (let i = 0; i < 4; i++) outs.push(kiln.noGrad(() => second(x)) as Tensor);
    const want = fn(x);
    outs.forEach((o, i) => assertClose(`repeated call ${i} (results kept alive across replays)`, o, want));
    if (p2.stats.lastDecision!.graphMs < p2.stats.lastDecision!.plainMs) assert.equal(p2.stats.replays, replays + 4);
    // A different tensor (another address) of the same signature still gives the right answer.
    const x2 = randn([8, 64], 4);
    assertClose('another buffer', kiln.noGrad(() => second(x2)) as Tensor, fn(x2));
    assertClose('back to the first buffer', kiln.noGrad(() => second(x)) as Tensor, want);
  });
});
