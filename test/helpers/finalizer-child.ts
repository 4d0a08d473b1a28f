/** Child process for the FinalizationRegistry tests (needs --expose-gc). */
import * as kiln from '../../src/index.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');

async function collectUntil(target: number): Promise<number> {
  for (let i = 0; i < 20 && kiln.memoryStats().allocatedBytes > target; i++) {
    gc!();
    await new Promise((r) => setTimeout(r, 10));
  }
  return kiln.memoryStats().allocatedBytes;
}

// Dropped tensors only.
const before = kiln.memoryStats().allocatedBytes;
(() => {
  for (let i = 0; i < 4; i++) kiln.zeros([1024, 256]);
})();
const during = kiln.memoryStats().allocatedBytes;
const after = await collectUntil(before);

// One synchronous job that makes more tensors than the registration queue holds (collect.ts),
// disposing some, dropping others, and re-pointing some with setData_ while they are still queued
// and after they were registered: each storage must come back exactly once.
(() => {
  const kept: kiln.Tensor[] = [];
  for (let i = 0; i < 300; i++) {
    const t = kiln.zeros([64, 64]);
    if (i % 50 === 7) {
      const other = kiln.ones([32]);
      t.setData_(other);
      other.dispose();
    }
    if (i % 3 === 0) t.dispose();
    else if (i % 3 === 1) kept.push(t);
  }
  // kept[0] was registered when the queue filled; re-point it now.
  const other = kiln.ones([16]);
  kept[0]!.setData_(other);
  other.dispose();
  kept.length = 0;
})();
const mixed = await collectUntil(before);

console.log(JSON.stringify({ before, during, after, mixed }));
