// Host cost of a steady-state compiled call on cuda, fast path on vs off (KILN_COMPILE_FAST_CALL,
// read at compile()): per workload and dtype, the median device time of one call between two
// events (as scripts/device/ew-stats.mjs), and the wall time per call of a loop of calls with one
// synchronize at the end (what a benchmark loop sees). Both compiled functions share one program
// cache entry on disk, and their timed batches alternate.   node scripts/device/host-ew.mjs
import * as kiln from '../../dist/src/index.js';
import { getWorkload } from '../../dist/src/bench/workloads.js';

const LOOP = 200;
const rows = [];
for (const name of ['elementwise-4096', 'elementwise-1024', 'mlp-64x512']) {
  for (const dtype of ['float32', 'bfloat16']) {
    const w = getWorkload(name).build({ size: 'full', device: 'cuda', dtype });
    const fns = {};
    for (const fast of ['1', '0']) {
      process.env.KILN_COMPILE_FAST_CALL = fast;
      const cf = kiln.compile(w.forward, { name: `${name}-${dtype}-${fast}` });
      kiln.noGrad(() => kiln.scope(() => void cf(...w.inputs)));
      fns[fast] = cf;
    }
    const ev = { '1': [], '0': [] };
    const loop = { '1': [], '0': [] };
    for (let rep = 0; rep < 7; rep++) {
      for (const fast of ['1', '0']) {
        const cf = fns[fast];
        for (let i = 0; i < 5; i++) {
          const a = new kiln.Event('cuda');
          const b = new kiln.Event('cuda');
          kiln.scope(() => {
            a.record();
            kiln.noGrad(() => cf(...w.inputs));
            b.record();
            b.synchronize();
          });
          ev[fast].push(a.elapsedTime(b));
        }
        kiln.synchronize('cuda');
        const t0 = performance.now();
        for (let i = 0; i < LOOP; i++) kiln.scope(() => void kiln.noGrad(() => cf(...w.inputs)));
        kiln.synchronize('cuda');
        loop[fast].push((performance.now() - t0) / LOOP);
      }
    }
    const med = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
    const st = fns['1'].programs().inference[0]?.stats ?? {};
    rows.push({
      name,
      dtype,
      evOn: med(ev['1']),
      evOff: med(ev['0']),
      loopOn: med(loop['1']),
      loopOff: med(loop['0']),
      fastHits: fns['1'].counters.fastHits,
      graph: st.lastDecision ? `${st.replays} replays, decision plain ${st.lastDecision.plainMs.toFixed(4)} graph ${st.lastDecision.graphMs.toFixed(4)}` : `replays ${st.replays ?? '-'}`,
    });
    const r = rows[rows.length - 1];
    console.log(`${name.padEnd(17)} ${dtype.padEnd(8)} event ms/call fast ${r.evOn.toFixed(4)} full ${r.evOff.toFixed(4)} | loop ms/call fast ${r.loopOn.toFixed(4)} full ${r.loopOff.toFixed(4)} | fastHits ${r.fastHits} | ${r.graph}`);
  }
}
