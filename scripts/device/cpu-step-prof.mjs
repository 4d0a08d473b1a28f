// Where a cpu eager decode step's main-thread time goes (issue #17, session 19): Qwen3-0.6B with
// seeded random weights on the serve engine, warm steps profiled with the V8 sampling profiler
// (node:inspector), self time grouped by source file; every native call's time lands on one
// native entry (the profiler cannot see inside koffi calls), so "native" is the GEMVs, attention
// and row kernels together and the rest is the JavaScript that issues them.
//   node scripts/device/cpu-step-prof.mjs [bfloat16|float32] [steps] [out.json]
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import * as kiln from '../../dist/src/index.js';

const dtype = process.argv[2] ?? 'bfloat16';
const steps = Number(process.argv[3] ?? 30);
const config = kiln.models.QWEN3_0_6B;
const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 0, dtype, device: 'cpu' });
model.eval();
const engine = new kiln.serve.Engine(model, { numBlocks: 64, maxNumSeqs: 1, decode: 'eager', prefixCaching: false });
engine.addRequest(Array.from({ length: 16 }, (_, i) => (i * 7919 + 13) % config.vocabSize), { maxNewTokens: steps + 64, ignoreEos: true });
for (let i = 0; i < 8; i++) engine.step();
const s = new Session();
s.connect();
await s.post('Profiler.enable');
await s.post('Profiler.setSamplingInterval', { interval: 50 });
await s.post('Profiler.start');
const ms = [];
for (let i = 0; i < steps; i++) {
  const t0 = performance.now();
  engine.step();
  ms.push(performance.now() - t0);
}
const { profile } = await s.post('Profiler.stop');
engine.dispose();
const dt = new Map();
for (let i = 0; i < profile.samples.length; i++) dt.set(profile.samples[i], (dt.get(profile.samples[i]) ?? 0) + (profile.timeDeltas[i] ?? 0));
const files = new Map();
let total = 0;
let native = 0;
for (const n of profile.nodes) {
  const t = dt.get(n.id) ?? 0;
  total += t;
  const u = n.callFrame.url;
  if (!u && /^kiln_/.test(n.callFrame.functionName)) native += t;
  const k = u ? u.replace(/.*dist\/src\//, '') : n.callFrame.functionName || '(anon)';
  files.set(k, (files.get(k) ?? 0) + t);
}
ms.sort((a, b) => a - b);
const perStep = (us) => +(us / 1000 / steps).toFixed(3);
const out = { dtype, steps, step_median_ms: +ms[ms.length >> 1].toFixed(3), profiled_ms_per_step: perStep(total), native_ms_per_step: perStep(native), other_ms_per_step: perStep(total - native),
  top: [...files.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30).map(([k, t]) => ({ where: k, ms_per_step: perStep(t) })) };
if (process.argv[4]) fs.writeFileSync(process.argv[4], JSON.stringify(out, null, 1));
console.log(`${dtype}: step median ${out.step_median_ms} ms; main thread per step: native ${out.native_ms_per_step} ms, other ${out.other_ms_per_step} ms`);
for (const r of out.top.slice(0, 14)) console.log(`  ${String(r.ms_per_step).padStart(7)} ms  ${r.where}`);
