// Graph statistics of the compiled elementwise-4096 workload on cuda (which path the first-call
// decision took, and the timings it saw), for the session note. node scripts/device/ew-stats.mjs
import * as kiln from '../../dist/src/index.js';
import { getWorkload } from '../../dist/src/bench/workloads.js';
for (const dtype of ['float32', 'bfloat16']) {
  const w = getWorkload('elementwise-4096').build({ size: 'full', device: 'cuda', dtype });
  const cf = kiln.compile(w.forward, { name: `ew-${dtype}` });
  kiln.noGrad(() => cf(...w.inputs));
  const times = [];
  for (let i = 0; i < 30; i++) {
    const a = new kiln.Event('cuda');
    const b = new kiln.Event('cuda');
    kiln.scope(() => {
      a.record();
      kiln.noGrad(() => cf(...w.inputs));
      b.record();
      b.synchronize();
    });
    times.push(a.elapsedTime(b));
  }
  const p = cf.programs().inference[0];
  times.sort((x, y) => x - y);
  console.log(dtype, 'median ms', times[15].toFixed(4), JSON.stringify(p.stats));
}
