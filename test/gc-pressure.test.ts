/**
 * Memory under pressure from tensors nobody disposed (issue #18 item 5): an unscoped synchronous
 * loop stays within KILN_GC_THRESHOLD_MB of tensor memory because the allocator collects unreachable
 * tensors itself (runtime/memory-pressure.ts, tensor/collect.ts); with the option at 0 the same loop
 * grows, which shows the setting below really leaks without the mechanism.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { CachingAllocator } from '../src/runtime/caching-allocator.js';
import { setOption } from '../src/runtime/config.js';
import { forceGc, memoryPressureCollections, onMemoryPressure } from '../src/runtime/memory-pressure.js';

const MiB = 1 << 20;
const N = 256; // a [256, 256] float32 tensor is 256 KiB; each step makes two (matmul, relu)

function loop(steps: number, w: kiln.Tensor, keep?: kiln.Tensor[]): void {
  for (let i = 0; i < steps; i++) {
    const y = kiln.matmul(w, w).relu();
    keep?.push(y);
  }
}

test('Node gives the runtime a forced GC without --expose-gc', () => {
  assert.equal(forceGc(), true);
});

test('an unscoped loop of matmul().relu() stays within the threshold', () => {
  setOption('KILN_GC_THRESHOLD_MB', 8);
  try {
    const w = kiln.randn([N, N]);
    const before = kiln.memoryStats('cpu');
    kiln.resetPeakMemoryStats('cpu');
    const passes = memoryPressureCollections();
    loop(300, w); // 150 MiB of tensors without collection
    const after = kiln.memoryStats('cpu');
    const grew = after.peakAllocatedBytes - before.allocatedBytes;
    // The threshold, plus the allocation that crosses it and the few tensors alive at a pass.
    assert.ok(grew <= 8 * MiB + 8 * N * N * 4, `peak grew ${(grew / MiB).toFixed(1)} MiB over a threshold of 8 MiB`);
    assert.ok(memoryPressureCollections() - passes >= 10, 'the allocator collected repeatedly');
    w.dispose();
  } finally {
    setOption('KILN_GC_THRESHOLD_MB', undefined);
  }
});

test('collection frees only unreachable tensors: kept results stay intact', () => {
  setOption('KILN_GC_THRESHOLD_MB', 4);
  try {
    const w = kiln.eye(N).mul(2);
    const keep: kiln.Tensor[] = [];
    const passes = memoryPressureCollections();
    loop(60, w, keep); // 60 kept results, 60 dropped matmul outputs: 30 MiB
    assert.ok(memoryPressureCollections() > passes, 'a collection ran while tensors were kept');
    // Absolute, not a difference: earlier tests' garbage may be freed by the same passes.
    assert.ok(kiln.memoryStats('cpu').allocatedBytes >= keep.length * N * N * 4, 'the kept tensors are still allocated');
    for (const y of keep) assert.equal(y.sum().item(), 4 * N);
    for (const y of keep) y.dispose();
    w.dispose();
  } finally {
    setOption('KILN_GC_THRESHOLD_MB', undefined);
  }
});

test('out of memory on the cpu allocator collects before retrying', () => {
  let pressured = 0;
  onMemoryPressure(() => pressured++);
  let failures = 1;
  const alloc = new CachingAllocator('cpu', 0, {
    alloc: (capacity) => {
      if (failures-- > 0) throw new Error('simulated exhaustion');
      return new ArrayBuffer(capacity);
    },
    free: () => {},
    zero: () => {},
  });
  const b = alloc.allocate(1024);
  assert.equal(b.nbytes, 1024);
  assert.equal(pressured, 1, 'the reclaim hooks ran once before the retry');
});

test('KILN_GC_THRESHOLD_MB=0 turns the mechanism off (and the loop then grows)', () => {
  setOption('KILN_GC_THRESHOLD_MB', 0);
  try {
    const w = kiln.randn([N, N]);
    const before = kiln.memoryStats('cpu').allocatedBytes;
    const passes = memoryPressureCollections();
    loop(60, w);
    assert.equal(memoryPressureCollections(), passes, 'no collection');
    // Finalizers cannot run inside a synchronous loop: every dropped result is still counted.
    assert.ok(kiln.memoryStats('cpu').allocatedBytes - before >= 120 * N * N * 4, 'the dropped tensors are still allocated');
  } finally {
    setOption('KILN_GC_THRESHOLD_MB', undefined);
  }
});
