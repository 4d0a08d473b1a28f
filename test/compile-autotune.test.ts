import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import * as kiln from '../src/index.js';
import { autotune, autotuneCacheKey, cloneArgsForTuning, clonedTensors, AUTOTUNE_NAMESPACE } from '../src/compile/autotune/index.js';
import { DiskCache } from '../src/runtime/cache/index.js';

const tmpDirs: string[] = [];
function freshCache(): DiskCache {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-autotune-test-'));
  tmpDirs.push(d);
  return new DiskCache({ dir: d });
}
after(() => {
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

/** Spins for about `ms` milliseconds. */
function busy(ms: number): void {
  const end = performance.now() + ms;
  let x = 0;
  while (performance.now() < end) x++;
  if (x < 0) throw new Error('unreachable');
}

test('picks the faster of a busy loop and a trivial candidate, timing warmup + reps runs', () => {
  const calls = { slow: 0, fast: 0 };
  const r = autotune({
    key: 'busy-vs-trivial',
    device: 'cpu',
    cache: null,
    warmup: 1,
    reps: 3,
    candidates: [
      { config: { name: 'slow' }, run: () => (calls.slow++, busy(3)) },
      { config: { name: 'fast' }, run: () => void calls.fast++ },
    ],
  });
  assert.deepEqual(r.best, { name: 'fast' });
  assert.equal(r.bestIndex, 1);
  assert.equal(r.fromCache, false);
  assert.deepEqual(calls, { slow: 4, fast: 4 }, '1 warmup + 3 timed runs each');
  assert.equal(r.timings.length, 2);
  assert.ok(r.timings[0]!.ms >= 2.5, `the busy loop measures ~3 ms (got ${r.timings[0]!.ms})`);
  assert.ok(r.timings[1]!.ms < r.timings[0]!.ms);
  // and the other way round, so position is not what decides
  const r2 = autotune({
    key: 'busy-vs-trivial-2',
    device: 'cpu',
    cache: null,
    candidates: [
      { config: 'trivial', run: () => {} },
      { config: 'busy', run: () => busy(2) },
    ],
  });
  assert.equal(r2.best, 'trivial');
});

test('takes the minimum over reps', () => {
  let n = 0;
  // first timed run slow, the rest fast: the minimum must ignore the outlier
  const r = autotune({
    key: 'min-over-reps',
    device: 'cpu',
    cache: null,
    warmup: 0,
    reps: 4,
    candidates: [{ config: 'a', run: () => (n++ === 0 ? busy(5) : undefined) }],
  });
  assert.ok(r.timings[0]!.ms < 2, `min over reps ignores the slow first run (got ${r.timings[0]!.ms})`);
});

test('flush runs before every timed run, outside the timed region', () => {
  let flushes = 0;
  const r = autotune({
    key: 'flush',
    device: 'cpu',
    cache: null,
    warmup: 0,
    reps: 3,
    flush: () => (flushes++, busy(4)),
    candidates: [{ config: 1, run: () => {} }],
  });
  assert.equal(flushes, 3);
  assert.ok(r.timings[0]!.ms < 2, `the flush is not timed (got ${r.timings[0]!.ms})`);
});

test('a throwing candidate is dropped; if all throw the error lists every failure', () => {
  const r = autotune({
    key: 'drop-throwing',
    device: 'cpu',
    cache: null,
    candidates: [
      { config: 'broken', run: () => { throw new Error('unsupported tile 64x64'); } },
      { config: 'ok', run: () => busy(0.2) },
    ],
  });
  assert.equal(r.best, 'ok');
  assert.equal(r.timings[0]!.ms, Infinity);
  assert.equal(r.timings[0]!.error, 'unsupported tile 64x64');
  assert.ok(Number.isFinite(r.timings[1]!.ms));

  assert.throws(
    () =>
      autotune({
        key: 'all-fail',
        device: 'cpu',
        cache: null,
        candidates: [
          { config: { tile: 16 }, run: () => { throw new Error('too small'); } },
          { config: { tile: 32 }, run: () => { throw new RangeError('too big'); } },
        ],
      }),
    (e: Error) => {
      assert.match(e.message, /autotune 'all-fail': all 2 candidates failed/);
      assert.match(e.message, /\[0\] \{"tile":16\}: too small/);
      assert.match(e.message, /\[1\] \{"tile":32\}: too big/);
      return true;
    },
  );
  assert.throws(() => autotune({ key: 'none', device: 'cpu', cache: null, candidates: [] }), /no candidates/);
  assert.throws(() => autotune({ key: 'k', device: 'cpu', cache: null, reps: 0, candidates: [{ config: 1, run: () => {} }] }), /reps must be an integer >= 1, got 0/);
});

test('winners persist across DiskCache instances and come back without timing', () => {
  const cache = freshCache();
  let runs = 0;
  const candidates = () => [
    { config: { block: 8 }, run: () => (runs++, busy(1.5)) },
    { config: { block: 32 }, run: () => void runs++ },
  ];
  const first = autotune({ key: 'persist:matmul[64x64]', device: 'cpu', cache, candidates: candidates() });
  assert.deepEqual(first.best, { block: 32 });
  assert.equal(first.fromCache, false);
  assert.ok(runs > 0);

  runs = 0;
  const reopened = new DiskCache({ dir: cache.dir });
  const second = autotune({ key: 'persist:matmul[64x64]', device: 'cpu', cache: reopened, candidates: candidates() });
  assert.equal(second.fromCache, true);
  assert.deepEqual(second.best, { block: 32 });
  assert.equal(second.bestIndex, 1);
  assert.equal(runs, 0, 'nothing ran');
  assert.equal(reopened.stats().hits, 1);

  const stored = reopened.get(AUTOTUNE_NAMESPACE, autotuneCacheKey('persist:matmul[64x64]', 'cpu').cacheKey) as { device: { type: string; name: string } };
  assert.equal(stored.device.type, 'cpu');
  assert.equal(stored.device.name, String(kiln.getAccelerator('cpu').properties(0).name));

  // the stored winner is found by config, whatever its position now
  const reordered = autotune({ key: 'persist:matmul[64x64]', device: 'cpu', cache: reopened, candidates: candidates().reverse() });
  assert.equal(reordered.fromCache, true);
  assert.deepEqual(reordered.best, { block: 32 });
  assert.equal(reordered.bestIndex, 0);

  // a candidate list without the stored winner is tuned again
  const changed = autotune({ key: 'persist:matmul[64x64]', device: 'cpu', cache: reopened, candidates: [{ config: { block: 4 }, run: () => {} }] });
  assert.equal(changed.fromCache, false);
  assert.deepEqual(changed.best, { block: 4 });

  // another key is tuned separately
  const other = autotune({ key: 'persist:other', device: 'cpu', cache: reopened, candidates: candidates() });
  assert.equal(other.fromCache, false);
});

test('KILN_AUTOTUNE=0: the first candidate wins and nothing runs', () => {
  const saved = process.env.KILN_AUTOTUNE;
  process.env.KILN_AUTOTUNE = '0';
  try {
    let ran = false;
    const r = autotune({ key: 'disabled', device: 'cpu', cache: freshCache(), candidates: [{ config: 'slow', run: () => void (ran = true) }, { config: 'fast', run: () => void (ran = true) }] });
    assert.equal(r.best, 'slow');
    assert.equal(r.disabled, true);
    assert.deepEqual(r.timings, []);
    assert.equal(ran, false);
  } finally {
    if (saved === undefined) delete process.env.KILN_AUTOTUNE;
    else process.env.KILN_AUTOTUNE = saved;
  }
});

test("Event timing works on every registered accelerator that is available", async (t) => {
  const reports = kiln.probeAccelerators();
  assert.ok(reports.some((r) => r.type === 'cpu' && r.available), 'cpu is always available');
  for (const r of reports) {
    await t.test(`${r.type}`, { skip: r.available ? false : `${r.type} not available: ${r.reason}` }, () => {
      const device = r.type;
      const a = kiln.randn([96, 96], { device });
      const b = kiln.randn([96, 96], { device });
      try {
        const result = autotune({
          key: `every-accelerator:${device}`,
          device,
          cache: null,
          warmup: 1,
          reps: 3,
          candidates: [
            { config: 'matmul x8', run: () => { for (let i = 0; i < 8; i++) kiln.matmul(a, b).dispose(); } },
            { config: 'nothing', run: () => {} },
          ],
        });
        for (const tm of result.timings) assert.ok(Number.isFinite(tm.ms) && tm.ms >= 0, `${device}: ${tm.config} timed ${tm.ms}`);
        assert.ok(result.timings[0]!.ms > 0, `${device}: eight 96x96 matmuls take measurable time`);
        assert.equal(result.best, 'nothing', `${device}: the event timing ranks an empty run first`);
      } finally {
        a.dispose();
        b.dispose();
      }
    });
  }
  for (const r of reports.filter((x) => !x.available)) t.diagnostic(`skipped ${r.type}: ${r.reason}`);
});

test('cloneArgsForTuning: candidates that mutate their inputs leave the originals untouched', () => {
  const x = kiln.tensor([1, 2, 3, 4]);
  const y = kiln.tensor([10, 20, 30, 40]);
  const original = [x, y, 0.5] as const;
  const args = cloneArgsForTuning(original, [0]);
  assert.notEqual(args[0], x, 'the mutated tensor is a copy');
  assert.equal(args[1], y, 'unmutated tensors pass through');
  assert.equal(args[2], 0.5);
  const [xc, yc, alpha] = args;
  const r = autotune({
    key: 'mutating',
    device: 'cpu',
    cache: null,
    clonedInputs: clonedTensors(original, args),
    candidates: [
      { config: 'add_', run: () => void xc.add_(yc, alpha) },
      { config: 'mul_', run: () => void xc.mul_(2) },
    ],
  });
  assert.ok(['add_', 'mul_'].includes(r.best));
  assert.deepEqual(x.toFlatArray(), [1, 2, 3, 4], 'the live tensor is unchanged');
  assert.deepEqual(y.toFlatArray(), [10, 20, 30, 40]);
  assert.equal(xc.isDisposed, true, 'clonedInputs are disposed after tuning');
  assert.equal(y.isDisposed, false);
  // default: every tensor is cloned
  const all = cloneArgsForTuning([x, y]);
  assert.ok(all[0] !== x && all[1] !== y);
  assert.deepEqual(all[1].toFlatArray(), [10, 20, 30, 40]);
  assert.throws(() => cloneArgsForTuning([x, 1], [1]), /argument 1 is marked mutated but is not a Tensor/);
});
