/**
 * The unscoped eager loop of issue #18 item 5 (`y = matmul(w, w).relu()`, results dropped without
 * dispose) with pressure-triggered collection on (KILN_GC_THRESHOLD_MB, default 128) and off (0):
 * wall time, peak and final allocated tensor memory, collection passes. Each mode runs in its own
 * process so the leaked tensors of one cannot shape the other.
 *
 *   node dist/bench/gc-pressure.js [size=512] [steps=2000] [thresholdMiB=128]
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { memoryPressureCollections } from '../src/runtime/memory-pressure.js';

const [size = 512, steps = 2000, threshold = 128] = process.argv.slice(2, 5).map(Number);
const child = process.env.GC_PRESSURE_CHILD === '1';

if (child) {
  const w = kiln.randn([size, size]);
  kiln.resetPeakMemoryStats('cpu');
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) kiln.matmul(w, w).relu();
  const ms = performance.now() - t0;
  const s = kiln.memoryStats('cpu');
  const mib = (n: number): string => (n / 2 ** 20).toFixed(1);
  console.log(
    `KILN_GC_THRESHOLD_MB=${process.env.KILN_GC_THRESHOLD_MB}: ${ms.toFixed(0)} ms (${(ms / steps).toFixed(2)} ms/step), ` +
      `peak ${mib(s.peakAllocatedBytes)} MiB, end ${mib(s.allocatedBytes)} MiB, ${memoryPressureCollections()} collections`,
  );
} else {
  console.log(`unscoped matmul(w, w).relu() loop: [${size}, ${size}] float32 cpu, ${steps} steps`);
  for (const t of [threshold, 0]) {
    const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), String(size), String(steps)], {
      env: { ...process.env, GC_PRESSURE_CHILD: '1', KILN_GC_THRESHOLD_MB: String(t) },
      encoding: 'utf8',
    });
    process.stdout.write(out);
  }
}
