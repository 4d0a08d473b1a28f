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
import { forceGc, memoryPressureCollections, onMemoryPressure, PressureTrigger } from '../src/runtime/memory-pressure.js';

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

test('live growth backs off: gigabytes that stay alive cost a few passes, a dropping loop goes back to the threshold', () => {
  // A trigger over a simulated allocator: `live` bytes stay, `garbage` bytes are what a pass frees
  // (this test's hook frees them; the hooks of the tensor layer run too and find nothing of ours).
  let live = 0;
  let garbage = 0;
  onMemoryPressure(() => {
    garbage = 0;
  });
  const trigger = new PressureTrigger();
  const allocated = (): number => live + garbage;
  setOption('KILN_GC_THRESHOLD_MB', 1);
  try {
    // 100 MiB that stays alive (weights, a KV cache), 64 KiB at a time: one pass per MiB would be 100.
    let passes = memoryPressureCollections();
    for (let i = 0; i < 1600; i++) {
      live += 64 * 1024;
      trigger.grew(allocated);
    }
    const livePasses = memoryPressureCollections() - passes;
    assert.ok(livePasses >= 3 && livePasses <= 8, `${livePasses} passes for 100 MiB of live growth (steps 1, 2, 4, ... MiB)`);
    // Then a loop that drops everything it makes: after the first pass (which frees it all) the
    // step is the threshold again, so garbage never grows past 1 MiB plus one allocation.
    passes = memoryPressureCollections();
    let firstPassSeen = false;
    let worst = 0;
    for (let i = 0; i < 4000; i++) {
      const before = memoryPressureCollections();
      garbage += 64 * 1024;
      if (firstPassSeen) worst = Math.max(worst, garbage);
      trigger.grew(allocated);
      if (memoryPressureCollections() > before) firstPassSeen = true;
    }
    assert.ok(firstPassSeen);
    assert.ok(memoryPressureCollections() - passes >= 100, 'the dropping loop is collected every MiB again');
    assert.ok(worst <= MiB + 64 * 1024, `garbage reached ${(worst / MiB).toFixed(2)} MiB between passes`);
  } finally {
    setOption('KILN_GC_THRESHOLD_MB', undefined);
  }
});
