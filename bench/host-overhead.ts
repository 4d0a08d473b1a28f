/**
 * Host cost of a steady-state compiled call: a tiny compiled function called many times on cpu,
 * us per call for (a) the compiled call, (b) its backend program run directly (the floor the
 * compile.ts layer adds to), and (c) eager. The difference (a) - (b) is what kiln.compile's call
 * path (guards, lookups, input gathering) costs per call. With --profile the compiled loop runs
 * under the inspector and the top self-time functions are printed.
 *
 *   node dist/bench/host-overhead.js [--calls 10000] [--device cpu] [--profile out.cpuprofile]
 *                                    [--workload mlp-64x512 --size cpu]   (profile that workload instead)
 */
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import * as kiln from '../src/index.js';
import { getWorkload } from '../src/bench/workloads.js';
import { Tensor } from '../src/tensor/tensor.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const calls = Number(arg('calls', '10000'));
const device = arg('device', 'cpu');
const profileOut = process.argv.includes('--profile') ? arg('profile', 'host.cpuprofile') : undefined;
// Batches of calls timed as one (a single call is ~10 us: below the timer's useful resolution);
// the median batch is reported, so a GC pause or another process's burst lands in one batch only.
const BATCH = 500;

interface Case {
  readonly name: string;
  readonly fn: (...a: never[]) => unknown;
  readonly inputs: readonly Tensor[];
  /** The program reads exactly `inputs` (nothing lifted). */
  readonly direct: boolean;
}

function cases(): Case[] {
  const x = kiln.randn([8], { device });
  const tiny: Case = { name: 'tiny x*2+1 [8]', fn: ((t: Tensor) => t.mul(2).add(1)) as (...a: never[]) => unknown, inputs: [x], direct: true };
  const w = getWorkload('mlp-64x512').build({ size: 'tiny', device, dtype: 'float32' });
  const mlp: Case = { name: 'mlp tiny [4,8]', fn: w.forward as (...a: never[]) => unknown, inputs: w.inputs, direct: false };
  return [tiny, mlp];
}

/** us per call of each runner; batches of the runners alternate, so machine load hits all alike. */
function usPerCall(runs: readonly (() => void)[]): number[] {
  const batches = runs.map(() => [] as number[]);
  for (let done = 0; done < calls; done += BATCH) {
    runs.forEach((run, r) => {
      const t0 = performance.now();
      for (let i = 0; i < BATCH; i++) run();
      batches[r]!.push(((performance.now() - t0) * 1000) / BATCH);
    });
  }
  return batches.map((b) => b.sort((x, y) => x - y)[b.length >> 1]!);
}

const dispose = (out: unknown): void => {
  if (out instanceof Tensor) out.dispose();
  else if (Array.isArray(out)) out.forEach(dispose);
};

const rows: string[] = [];
for (const c of cases()) {
  const runner = (fastCall: string): (() => void) => {
    // KILN_COMPILE_FAST_CALL is read at compile(): '0' is the full guard check on every call.
    process.env['KILN_COMPILE_FAST_CALL'] = fastCall;
    const cf = kiln.compile(c.fn, { name: c.name });
    kiln.noGrad(() => dispose(cf(...(c.inputs as never[]))));
    return () => kiln.noGrad(() => dispose(cf(...(c.inputs as never[]))));
  };
  const fastOn = runner('1');
  const fastOff = runner('0');
  const cf = kiln.compile(c.fn, { name: c.name });
  kiln.noGrad(() => dispose(cf(...(c.inputs as never[]))));
  const program = cf.programs().inference[0]!;
  // The floor: the backend program run directly. Only where the program reads exactly the
  // arguments (no lifted parameters, whose order in the graph this harness does not know).
  const direct = c.direct ? (): void => kiln.noGrad(() => dispose(program.run(c.inputs))) : (): void => undefined;
  const eager = (): void => kiln.noGrad(() => dispose(c.fn(...(c.inputs as never[]))));
  const runs = [fastOn, fastOff, direct, eager];
  for (const f of runs) for (let i = 0; i < 500; i++) f(); // warm the JIT
  const [on, off, floor, eagerUs] = usPerCall(runs).map((t) => t.toFixed(2).padStart(7));
  rows.push(`${c.name.padEnd(16)} compiled: fast path ${on} us, full guards ${off} us;  program.run ${c.direct ? floor : '      -'} us;  eager ${eagerUs} us`);
}
console.log(rows.join('\n'));

if (profileOut) {
  process.env['KILN_COMPILE_FAST_CALL'] = '1';
  const wName = arg('workload', '');
  const built = wName ? getWorkload(wName).build({ size: arg('size', 'cpu') as 'cpu', device, dtype: 'float32' }) : undefined;
  const c: Case = built ? { name: `${wName} ${arg('size', 'cpu')}`, fn: built.forward as (...a: never[]) => unknown, inputs: built.inputs, direct: false } : cases()[0]!;
  const cf = kiln.compile(c.fn, { name: 'profiled' });
  kiln.noGrad(() => dispose(cf(...(c.inputs as never[]))));
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
  const profiledCalls = built ? calls : calls * 5;
  for (let i = 0; i < profiledCalls; i++) kiln.noGrad(() => dispose(cf(...(c.inputs as never[]))));
  const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: { nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[]; samples: number[]; timeDeltas: number[] } };
  fs.writeFileSync(profileOut, JSON.stringify(profile));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const f = byId.get(id)!.callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/dist\//, '')}:${f.lineNumber + 1}`;
    const dt = (profile.timeDeltas[i] ?? 0) / 1000;
    total += dt;
    self.set(key, (self.get(key) ?? 0) + dt);
  });
  console.log(`self time of ${profiledCalls} calls of '${c.name}' (${total.toFixed(0)} ms sampled):`);
  for (const [k, ms] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${((100 * ms) / total).toFixed(1).padStart(6)} %  ${k}`);
}
