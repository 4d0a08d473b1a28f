// Per-call cost of the native cpu GEMV by weight size (issue #17, session 19): the same bytes
// (240 MB of bfloat16 weights, distinct tensors so each call streams from DRAM) as 120 calls of
// 2 MB, 60 of 4 MB, 30 of 8 MB and 10 of 24 MB, alternating, median of reps; the difference
// between call sizes at equal bytes is the fixed cost of a call (JS dispatch + pool job + ramp).
// ITEMS=64,16 alternates KILN_CPU_GEMV_ITEM_KIB (the GEMV's work item) in the same rotation.
//   node scripts/device/gemv-sizes.mjs [reps] [threads]
import * as kiln from '../../dist/src/index.js';
import { setOption } from '../../dist/src/runtime/config.js';
const reps = Number(process.argv[2] ?? 9);
if (process.argv[3]) process.env.KILN_NUM_THREADS = process.argv[3];
const dt = 'bfloat16';
const x = kiln.randn([1, 1024]).to(dt);
const items = (process.env.ITEMS ?? '64').split(',').map(Number);
const shapes = [[2, 1024], [4, 2048], [8, 4096], [24, 12288]].map(([mb, n]) => ({ mb, ws: Array.from({ length: 240 / mb }, () => kiln.empty([n, 1024], { dtype: dt }).fill_(0.01)) }));
const sets = items.flatMap((kib) => shapes.map((sh) => ({ ...sh, kib, ms: [] })));
for (let r = 0; r < reps + 1; r++)
  for (const s of sets) {
    setOption('KILN_CPU_GEMV_ITEM_KIB', s.kib);
    const t0 = performance.now();
    for (const w of s.ws) kiln.nn.functional.linear(x, w).dispose();
    if (r > 0) s.ms.push(performance.now() - t0);
  }
const med = (a) => [...a].sort((p, q) => p - q)[a.length >> 1];
for (const s of sets) {
  const m = med(s.ms);
  console.log(`item ${String(s.kib).padStart(3)} KiB  ${String(s.mb).padStart(2)} MB x ${String(s.ws.length).padStart(3)}: ${m.toFixed(2)} ms, ${(240 * 1.048576 / m).toFixed(1)} GB/s, ${(1000 * m / s.ws.length).toFixed(1)} us a call`);
}
