/**
 * The webgpu device thread's bind group cache (src/runtime/webgpu/bind-groups.ts) over fake Dawn
 * objects: a dispatch that repeats an earlier one's pipeline, buffers and metadata words gets the
 * group made for it; equal words share an arena slot wherever they sit in a batch; words longer
 * than a slot take several; a destroyed buffer's groups go with it; a full arena is replaced (the
 * old one retired, every group dropped); past maxGroups every group is dropped. No device needed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BindGroupCache, type DawnIo } from '../src/runtime/webgpu/bind-groups.js';
import { assertThrowsWith } from './helpers/assert.js';

interface FakeGroup {
  readonly buffers: readonly number[];
  readonly arena: number;
  readonly offset: number;
  readonly bytes: number;
}

function fake(): { io: DawnIo<number, string, FakeGroup>; writes: { arena: number; offset: number; words: number[] }[]; retired: number[]; made: FakeGroup[] } {
  let arenas = 0;
  const writes: { arena: number; offset: number; words: number[] }[] = [];
  const retired: number[] = [];
  const made: FakeGroup[] = [];
  return {
    writes,
    retired,
    made,
    io: {
      createArena: () => ++arenas,
      writeArena: (arena, offset, words) => void writes.push({ arena, offset, words: [...words] }),
      retireArena: (arena) => void retired.push(arena),
      createBindGroup: (_layout, buffers, arena, offset, bytes) => {
        const g = { buffers: [...buffers], arena, offset, bytes };
        made.push(g);
        return g;
      },
    },
  };
}

const w = (...xs: number[]): Uint32Array => new Uint32Array(xs);

test('bind group cache: repeats reuse the group; words are interned in the arena, written once', () => {
  const f = fake();
  const cache = new BindGroupCache(f.io, 256, 4);
  // A batch's packed words: [1, 2, 3] at 0, [9] at 3, [1, 2, 3] again at 4.
  const batch = w(1, 2, 3, 9, 1, 2, 3);
  const ids = [7, 8, 7, 8, 9];
  const g1 = cache.groupFor(1, 'L', 'k', ids, 0, 2, batch, 0, 3);
  const g2 = cache.groupFor(1, 'L', 'k', ids, 2, 2, batch, 4, 3);
  assert.equal(g2, g1, 'same pipeline, buffers and words: the same group');
  assert.deepEqual(g1, { buffers: [7, 8], arena: 1, offset: 0, bytes: 256 });
  const g3 = cache.groupFor(1, 'L', 'k', ids, 0, 2, batch, 3, 1);
  assert.notEqual(g3, g1);
  assert.equal(g3.offset, 256, 'other words: the next slot');
  const g4 = cache.groupFor(2, 'L', 'k', ids, 0, 2, batch, 0, 3);
  assert.notEqual(g4, g1, 'another pipeline: another group');
  assert.equal(g4.offset, 0, '... over the same slot');
  const g5 = cache.groupFor(1, 'L', 'k', ids, 3, 2, batch, 0, 3);
  assert.deepEqual(g5.buffers, [8, 9]);
  assert.deepEqual(f.writes, [
    { arena: 1, offset: 0, words: [1, 2, 3] },
    { arena: 1, offset: 256, words: [9] },
  ]);
  assert.deepEqual(cache.stats, { made: 4, hits: 1, metaWrites: 2, arenaResets: 0 });
  assert.equal(cache.size, 4);
});

test('bind group cache: long metadata takes several slots; a full arena is replaced and its groups dropped', () => {
  const f = fake();
  const cache = new BindGroupCache(f.io, 16, 4);
  const long = w(...Array.from({ length: 9 }, (_, i) => i));
  const g1 = cache.groupFor(1, 'L', 'k', [5], 0, 1, long, 0, 9);
  assert.deepEqual([g1.offset, g1.bytes], [0, 48], '9 words in 16-byte slots: 3 slots');
  const g2 = cache.groupFor(1, 'L', 'k', [5], 0, 1, w(42), 0, 1);
  assert.deepEqual([g2.arena, g2.offset], [1, 48]);
  // The arena (4 slots) is full: the next new words go to a fresh one, and the old groups go.
  const g3 = cache.groupFor(1, 'L', 'k', [5], 0, 1, w(43), 0, 1);
  assert.deepEqual([g3.arena, g3.offset], [2, 0]);
  assert.deepEqual(f.retired, [1]);
  assert.equal(cache.stats.arenaResets, 1);
  assert.equal(cache.size, 1);
  const again = cache.groupFor(1, 'L', 'k', [5], 0, 1, long, 0, 9);
  assert.notEqual(again, g1, 'made again over the new arena');
  assert.equal(again.arena, 2);
  assertThrowsWith(() => cache.groupFor(1, 'L', 'k', [5], 0, 1, new Uint32Array(17), 0, 17), 'do not fit the metadata arena');
});

test('bind group cache: a destroyed buffer drops the groups that bind it; past maxGroups all are dropped', () => {
  const f = fake();
  const cache = new BindGroupCache(f.io, 256, 64, 3);
  const meta = w(1);
  const a = cache.groupFor(1, 'L', 'k', [1, 2], 0, 2, meta, 0, 1);
  const b = cache.groupFor(1, 'L', 'k', [2, 3], 0, 2, meta, 0, 1);
  const c = cache.groupFor(1, 'L', 'k', [3, 4], 0, 2, meta, 0, 1);
  cache.dropBuffer(2);
  assert.equal(cache.size, 1);
  assert.notEqual(cache.groupFor(1, 'L', 'k', [1, 2], 0, 2, meta, 0, 1), a);
  assert.equal(cache.groupFor(1, 'L', 'k', [3, 4], 0, 2, meta, 0, 1), c, 'groups of other buffers stay');
  cache.dropBuffer(99);
  assert.equal(cache.size, 2);
  cache.groupFor(1, 'L', 'k', [5, 6], 0, 2, meta, 0, 1);
  assert.equal(cache.size, 3);
  // The fourth group would pass maxGroups (3): every group goes first.
  cache.groupFor(1, 'L', 'k', [7, 8], 0, 2, meta, 0, 1);
  assert.equal(cache.size, 1);
  assert.notEqual(cache.groupFor(1, 'L', 'k', [3, 4], 0, 2, meta, 0, 1), c);
  assert.notEqual(b, c);
});
