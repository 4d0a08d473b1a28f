import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { CachingAllocator, sizeClass } from '../src/runtime/caching-allocator.js';
import { registerAccelerator, getAccelerator } from '../src/runtime/registry.js';
import { assertThrowsWith } from './helpers/assert.js';

test('device strings parse and print', () => {
  assert.equal(kiln.Device.from('cpu').toString(), 'cpu');
  assert.equal(kiln.Device.from('cuda').toString(), 'cuda:0');
  const d = kiln.Device.from('webgpu:2');
  assert.equal(d.type, 'webgpu');
  assert.equal(d.index, 2);
  assertThrowsWith(() => kiln.Device.from('tpu:0'), "'tpu:0'", 'cuda[:N]');
  assertThrowsWith(() => kiln.Device.from('cuda:-1'), "'cuda:-1'");
});

test('caching allocator reuses freed blocks by size class and keeps stats', () => {
  let raw = 0;
  const alloc = new CachingAllocator('cpu', 0, {
    alloc: (n) => {
      raw++;
      return new ArrayBuffer(n);
    },
    free: () => {},
    zero: (h, n) => new Uint8Array(h as ArrayBuffer, 0, n).fill(0),
  });
  assert.equal(sizeClass(1), 512);
  assert.equal(sizeClass(513), 1024);
  assert.equal(sizeClass((1 << 20) + 1), 2 << 20);
  const a = alloc.allocate(1000);
  new Uint8Array(a.handle as ArrayBuffer).fill(7);
  assert.equal(alloc.stats().allocatedBytes, 1000);
  alloc.free(a);
  assert.equal(alloc.stats().cachedBytes, 1024);
  const b = alloc.allocate(900, { zero: true });
  assert.equal(raw, 1, 'same size class is served from the cache');
  assert.equal(alloc.stats().cacheHits, 1);
  assert.ok(new Uint8Array(b.handle as ArrayBuffer).every((v) => v === 0), 'zero: true clears a reused block');
  assertThrowsWith(() => {
    alloc.free(b);
    alloc.free(b);
  }, 'already freed');
  alloc.emptyCache();
  assert.equal(alloc.stats().reservedBytes, 0);
  assert.equal(alloc.stats().peakAllocatedBytes, 1000);
});

test('caching allocator: a private pool keeps the blocks freed while it is open, reuses them inside, gives them back on release', () => {
  const made: ArrayBuffer[] = [];
  const alloc = new CachingAllocator('cpu', 0, {
    alloc: (n) => {
      const b = new ArrayBuffer(n);
      made.push(b);
      return b;
    },
    free: () => {},
    zero: () => {},
  });
  const before = alloc.allocate(1000);
  const pool = alloc.beginPool();
  assertThrowsWith(() => alloc.beginPool(), 'already open');
  // Freed while open (even a block made before): to the pool, not the shared free lists.
  alloc.free(before);
  const a = alloc.allocate(800);
  assert.equal(a.handle, before.handle, 'an allocation inside takes the pool first');
  const b = alloc.allocate(800);
  alloc.free(a);
  alloc.free(b);
  assert.equal(pool.bytes, 2048);
  assert.equal(alloc.stats().cachedBytes, 0, 'pool blocks are not cached for others');
  alloc.endPool(pool);
  const c = alloc.allocate(800);
  assert.ok(c.handle !== a.handle && c.handle !== b.handle, 'after endPool nobody else gets the pool blocks');
  assert.equal(made.length, 3);
  alloc.free(c);
  assert.equal(alloc.stats().cachedBytes, 1024, 'a free after endPool goes to the shared lists');
  alloc.releasePool(pool);
  assert.equal(pool.bytes, 0);
  assert.equal(alloc.stats().cachedBytes, 3 * 1024);
  const handles = new Set([alloc.allocate(800).handle, alloc.allocate(800).handle, alloc.allocate(800).handle]);
  assert.deepEqual(handles, new Set([a.handle, b.handle, c.handle]), 'released blocks serve later allocations');
  assert.equal(made.length, 3);
});

test('allocator reports out-of-memory with what it holds', () => {
  const alloc = new CachingAllocator('cpu', 0, {
    alloc: (n) => {
      if (n > 4096) throw new Error('no memory');
      return new ArrayBuffer(n);
    },
    free: () => {},
    zero: () => {},
  });
  alloc.allocate(2000);
  assertThrowsWith(() => alloc.allocate(10000), 'out of memory', '10240 bytes', '2000 bytes allocated');
});

test('tensor dispose returns storage to the cpu allocator; views keep it alive', () => {
  const before = kiln.memoryStats('cpu');
  const t = kiln.tensor([1, 2, 3, 4]);
  const view = new kiln.Tensor(t.storage, t.dtype, [2], [2], 1);
  t.dispose();
  assert.deepEqual(view.toArray(), [2, 4], 'a live view still reads the data');
  view.dispose();
  const after = kiln.memoryStats('cpu');
  assert.equal(after.allocatedBytes, before.allocatedBytes);
  assertThrowsWith(() => t.toArray(), 'disposed');
});

test('an eager loop with dispose keeps allocator stats flat', () => {
  const x = kiln.tensor([[1, 2], [3, 4]]);
  for (let i = 0; i < 50; i++) kiln.add(x, i).dispose();
  const mid = kiln.memoryStats('cpu');
  for (let i = 0; i < 1000; i++) kiln.add(x, i).dispose();
  const end = kiln.memoryStats('cpu');
  assert.equal(end.allocatedBytes, mid.allocatedBytes);
  assert.equal(end.reservedBytes, mid.reservedBytes);
  assert.ok(end.cacheHits - mid.cacheHits >= 1000);
});

test('kiln.Event times work on cpu with the monotonic clock', () => {
  const s = new kiln.Event('cpu');
  const e = new kiln.Event('cpu');
  s.record();
  let acc = 0;
  for (let i = 0; i < 2e6; i++) acc += Math.sqrt(i);
  e.record();
  e.synchronize();
  assert.ok(acc > 0);
  const ms = s.elapsedTime(e);
  assert.ok(ms > 0 && ms < 10000, `elapsed ${ms} ms`);
  assert.equal(e.query(), true);
  assertThrowsWith(() => new kiln.Event('cpu').elapsedTime(e), 'recorded');
  assertThrowsWith(() => new kiln.Event('cpu', { enableTiming: false }).record().elapsedTime(e), 'enableTiming');
  const st = new kiln.Stream('cpu');
  assert.equal(st.query(), true);
  kiln.synchronize('cpu');
});

test('accelerator registry: lazy loading, clear errors, cpu never affected', () => {
  const reports = kiln.probeAccelerators();
  const cpu = reports.find((r) => r.type === 'cpu');
  assert.equal(cpu?.available, true);
  for (const r of reports.filter((x) => x.type !== 'cpu')) {
    assert.equal(typeof r.reason, 'string');
    if (!r.available) assertThrowsWith(() => getAccelerator(r.type), r.type, 'not available');
  }
  let loads = 0;
  registerAccelerator('webgpu', {
    probe: () => ({ available: false, reason: 'test double' }),
    load: () => {
      loads++;
      throw new Error('missing native dependency');
    },
  });
  assertThrowsWith(() => getAccelerator('webgpu'), "'webgpu' is not available", 'missing native dependency');
  assertThrowsWith(() => getAccelerator('webgpu'), 'missing native dependency');
  assert.equal(loads, 1, 'a failed load is remembered, not retried on every call');
  assert.deepEqual(kiln.tensor([1, 2]).add(1).toArray(), [2, 3]);
  assertThrowsWith(() => kiln.withDevice('cpu:1', () => 0), 'cpu:1', 'does not exist');
  assert.equal(kiln.withDevice('cpu', () => kiln.currentDevice().toString()), 'cpu');
});
