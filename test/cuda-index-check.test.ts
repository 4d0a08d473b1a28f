/**
 * Device-side index checks of the cuda gathers (embedding, indexSelect, gather;
 * runtime/cuda/device-errors.ts): the ops enqueue without reading indices on the host, a bad
 * index raises a RangeError naming the op, the index and the valid size at the next read-back or
 * kiln.synchronize (eager, compiled, and fed to a captured CUDA graph), the device stays usable
 * after it, and a Qwen3 forward (entry: an embedding) is captured as one whole-call CUDA graph
 * whose replays equal eager. Also: a call whose capture fails at an op not known to synchronise
 * is split into captured pieces around that op (piecewise.ts, learned from the failed capture).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import type { CompiledProgram } from '../src/compile/backend.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import { dispatch } from '../src/ops/dispatch.js';
import { defineOp, registerKernel } from '../src/ops/registry.js';
import type { OutMeta } from '../src/ops/schema.js';
import type { TensorMeta } from '../src/tensor/tensor.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
const ids = (v: number[], shape = [v.length]): Tensor => kiln.tensor(v, { dtype: 'int64' }).view(shape).to('cuda');

function graphProgram(cf: { programs(): { inference: readonly CompiledProgram[] } }): CudaGraphProgram {
  const p = cf.programs().inference.find((q) => q instanceof CudaGraphProgram);
  assert.ok(p instanceof CudaGraphProgram, 'expected the kiln backend cuda program');
  return p;
}

/** The float64 rows of `w` (cpu) at `idx`, zeros where an index is out of range. */
function refRows(w: Tensor, idx: readonly number[]): number[] {
  const [n, d] = w.shape as [number, number];
  const wv = w.toFlatArray();
  return idx.flatMap((i) => (i >= 0 && i < n ? wv.slice(i * d, (i + 1) * d) : new Array<number>(d).fill(0)));
}

test('cuda gathers: good indices give the rows; out-of-range and negative ones raise at the read-back with op, index and size', { skip }, () => {
  const wc = kiln.randn([6, 4]);
  const w = wc.to('cuda');
  assert.deepEqual(kiln.embedding(ids([5, 0, 2]), w).toFlatArray(), refRows(wc, [5, 0, 2]));
  // Out of range: the op returns (nothing waited for the device); reading the result raises.
  const bad = kiln.embedding(ids([1, 6, 2]), w);
  assert.throws(() => bad.toFlatArray(), /embedding: index 6 is out of range for 'weight' rows of size 6 .*device-side/);
  // The device is usable afterwards and the error was cleared: the next read-back is clean.
  assert.deepEqual(kiln.embedding(ids([3]), w).toFlatArray(), refRows(wc, [3]));
  // The bad row was written as zeros, the others gathered (readable once the error was raised).
  assert.deepEqual(bad.toFlatArray(), refRows(wc, [1, 6, 2]));
  const neg = kiln.embedding(ids([-1]), w);
  assert.throws(() => kiln.synchronize('cuda'), /embedding: index -1 is out of range for 'weight' rows of size 6/);
  neg.dispose();
  // indexSelect along dim 1 and gather along dim 0, with int32 indices too.
  assert.throws(() => kiln.indexSelect(w, 1, kiln.tensor([0, 4], { dtype: 'int32' }).to('cuda')).toFlatArray(), /indexSelect: index 4 is out of range for dim 1 of size 4/);
  assert.throws(() => kiln.gather(w, 0, ids([0, -3, 1, 2], [1, 4])).toFlatArray(), /gather: index -3 is out of range for dim 0 of 'self' \[6, 4\] of size 6/);
  assert.deepEqual(kiln.gather(w, 0, ids([5, 4, 1, 2], [1, 4])).toFlatArray(), kiln.gather(wc, 0, kiln.tensor([[5, 4, 1, 2]], { dtype: 'int64' })).toFlatArray());
  // Only the first error is kept: two bad launches raise once, for the first.
  kiln.embedding(ids([7]), w);
  kiln.embedding(ids([9]), w);
  assert.throws(() => kiln.synchronize('cuda'), /index 7 is out of range/);
  kiln.synchronize('cuda');
});

test('cuda gathers: compiled (kernel by kernel, and replayed as a CUDA graph) raise the same error for bad indices', { skip }, () => {
  const w = kiln.randn([10, 8]).to('cuda');
  const fn = (x: Tensor): Tensor => kiln.embedding(x, w).mul(2).sum(-1);
  const eager = (x: Tensor): number[] => kiln.noGrad(() => fn(x)).toFlatArray();
  const prev = process.env.KILN_CUDA_GRAPHS;
  process.env.KILN_CUDA_GRAPHS = '0';
  let plain;
  try {
    plain = kiln.compile(fn);
  } finally {
    if (prev === undefined) delete process.env.KILN_CUDA_GRAPHS;
    else process.env.KILN_CUDA_GRAPHS = prev;
  }
  const good = ids([1, 9, 3]);
  assert.deepEqual(kiln.noGrad(() => plain(good)).toFlatArray(), eager(good));
  assert.throws(() => kiln.noGrad(() => plain(ids([1, 10, 3]))).toFlatArray(), /embedding: index 10 is out of range for 'weight' rows of size 10/);

  const cf = kiln.compile(fn, { mode: 'reduce-overhead' });
  const x = ids([4, 0, 2]);
  assert.deepEqual(kiln.noGrad(() => cf(x)).toFlatArray(), eager(x));
  const p = graphProgram(cf);
  assert.equal(p.stats.disabled, null, `the call with an embedding is captured: ${p.stats.disabled}`);
  assert.equal(p.stats.captures, 1);
  assert.equal(p.piecewise(), null, 'captured whole, not in pieces');
  // Bad ids written into the captured buffer in place, and bad ids at another address (copied in).
  x.copy_(kiln.tensor([4, 12, 2], { dtype: 'int64' }));
  assert.throws(() => kiln.noGrad(() => cf(x)).toFlatArray(), /embedding: index 12 is out of range for 'weight' rows of size 10/);
  assert.throws(() => kiln.noGrad(() => cf(ids([-2, 1, 1]))).toFlatArray(), /embedding: index -2 is out of range/);
  // Recovered: good ids replay correctly afterwards, on the same graph.
  const again = ids([9, 8, 7]);
  assert.deepEqual(kiln.noGrad(() => cf(again)).toFlatArray(), eager(again));
  assert.equal(p.stats.captures, 2, 'one graph in place, one copying its argument');
  assert.ok(p.stats.replays >= 4, `replays ${p.stats.replays}`);
});

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')));

test('Qwen3 tiny on cuda: the compiled forward is captured as one CUDA graph, replays equal eager', { skip: skip || (fixtures ? false : 'no qwen3-tiny fixture') }, () => {
  const m = kiln.models.Qwen3ForCausalLM.fromPretrained(path.join(fixtures!, 'qwen3-tiny'), { device: 'cuda' });
  const ref = JSON.parse(fs.readFileSync(path.join(fixtures!, 'qwen3-tiny', 'reference.json'), 'utf8')) as { input_ids: number[][] };
  const x = kiln.tensor(ref.input_ids, { dtype: 'int64' }).to('cuda');
  const want = kiln.noGrad(() => m.forward(x)).toFlatArray();
  const cf = kiln.compile(m, { mode: 'reduce-overhead' });
  for (let i = 0; i < 3; i++) {
    const got = kiln.noGrad(() => cf(x)).toFlatArray();
    let max = 0;
    for (let k = 0; k < got.length; k++) max = Math.max(max, Math.abs(got[k]! - want[k]!));
    assert.ok(max <= 1e-4, `call ${i}: max |compiled - eager| ${max}`);
  }
  const p = graphProgram(cf);
  assert.equal(p.stats.disabled, null, `whole-call capture failed: ${p.stats.disabled}`);
  assert.equal(p.piecewise(), null);
  assert.equal(p.stats.captures, 1);
  assert.equal(p.stats.replays, 3);
  assert.equal(p.stats.allocationsInCapture, 0);
  // A bad token id fed to the captured graph: the clear error, then the model works again.
  const vocab = m.config.vocabSize;
  const bad = kiln.tensor(ref.input_ids.map((r) => r.map((v, j) => (j === 0 ? vocab : v))), { dtype: 'int64' }).to('cuda');
  assert.throws(() => kiln.noGrad(() => cf(bad)).toFlatArray(), new RegExp(`embedding: index ${vocab} is out of range for 'weight' rows of size ${vocab}`));
  const after = kiln.noGrad(() => cf(x)).toFlatArray();
  assert.ok(after.every((v, k) => Math.abs(v - want[k]!) <= 1e-4));
});

// A test op whose cuda kernel reads its input on the host (a synchronisation no graph can hold),
// and that no list of host-synchronising ops knows.
const hostSync = defineOp({
  name: 'test.hostSyncIndexCheck',
  args: [{ name: 'input', type: 'Tensor' }],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta: (input: TensorMeta): OutMeta => ({ shape: input.shape, strides: input.strides, dtype: input.dtype, device: input.device }),
});
registerKernel(hostSync, 'cuda', (_ctx, input) => kiln.add(input, input.toFlatArray().length));

test('a whole-call capture that fails at an op not known to synchronise: pieces around that op, values equal eager', { skip }, () => {
  const fn = (x: Tensor): Tensor => kiln.add(dispatch(hostSync, kiln.relu(x).mul(2)) as Tensor, 1).sum(-1);
  const x = kiln.randn([4, 8]).to('cuda');
  const want = fn(x).toFlatArray();
  const cf = kiln.compile(fn, { mode: 'reduce-overhead' });
  for (let i = 0; i < 2; i++) {
    const got = kiln.noGrad(() => cf(x)).toFlatArray();
    got.forEach((v, k) => assert.ok(Math.abs(v - want[k]!) <= 1e-5, `call ${i}: ${v} vs ${want[k]}`));
  }
  const p = graphProgram(cf);
  assert.match(p.stats.disabled ?? '', /at test\.hostSyncIndexCheck/);
  const pw = p.piecewise();
  assert.ok(pw, 'split into pieces');
  assert.match(pw.describe(), /eager test\.hostSyncIndexCheck/);
  const pieces = (pw as unknown as { graphPieces(): CudaGraphProgram[] }).graphPieces();
  assert.equal(pieces.length, 2, 'a captured piece before and after the op');
  for (const g of pieces) assert.ok(g.stats.captures === 1 && g.stats.replays === 2, `piece: ${JSON.stringify(g.stats)}`);
});
