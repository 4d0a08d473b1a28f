// Device-round helper (not product code): compiles every fused-attention kernel variant the tests
// and the sdpa bench use, in parallel child processes, into Kiln's disk cubin cache, so the timed
// runs afterwards load cubins instead of waiting on ~40 sequential NVRTC compiles.
//   node scripts/device/attn-warm.mjs [procs]
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { generateFlashTc } from '../../dist/src/kernels/cuda/codegen/flash-tc.js';
import { generateFlashF32 } from '../../dist/src/kernels/cuda/codegen/flash-f32.js';
import { cubinFor } from '../../dist/src/runtime/cuda/kernel-cache.js';

const specs = [];
for (const dtype of ['bfloat16', 'float16', 'float32']) {
  for (const d of [64, 128, 80, 256, 40]) for (const causal of [true, false]) specs.push({ dtype, d, causal, mask: 'none' });
  for (const d of [64, 128]) {
    specs.push({ dtype, d, causal: false, mask: 'bool' });
    specs.push({ dtype, d, causal: false, mask: 'add', maskDtype: dtype });
  }
}
const sweep = { 64: [[4, 1, 64], [8, 1, 64], [4, 1, 128]], 128: [[4, 1, 64], [4, 1, 32], [8, 1, 32], [4, 1, 128]] };
for (const [d, cfgs] of Object.entries(sweep)) for (const [nw, mi, bn] of cfgs) specs.push({ dtype: 'bfloat16', d: Number(d), causal: true, mask: 'none', cfg: { nw, mi, bn } });
const [, , role, a, b] = process.argv;
if (role === 'child') {
  for (let i = Number(a); i < specs.length; i += Number(b)) {
    const s = specs[i];
    const g = s.dtype === 'float32' ? generateFlashF32(s) : generateFlashTc(s, s.cfg);
    cubinFor({ source: g.source, name: g.name, arch: 'sm_90', options: [] });
  }
} else {
  const n = Math.min(Number(role ?? 14), specs.length);
  const t0 = Date.now();
  const kids = Array.from({ length: n }, (_, i) => fork(fileURLToPath(import.meta.url), ['child', String(i), String(n)]));
  let failed = 0;
  await Promise.all(kids.map((k) => new Promise((res) => k.on('exit', (code) => { if (code !== 0) failed++; res(); }))));
  console.log(`warm: ${specs.length} attention kernels in ${n} processes, ${((Date.now() - t0) / 1000).toFixed(1)} s${failed ? `, ${failed} failed` : ''}`);
}
