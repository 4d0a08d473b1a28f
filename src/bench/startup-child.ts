/**
 * One compiled-startup measurement in a fresh process (spawned by startup.ts): builds a workload,
 * then times `kiln.compile(forward)` plus its first call (trace, passes, program from the disk
 * cache or lowering + codegen + worker-pool validation, one run) up to the synchronised result.
 * Module loading and the workload's build are before the clock starts (reported separately).
 * Then times a second call (the run alone). Prints one JSON line: times (wall, and process CPU for
 * the first call), the compiled function's counters after the first call, the pool's and the disk
 * cache's statistics.
 *
 * Usage: node startup-child.js <workload> <size> <device> <dtype> <seed>
 */
const tImport = performance.now();
const kiln = await import('../index.js');
const { getWorkload } = await import('./workloads.js');
const { compilePoolStats } = await import('../runtime/pool/index.js');
const { getDiskCache } = await import('../runtime/cache/index.js');
const { summarize } = await import('./harness.js');
const importS = (performance.now() - tImport) / 1000;

const [name, size, device, dtype, seed] = process.argv.slice(2);
if (!name || !size || !device || !dtype || !seed) throw new Error('startup-child: usage: <workload> <size> <device> <dtype> <seed>');
const w = getWorkload(name).build({ size: size as 'tiny', device, dtype: dtype as 'float32', seed: Number(seed) });
// CPU time alongside wall time: on a shared machine wall time includes waiting for a core.
const cpuS = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const c0 = cpuS();
const t0 = performance.now();
const cf = kiln.compile(w.forward, { name: w.name });
const y = kiln.noGrad(() => cf(...w.inputs));
kiln.synchronize(w.device);
const firstCallS = (performance.now() - t0) / 1000;
const firstCallCpuS = cpuS() - c0;
const out = summarize(y);
const counters = { ...cf.counters };
// A second call: the run alone, so first_call_s - second_call_s is what compiling (and first-run JIT) cost.
const t1 = performance.now();
kiln.noGrad(() => kiln.scope(() => void cf(...w.inputs)));
kiln.synchronize(w.device);
const secondCallS = (performance.now() - t1) / 1000;
const pool = compilePoolStats();
console.log(
  JSON.stringify({
    workload: w.name,
    import_s: importS,
    first_call_s: firstCallS,
    first_call_cpu_s: firstCallCpuS,
    second_call_s: secondCallS,
    counters,
    pool: { size: pool.size, workers: pool.workers, tasks: pool.tasksCompleted },
    disk: getDiskCache().stats(),
    output: { sum: out.sum, abs_sum: out.absSum, finite: out.finite },
  }),
);
// The pool's idle workers are unref'd, but exit now rather than wait for anything else pending.
process.exit(0);
