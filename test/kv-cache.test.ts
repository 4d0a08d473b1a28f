/**
 * The paged KV cache: block allocator invariants (allocation, reference counts, double free, prefix
 * hashes, LRU eviction), prefix keys, cache sizing, the step context's slot writes, gathers and
 * attention groups, and the cached Qwen3 step's logits against the full uncached forward (dense
 * and MoE tiny checkpoints) for a causal prefill, a prefill chunk after a cached prefix, decode
 * steps and a ragged batched decode.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { assertThrowsWith } from './helpers/assert.js';
import { randomInts } from './helpers/make.js';

const { BlockAllocator, PagedKvCache, PagedStepKv, hashBlock, extendBlockHashes } = kiln.serve;

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;

test('block allocator: allocate, retain, release, exhaustion and double free', () => {
  const a = new BlockAllocator(4);
  assert.equal(a.numFree, 4);
  const got = [a.allocate(), a.allocate(), a.allocate(), a.allocate()];
  assert.deepEqual([...got].sort(), [0, 1, 2, 3]);
  assert.equal(a.numFree, 0);
  assertThrowsWith(() => a.allocate(), 'BlockAllocator.allocate', 'all 4 blocks');
  a.retain(got[1]!);
  assert.equal(a.refCount(got[1]!), 2);
  assert.equal(a.numShared, 1);
  a.release(got[1]!);
  assert.equal(a.refCount(got[1]!), 1);
  assert.equal(a.numFree, 0);
  a.release(got[1]!);
  assert.equal(a.numFree, 1);
  assertThrowsWith(() => a.release(got[1]!), 'BlockAllocator.release', `block ${got[1]}`, 'double free');
  assertThrowsWith(() => a.retain(got[1]!), 'BlockAllocator.retain', 'free');
  assertThrowsWith(() => a.release(7), 'BlockAllocator.release', 'block 7', '[0, 4)');
  assert.equal(a.allocate(), got[1]);
  a.checkInvariants();
  for (const b of got) a.release(b);
  assert.equal(a.numFree, 4);
  a.checkInvariants();
  assertThrowsWith(() => new BlockAllocator(0), 'numBlocks', '0');
});

test('block allocator: prefix hashes survive free until evicted, least recently freed first', () => {
  const a = new BlockAllocator(4);
  const [b0, b1, b2] = [a.allocate(), a.allocate(), a.allocate()];
  assert.equal(a.register(b0!, 'h0'), true);
  assert.equal(a.register(b1!, 'h1'), true);
  // One hash names one block; a block keeps its first hash.
  assert.equal(a.register(b2!, 'h0'), false);
  assert.equal(a.register(b0!, 'other'), false);
  assert.equal(a.hashOf(b2!), null);
  // Free in order b0, b1, b2: the hashed ones wait at the tail, the plain one is reused first.
  a.release(b0!);
  a.release(b1!);
  a.release(b2!);
  a.checkInvariants();
  assert.equal(a.numFree, 4);
  assert.equal(a.numCachedFree, 2);
  assert.equal(a.lookup('h1'), b1);
  // A hit takes a cached free block out of the free queue.
  assert.equal(a.acquireCached('h1'), b1);
  assert.equal(a.refCount(b1!), 1);
  assert.equal(a.numFree, 3);
  assert.equal(a.acquireCached('missing'), undefined);
  assert.equal(a.stats.hits, 1);
  // Allocation order: unhashed blocks first (b2, the never-used one), then the LRU cached block b0.
  const first = [a.allocate(), a.allocate()];
  assert.ok(first.includes(b2!) && !first.includes(b0!), `got ${first}`);
  assert.equal(a.lookup('h0'), b0);
  assert.equal(a.allocate(), b0);
  assert.equal(a.lookup('h0'), undefined, 'evicted');
  assert.equal(a.hashOf(b0!), null);
  assert.equal(a.stats.evictions, 1);
  // b1 is still in use and keeps its hash.
  assert.equal(a.lookup('h1'), b1);
  a.checkInvariants();
  // A shared cached block: a second acquire bumps the count.
  assert.equal(a.acquireCached('h1'), b1);
  assert.equal(a.refCount(b1!), 2);
  assert.equal(a.numShared, 1);
  a.resetPrefixCache();
  assert.equal(a.lookup('h1'), undefined);
  a.checkInvariants();
});

test('prefix keys chain over all earlier tokens and cover only full blocks', () => {
  const a = hashBlock(null, [1, 2, 3, 4]);
  assert.equal(a, hashBlock(null, [1, 2, 3, 4]));
  assert.notEqual(a, hashBlock(null, [1, 2, 3, 5]));
  assert.notEqual(hashBlock(a, [5, 6, 7, 8]), hashBlock(hashBlock(null, [0, 2, 3, 4]), [5, 6, 7, 8]), 'same block, different prefix');
  const toks = randomInts(11, 3, 0, 50);
  const all = extendBlockHashes([], toks, 4);
  assert.equal(all.length, 2);
  assert.deepEqual(all, [hashBlock(null, toks.slice(0, 4)), hashBlock(hashBlock(null, toks.slice(0, 4)), toks.slice(4, 8))]);
  // Incremental extension gives the same keys.
  const inc = extendBlockHashes([], toks.slice(0, 5), 4);
  assert.equal(inc.length, 1);
  assert.deepEqual(extendBlockHashes(inc, toks, 4), all);
});

const geometry = { numLayers: 3, numKvHeads: 2, headDim: 4, dtype: 'float32' as const, device: new kiln.Device('cpu') };

test('cache sizing from a byte budget or a block count; clear errors', () => {
  const per = 2 * 3 * 8 * 2 * 4 * 4; // K and V, layers, block size, heads, head dim, float32
  assert.equal(PagedKvCache.bytesPerBlock(geometry, 8), per);
  const c = new PagedKvCache(geometry, { blockSize: 8, memoryBytes: 5 * per + per - 1 });
  assert.equal(c.numBlocks, 5);
  assert.equal(c.bytes, 5 * per);
  assert.equal(c.keys.length, 3);
  assert.deepEqual([...c.keys[2]!.shape], [5, 8, 2, 4]);
  assert.equal(c.values[0]!.dtype, 'float32');
  assert.deepEqual([...c.keySlots[0]!.shape], [40, 2, 4]);
  assert.equal(c.keySlots[0]!.storage, c.keys[0]!.storage, 'the slot view shares the cache storage');
  assert.ok(c.keys[1]!.toFlatArray().every((v) => v === 0), 'zeroed');
  assert.equal(c.allocator.numFree, 5);
  c.dispose();
  assert.ok(c.keys[0]!.isDisposed);
  const d = new PagedKvCache({ ...geometry, dtype: 'bfloat16' }, { numBlocks: 3 });
  assert.equal(d.blockSize, 16);
  assert.equal(d.keys[0]!.dtype, 'bfloat16');
  assert.equal(d.bytes, 3 * 2 * 3 * 16 * 2 * 4 * 2);
  d.dispose();
  assertThrowsWith(() => new PagedKvCache(geometry, { blockSize: 8, memoryBytes: per - 1 }), 'PagedKvCache', `memoryBytes ${per - 1}`, `${per} bytes`);
  assertThrowsWith(() => new PagedKvCache(geometry, {}), 'PagedKvCache', 'numBlocks or memoryBytes');
  assertThrowsWith(() => new PagedKvCache(geometry, { numBlocks: 2, memoryBytes: 10 }), 'numBlocks (2) or memoryBytes (10)');
  assertThrowsWith(() => new PagedKvCache(geometry, { numBlocks: 2, blockSize: 0 }), 'blockSize', '0');
});

/** K/V rows whose values name the layer, token and element, so a misplaced row is obvious. */
function labelled(layer: number, tokens: readonly number[], kind: number): Tensor {
  const data: number[] = [];
  for (const t of tokens) for (let e = 0; e < 8; e++) data.push(kind * 10000 + layer * 1000 + t * 10 + e);
  return kiln.reshape(kiln.tensor(data), [tokens.length, 2, 4]);
}

test('step context: slot writes, gathers in position order, groups and masks', () => {
  const cache = new PagedKvCache(geometry, { blockSize: 4, numBlocks: 8 });
  // Sequence A: positions 0..5 in blocks [5, 2]; sequence B: positions 0..2 in block [7].
  const tableA = [5, 2];
  const tableB = [7];
  // Step 1: prefill A (6 tokens, labels 0..5) and B (3 tokens, labels 100..102).
  const s1 = new PagedStepKv(cache, [
    { blockTable: tableA, contextLen: 0, numNew: 6 },
    { blockTable: tableB, contextLen: 0, numNew: 3 },
  ]);
  assert.deepEqual(s1.groups, [
    { start: 0, rows: 1, queryLen: 6 },
    { start: 6, rows: 1, queryLen: 3 },
  ]);
  assert.equal(s1.numTokens, 9);
  const toks1 = [0, 1, 2, 3, 4, 5, 100, 101, 102];
  for (let l = 0; l < 3; l++) s1.write(l, labelled(l, toks1, 1), labelled(l, toks1, 2));
  // Slot p of A is block tableA[p / 4] * 4 + p % 4.
  const k1 = cache.keys[1]!;
  assert.deepEqual(kiln.select(kiln.select(k1, 0, 2), 0, 1).toFlatArray(), labelled(1, [5], 1).toFlatArray());
  assert.deepEqual(kiln.select(kiln.select(k1, 0, 7), 0, 2).toFlatArray(), labelled(1, [102], 1).toFlatArray());
  const r = s1.read(2, 0);
  assert.deepEqual([...r.keys.shape], [1, 2, 6, 4]);
  assert.equal(r.mask, null);
  assert.equal(r.causal, true);
  const expect = kiln.transpose(kiln.unsqueeze(labelled(2, [0, 1, 2, 3, 4, 5], 2), 0), 1, 2);
  assert.deepEqual(r.values.toFlatArray(), expect.toFlatArray());
  s1.dispose();

  // Step 2: one decode token each (A at position 6, B at 3), then a 2-token chunk of C after 4 cached.
  tableA.length = 2;
  const tableC = [0, 1];
  const s2 = new PagedStepKv(cache, [
    { blockTable: tableA, contextLen: 6, numNew: 1 },
    { blockTable: tableB, contextLen: 3, numNew: 1 },
    { blockTable: tableC, contextLen: 4, numNew: 2 },
  ]);
  assert.deepEqual(s2.groups, [
    { start: 0, rows: 2, queryLen: 1 },
    { start: 2, rows: 1, queryLen: 2 },
  ]);
  for (let l = 0; l < 3; l++) s2.write(l, labelled(l, [6, 103, 204, 205], 1), labelled(l, [6, 103, 204, 205], 2));
  const dec = s2.read(0, 0);
  assert.deepEqual([...dec.keys.shape], [2, 2, 7, 4]);
  // Ragged: B has 4 keys of 7, its padding is masked out.
  assert.deepEqual(dec.mask!.toArray(), [[[[true, true, true, true, true, true, true]]], [[[true, true, true, true, false, false, false]]]]);
  const rowB = kiln.narrow(kiln.select(dec.keys, 0, 1), 1, 0, 4);
  assert.deepEqual(rowB.toFlatArray(), kiln.transpose(labelled(0, [100, 101, 102, 103], 1), 0, 1).toFlatArray());
  const rowA = kiln.select(dec.keys, 0, 0);
  assert.deepEqual(rowA.toFlatArray(), kiln.transpose(labelled(0, [0, 1, 2, 3, 4, 5, 6], 1), 0, 1).toFlatArray());
  // The chunk after a cached prefix: query i sees keys j <= 4 + i.
  const ch = s2.read(0, 1);
  assert.equal(ch.causal, false);
  assert.deepEqual(ch.mask!.toArray(), [[[
    [true, true, true, true, true, false],
    [true, true, true, true, true, true],
  ]]]);
  s2.dispose();
  assertThrowsWith(() => new PagedStepKv(cache, [{ blockTable: [1], contextLen: 3, numNew: 2 }]), 'PagedStepKv', '5 tokens need 2 blocks', 'has 1');
  cache.dispose();
});

// ---------------------------------------------------------------------------------------------
// The cached step against the full forward.

function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Row t of the full forward's logits [1, T, V] for the sequence `ids`. */
function fullLogits(model: kiln.models.Qwen3CausalLMBase, ids: readonly number[]): number[][] {
  const out = kiln.noGrad(() => model.forward(kiln.tensor([ids as number[]], { dtype: 'int64' })));
  const V = out.shape[2]!;
  const flat = out.toFlatArray();
  out.dispose();
  return Array.from({ length: ids.length }, (_, t) => flat.slice(t * V, (t + 1) * V));
}

for (const name of ['qwen3-tiny', 'qwen3-moe-tiny']) {
  test(`cached step logits equal the uncached forward: ${name}`, (t) => {
    const model = kiln.models.loadQwen3(path.join(fixtures, name));
    const cache = new PagedKvCache(model.kvGeometry(), { blockSize: 4, numBlocks: 32 });
    const seqA = randomInts(26, 11, 0, 96);
    const seqB = randomInts(9, 12, 0, 96);
    const refA = fullLogits(model, seqA);
    const refB = fullLogits(model, seqB);
    const tableA = [9, 3, 17, 0, 5, 30, 21];
    const tableB = [8, 1, 2];
    let worst = 0;
    const step = (entries: { table: number[]; seq: number[]; ctx: number; n: number }[], rows: number[]): number[][] => {
      const ids: number[] = [];
      const pos: number[] = [];
      for (const e of entries) {
        for (let p = e.ctx; p < e.ctx + e.n; p++) {
          ids.push(e.seq[p]!);
          pos.push(p);
        }
      }
      const kv = new PagedStepKv(
        cache,
        entries.map((e) => ({ blockTable: e.table, contextLen: e.ctx, numNew: e.n })),
      );
      const logits = kiln.scope(() => model.forwardStep(kiln.tensor(ids, { dtype: 'int64' }), pos, kv, rows));
      kv.dispose();
      const V = logits.shape[1]!;
      const flat = logits.toFlatArray();
      logits.dispose();
      return rows.map((_, i) => flat.slice(i * V, (i + 1) * V));
    };
    const check = (got: number[], ref: number[], what: string): void => {
      const d = maxAbsDiff(got, ref);
      worst = Math.max(worst, d);
      assert.ok(d < 1e-4, `${what}: max |cached - full| = ${d}`);
    };
    // Causal prefill of A's first 13 tokens (all rows) and B's first 5.
    const p1 = step(
      [
        { table: tableA, seq: seqA, ctx: 0, n: 13 },
        { table: tableB, seq: seqB, ctx: 0, n: 5 },
      ],
      [...Array.from({ length: 13 }, (_, i) => i), 17],
    );
    for (let i = 0; i < 13; i++) check(p1[i]!, refA[i]!, `A prefill position ${i}`);
    check(p1[13]!, refB[4]!, 'B prefill position 4');
    // A's next chunk of 7 after 13 cached tokens (mask path), all rows.
    const p2 = step([{ table: tableA, seq: seqA, ctx: 13, n: 7 }], Array.from({ length: 7 }, (_, i) => i));
    for (let i = 0; i < 7; i++) check(p2[i]!, refA[13 + i]!, `A chunk position ${13 + i}`);
    // Batched ragged decode: A at 20.., B at 5.. (one token each per step).
    for (let k = 0; k < 4; k++) {
      const d = step(
        [
          { table: tableA, seq: seqA, ctx: 20 + k, n: 1 },
          { table: tableB, seq: seqB, ctx: 5 + k, n: 1 },
        ],
        [0, 1],
      );
      check(d[0]!, refA[20 + k]!, `A decode position ${20 + k}`);
      check(d[1]!, refB[5 + k]!, `B decode position ${5 + k}`);
    }
    // A alone for its last 2 tokens (unmasked decode).
    for (const p of [24, 25]) check(step([{ table: tableA, seq: seqA, ctx: p, n: 1 }], [0])[0]!, refA[p]!, `A decode position ${p}`);
    t.diagnostic(`max |cached - full| over all steps = ${worst.toExponential(2)}`);
    cache.dispose();
  });
}

test('forwardStep: bad input names the function and the values', () => {
  const model = kiln.models.loadQwen3(path.join(fixtures, 'qwen3-tiny'));
  const cache = new PagedKvCache(model.kvGeometry(), { blockSize: 4, numBlocks: 4 });
  const kv = new PagedStepKv(cache, [{ blockTable: [0], contextLen: 0, numNew: 2 }]);
  const ids = kiln.tensor([1, 2], { dtype: 'int64' });
  assertThrowsWith(() => model.forwardStep(kiln.tensor([[1, 2]], { dtype: 'int64' }), [0, 1], kv, [1]), 'Qwen3.forwardStep', 'inputIds', '[1, 2]');
  assertThrowsWith(() => model.forwardStep(ids, [0], kv, [1]), 'Qwen3.forwardStep', '1 positions for 2 tokens');
  assertThrowsWith(() => model.forwardStep(ids, [0, 200], kv, [1]), 'Qwen3.forwardStep', 'position 200', '128');
  assertThrowsWith(() => model.forwardStep(ids, [0, 1], kv, [2]), 'Qwen3.forwardStep', 'logits row 2', '[0, 2)');
  kv.dispose();
  cache.dispose();
});
