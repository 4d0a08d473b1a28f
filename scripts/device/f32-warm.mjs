// Device-round helper (not product code): compiles the float32 attention kernels (cp.async tiles
// the rule, the tests and the sdpa sweep use) and the SIMT GEMM kernels in parallel child processes
// into Kiln's disk cubin cache, so the timed runs and tests load cubins instead of waiting on
// dozens of sequential NVRTC compiles (R1's test step ran out of time compiling).
//   node scripts/device/f32-warm.mjs [procs]
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { generateFlashF32Async } from '../../dist/src/kernels/cuda/codegen/flash-f32-async.js';
import { sgemmName, sgemmReduceSource, sgemmSource, SGEMM_REDUCE_NAME } from '../../dist/src/kernels/cuda/codegen/sgemm-simt.js';
import { cubinFor } from '../../dist/src/runtime/cuda/kernel-cache.js';

const jobs = [];
const f32 = (spec, tile) => jobs.push(() => generateFlashF32Async(spec, tile));
const specs = [];
for (const d of [64, 128, 80, 256, 40]) for (const causal of [true, false]) specs.push({ dtype: 'float32', d, causal, mask: 'none' });
for (const d of [64, 128]) specs.push({ dtype: 'float32', d, causal: false, mask: 'bool' }, { dtype: 'float32', d, causal: false, mask: 'add', maskDtype: 'float32' });
// The rule's tile for grids that do not fill the GPU (every test shape), and for filling ones.
for (const s of specs) f32(s, { rg: 8, rm: 2, tx: 16, bn: s.d > 128 ? 32 : 64 });
for (const rm of [1, 2, 4]) f32({ dtype: 'float32', d: 128, causal: true, mask: 'none' }, { rm, tx: 8, bn: 32 });
// Forced tiles of the 'every tile' test and the sweep.
const forced = [
  { rm: 1, tx: 16, bn: 64 }, { rm: 1, tx: 8, bn: 64 }, { rm: 2, tx: 8, bn: 32 }, { rm: 4, tx: 8, bn: 32 }, { rm: 2, tx: 16, bn: 32 },
  { rg: 4, rm: 4, tx: 16, bn: 64 }, { rg: 8, rm: 2, tx: 16, bn: 64 }, { rg: 8, rm: 2, tx: 8, bn: 32 },
  { rg: 4, rm: 4, tx: 16, bn: 32 }, { rg: 8, rm: 2, tx: 8, bn: 64 }, { rg: 8, rm: 4, tx: 16, bn: 32 },
  { rg: 4, rm: 4, tx: 16, bn: 32, ks: 2 }, { rg: 8, rm: 2, tx: 16, bn: 32, ks: 2 }, { rm: 1, tx: 16, bn: 32, ks: 2 },
];
const testSpecs = [
  { dtype: 'float32', d: 128, causal: true, mask: 'none' },
  { dtype: 'float32', d: 64, causal: false, mask: 'none' },
  { dtype: 'float32', d: 64, causal: false, mask: 'bool' },
];
for (const s of testSpecs) for (const t of forced) f32(s, t);
for (const t of [{ bm: 128, bn: 128, bk: 16 }, { bm: 64, bn: 64, bk: 16 }]) jobs.push(() => ({ source: sgemmSource(t), name: sgemmName(t) }));
jobs.push(() => ({ source: sgemmReduceSource(), name: SGEMM_REDUCE_NAME }));

const [, , role, a, b] = process.argv;
if (role === 'child') {
  for (let i = Number(a); i < jobs.length; i += Number(b)) {
    const g = jobs[i]();
    cubinFor({ source: g.source, name: g.name, arch: 'sm_90', options: [] });
  }
} else {
  const n = Math.min(Number(role ?? 14), jobs.length);
  const t0 = Date.now();
  const kids = Array.from({ length: n }, (_, i) => fork(fileURLToPath(import.meta.url), ['child', String(i), String(n)]));
  let failed = 0;
  await Promise.all(kids.map((k) => new Promise((res) => k.on('exit', (code) => { if (code !== 0) failed++; res(); }))));
  console.log(`warm: ${jobs.length} kernels in ${n} processes, ${((Date.now() - t0) / 1000).toFixed(1)} s${failed ? `, ${failed} failed` : ''}`);
}
