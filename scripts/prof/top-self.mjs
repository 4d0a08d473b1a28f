/**
 * Self time per function of a V8 .cpuprofile (node --cpu-prof), heaviest first: where a host-bound
 * loop (a decode step, a compile) spends its time, printed as text so a device run can send back a
 * table instead of the profile.
 *   node scripts/prof/top-self.mjs FILE.cpuprofile [N]
 */
import fs from 'node:fs';
const f = process.argv[2];
const p = JSON.parse(fs.readFileSync(f, 'utf8'));
const self = new Map(); const byId = new Map();
for (const n of p.nodes) byId.set(n.id, n);
const dt = p.timeDeltas; const total = dt.reduce((a, b) => a + b, 0);
const cnt = new Map();
p.samples.forEach((id, i) => cnt.set(id, (cnt.get(id) ?? 0) + (dt[i] ?? 0)));
for (const [id, t] of cnt) { const n = byId.get(id); const k = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber}`; self.set(k, (self.get(k) ?? 0) + t); }
console.log('total ms', (total / 1000).toFixed(0));
[...self].sort((a, b) => b[1] - a[1]).slice(0, Number(process.argv[3] ?? 25)).forEach(([k, t]) => console.log((t / 1000).toFixed(1).padStart(9), k));
