/** Child process for the cross-process compile cache test: compiles and runs one function, reports (with the compiled function's counters). */
import * as kiln from '../../src/index.js';
import { compilePoolStats } from '../../src/runtime/pool/index.js';
import { getDiskCache } from '../../src/runtime/cache/index.js';

const f = (x: kiln.Tensor) => kiln.softmax(kiln.add(kiln.mul(x, 1.5), kiln.sigmoid(x)), -1);
const cf = kiln.compile(f);
const g = new kiln.Generator(5);
const x = kiln.randn([4, 16], { generator: g });
const t0 = performance.now();
const y = kiln.noGrad(() => cf(x));
const firstCallMs = performance.now() - t0;
const pool = compilePoolStats();
console.log(JSON.stringify({ sum: kiln.sum(y).item(), first: y.toFlatArray()[0], poolTasks: pool.tasksCompleted, cache: getDiskCache().stats(), firstCallMs, counters: cf.counters }));
