/** kiln.data: TensorDataset, defaultCollate and DataLoader (order, shuffle, dropLast, prefetch). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { assertThrowsWith } from './helpers/assert.js';

const { data } = kiln;

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/** Reference permutation: the Fisher-Yates the loader documents, over a generator of the same seed. */
function refPermutation(n: number, g: kiln.Generator): number[] {
  const o = range(n);
  for (let i = n - 1; i > 0; i--) {
    const j = g.nextInt(0, i + 1);
    [o[i], o[j]] = [o[j]!, o[i]!];
  }
  return o;
}

test('TensorDataset rows and a sequential DataLoader with and without dropLast', () => {
  const x = kiln.arange(10 * 3, { dtype: 'float32' }).reshape([10, 3]);
  const y = kiln.arange(10, { dtype: 'int64' });
  const ds = new data.TensorDataset(x, y);
  assert.equal(ds.length, 10);
  assert.deepEqual(ds.get(4).map((t) => t.toArray()), [[12, 13, 14], 4]);
  const loader = new data.DataLoader(ds, { batchSize: 4 });
  assert.equal(loader.length, 3);
  const batches = [...loader];
  assert.deepEqual(batches.map((b) => b[1]!.toFlatArray()), [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]);
  assert.deepEqual(batches[2]![0]!.shape, [2, 3]);
  assert.equal(batches[0]![1]!.dtype, 'int64');
  const dropped = new data.DataLoader(ds, { batchSize: 4, dropLast: true });
  assert.equal(dropped.length, 2);
  assert.deepEqual([...dropped].map((b) => b[1]!.toFlatArray()), [[0, 1, 2, 3], [4, 5, 6, 7]]);
  assertThrowsWith(() => new data.TensorDataset(x, kiln.arange(9)), 'TensorDataset', 'size mismatch', '[10, 3]', '[9]');
});

test('shuffle: every pass a fresh permutation from the seeded generator, reproducible across loaders', () => {
  const ds = new data.TensorDataset(kiln.arange(13, { dtype: 'int64' }));
  const epochs = (seed: number): number[][] => {
    const loader = new data.DataLoader(ds, { batchSize: 5, shuffle: true, generator: new kiln.Generator(seed) });
    return [0, 1, 2].map(() => [...loader].flatMap((b) => b[0]!.toFlatArray()));
  };
  const a = epochs(7);
  const ref = new kiln.Generator(7);
  assert.deepEqual(a, [refPermutation(13, ref), refPermutation(13, ref), refPermutation(13, ref)]);
  assert.deepEqual(epochs(7), a, 'same seed, same epochs');
  assert.notDeepEqual(a[0], a[1], 'each pass reshuffles');
  for (const e of a) assert.deepEqual([...e].sort((p, q) => p - q), range(13));
});

test('defaultCollate stacks tensors and collates nested objects, tuples, numbers, booleans and strings', () => {
  const samples = range(3).map((i) => ({ image: kiln.full([2, 2], i), meta: { label: BigInt(i), weight: i / 2, keep: i !== 1, name: `s${i}` }, pair: [kiln.tensor([i, -i]), i] as [kiln.Tensor, number] }));
  const b = data.defaultCollate(samples);
  assert.deepEqual(b.image.shape, [3, 2, 2]);
  assert.deepEqual(b.image.toFlatArray(), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
  assert.equal(b.meta.label.dtype, 'int64');
  assert.deepEqual(b.meta.label.toFlatArray(), [0, 1, 2]);
  assert.equal(b.meta.weight.dtype, 'float32');
  assert.deepEqual(b.meta.keep.toArray(), [true, false, true]);
  assert.deepEqual(b.meta.name, ['s0', 's1', 's2']);
  assert.deepEqual(b.pair[0].toArray(), [[0, -0], [1, -1], [2, -2]]);
  assert.deepEqual(b.pair[1].toFlatArray(), [0, 1, 2]);
  assertThrowsWith(() => data.defaultCollate([{ a: kiln.zeros([2]) }, { a: kiln.zeros([3]) }]), 'DataLoader collate', 'sample.a', '[2]', 'sample 1', '[3]');
  assertThrowsWith(() => data.defaultCollate([{ a: 1 }, { b: 1 }]), 'DataLoader collate', 'keys');
  assertThrowsWith(() => data.defaultCollate([new Map()]), 'DataLoader collate', 'cannot collate');
});

test('a custom Dataset and collateFn; the sync iterator refuses async datasets', () => {
  const ds: kiln.data.Dataset<{ x: number; tag: string }> = { length: 5, get: (i) => ({ x: i * i, tag: `t${i}` }) };
  const loader = new data.DataLoader(ds, { batchSize: 2, collateFn: (s) => s.map((e) => e.tag).join('+') });
  assert.deepEqual([...loader], ['t0+t1', 't2+t3', 't4']);
  const plain = [...new data.DataLoader(ds, { batchSize: 5 })][0]!;
  assert.deepEqual(plain.x.toFlatArray(), [0, 1, 4, 9, 16]);
  const asyncDs: kiln.data.Dataset<number> = { length: 2, get: async (i) => i };
  assert.throws(() => [...new data.DataLoader(asyncDs)], /DataLoader: dataset\.get\(0\) returned a Promise; iterate with `for await`/);
  assert.throws(() => new data.DataLoader(ds, { batchSize: 0 }), /DataLoader: batchSize must be a positive integer, got 0/);
  assert.throws(() => new data.DataLoader(ds, { batchsize: 2 } as never), /DataLoader: unknown option 'batchsize' \(did you mean 'batchSize'\?\)/);
});

test('async iteration prefetches: item reads of the next batches start before the current one is consumed', async () => {
  const requested: number[] = [];
  const ds: kiln.data.Dataset<number> = {
    length: 8,
    get: async (i) => {
      requested.push(i);
      await new Promise((r) => setTimeout(r, 1));
      return i;
    },
  };
  const loader = new data.DataLoader(ds, { batchSize: 2, prefetch: 2 });
  const seen: number[][] = [];
  const requestedAtYield: number[] = [];
  for await (const b of loader) {
    requestedAtYield.push(requested.length);
    seen.push(b.toFlatArray());
  }
  assert.deepEqual(seen, [[0, 1], [2, 3], [4, 5], [6, 7]]);
  // When batch 0 is handed out, batches 1 and 2 (prefetch 2) have had their items requested too.
  assert.equal(requestedAtYield[0], 6);
  assert.equal(requestedAtYield[1], 8);

  requested.length = 0;
  for await (const b of new data.DataLoader(ds, { batchSize: 2, prefetch: 0 })) {
    assert.equal(requested.length, b.toFlatArray()[1]! + 1, 'prefetch 0 reads one batch at a time');
  }
});

test('async iteration over a TensorDataset uses its batched read, and a break disposes batches in flight', async () => {
  const ds = new data.TensorDataset(kiln.arange(6, { dtype: 'float32' }).reshape([6, 1]));
  const loader = new data.DataLoader(ds, { batchSize: 2, prefetch: 2 });
  const got: number[][] = [];
  for await (const [x] of loader) {
    got.push(x!.toFlatArray());
    break;
  }
  assert.deepEqual(got, [[0, 1]]);
  const all: number[] = [];
  for await (const [x] of loader) all.push(...x!.toFlatArray());
  assert.deepEqual(all, [0, 1, 2, 3, 4, 5]);
});

test('a DataLoader feeds a training loop end to end', () => {
  const g = new kiln.Generator(3);
  const x = kiln.randn([32, 4], { generator: g });
  const w = kiln.tensor([[1], [-2], [0.5], [3]]);
  const y = kiln.matmul(x, w);
  const model = new kiln.nn.Linear(4, 1, false, { generator: g });
  const opt = new kiln.optim.SGD(model.parameters(), { lr: 0.1 });
  const loader = new data.DataLoader(new data.TensorDataset(x, y), { batchSize: 8, shuffle: true, generator: new kiln.Generator(1) });
  let last = Infinity;
  for (let epoch = 0; epoch < 30; epoch++) {
    for (const [xb, yb] of loader) {
      opt.zeroGrad();
      const loss = kiln.nn.functional.mseLoss(model.forward(xb!), yb!);
      loss.backward();
      opt.step();
      last = loss.item() as number;
    }
  }
  assert.ok(last < 1e-3, `loss ${last}`);
});
