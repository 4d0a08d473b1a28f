/**
 * A CPU profile of one compiled start (kiln.compile + first call up to the synchronised result),
 * the part `kiln bench --startup` times: the workload is built first, outside the profile, so the
 * profile shows only what a warm (or cold) start pays. Run it twice with one KILN_CACHE_DIR for a
 * warm start. Writes a .cpuprofile (Chrome DevTools format) and prints the top self-time functions.
 *
 *   node dist/bench/startup-profile.js <workload> <device> <dtype> <out.cpuprofile> [--size full]
 */
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import * as kiln from '../src/index.js';
import { getWorkload } from '../src/bench/workloads.js';
import type { DType } from '../src/tensor/dtype.js';
import { gemmTuneStats } from '../src/runtime/cuda/gemm-tune-store.js';

interface ProfileNode {
  id: number;
  children?: number[];
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [name = 'qwen3-0.6b-forward', device = 'cuda', dtype = 'bfloat16', out = 'startup.cpuprofile'] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const sizeFlag = process.argv.indexOf('--size');
const size = (sizeFlag >= 0 ? process.argv[sizeFlag + 1] : 'full') as 'full';
const w = getWorkload(name).build({ size, device, dtype: dtype as DType });
kiln.synchronize(w.device);

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 200 });
await session.post('Profiler.start');
const t0 = performance.now();
const cf = kiln.compile(w.forward, { name: w.name });
kiln.noGrad(() => kiln.scope(() => void cf(...w.inputs)));
kiln.synchronize(w.device);
const wallS = (performance.now() - t0) / 1000;
const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: Profile };
fs.writeFileSync(out, JSON.stringify(profile));

// Self time per function (sampled), top 30.
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<string, number>();
profile.samples.forEach((id, i) => {
  const n = byId.get(id)!;
  const f = n.callFrame;
  const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/dist\//, '')}:${f.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
});
// Inclusive time per function (a function's samples plus its callees'; recursion counted once per stack).
const selfById = new Map<number, number>();
profile.samples.forEach((id, i) => selfById.set(id, (selfById.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000));
const keyOf = (n: ProfileNode): string => `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*\/dist\//, '')}:${n.callFrame.lineNumber + 1}`;
const inclusive = new Map<string, number>();
const walk = (id: number, onStack: Set<string>): number => {
  const n = byId.get(id)!;
  let t = selfById.get(id) ?? 0;
  const k = keyOf(n);
  const fresh = !onStack.has(k);
  if (fresh) onStack.add(k);
  for (const c of n.children ?? []) t += walk(c, onStack);
  if (fresh) {
    onStack.delete(k);
    inclusive.set(k, (inclusive.get(k) ?? 0) + t);
  }
  return t;
};
walk(profile.nodes[0]!.id, new Set());
const graphStats = (cf.programs().inference[0] as { stats?: { decisionsLoaded?: number; lastDecision?: unknown } } | undefined)?.stats;
console.log(JSON.stringify({ workload: name, device, dtype, wall_s: wallS, counters: cf.counters, gemmTune: gemmTuneStats, graphDecision: graphStats ? { loaded: graphStats.decisionsLoaded, last: graphStats.lastDecision } : null }));
console.log('self time:');
for (const [k, ms] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${ms.toFixed(1).padStart(8)} ms  ${k}`);
console.log('inclusive time (src/ functions):');
for (const [k, ms] of [...inclusive.entries()].filter(([k]) => k.includes('src/')).sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`${ms.toFixed(1).padStart(8)} ms  ${k}`);
