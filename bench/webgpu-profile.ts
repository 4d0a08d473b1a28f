/**
 * Where a compiled workload's device time goes on webgpu (issue #20: which kernels keep
 * qwen3-0.6b-forward and conv-stack beyond 2x of Kiln cuda). The webgpu counterpart of
 * cuda-profile.ts: the compiled program runs step by step with a kiln.Event (a timestamp query)
 * after every step, and the time between consecutive stamps is summed per step label (a kernel's
 * ops, or an extern's op with its shapes: compile/codegen/step-runner.ts's stepLabel).
 *
 * The stamps are GPU times only if the GPU never waits for the host. A spin kernel (one
 * invocation in a dependent integer loop, calibrated to SPIN_MS) is queued first, so every later
 * dispatch is queued before the GPU reaches it and the deltas hold no host gaps. Each stamp is its
 * own empty pass, so a delta is one step's kernels plus the pass boundary's barrier (what a step
 * costs in place, not in isolation).
 *
 * Also reported, for the same compiled function: one call between two events (how `kiln bench`
 * times it: the host's encoding shows where the GPU outruns it) and `calls` calls queued back to
 * back between two events (device time with the host hidden); with --harness, `kiln bench`'s
 * own harness on the same workload (eager and compiled alternating).
 *
 *   node dist/bench/webgpu-profile.js [workload] [dtype] [--top N] [--reps 5] [--harness] [--json out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { getWorkload } from '../src/bench/workloads.js';
import { benchWorkload, median } from '../src/bench/harness.js';
import { WgslProgram } from '../src/compile/codegen/wgsl/program.js';
import { WgslReplayProgram } from '../src/compile/codegen/wgsl/replay.js';
import { setOption } from '../src/runtime/config.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../src/tensor/dtype.js';
import { deviceMsPerCall } from './webgpu-device-ms.js';
import { warmUntilSteady } from '../src/bench/steady.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const positional = argv.filter((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--'));
const workload = positional[0] ?? 'qwen3-0.6b-forward';
const dtype = (positional[1] ?? 'float32') as DType;
const top = Number(flag('--top') ?? 25);
const reps = Number(flag('--reps') ?? 5);
const size = (flag('--size') ?? 'full') as 'full' | 'tiny';
/** Long enough for the host to queue a whole call's steps and stamps behind it. */
const SPIN_MS = Number(flag('--spin-ms') ?? 60);

const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;

// One invocation, a dependent multiply-add chain of kmeta[0] steps, its result stored so that no
// compiler removes the loop.
const SPIN_SOURCE = `@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read> kmeta: array<u32>;
@compute @workgroup_size(1)
fn main() {
  var x = kmeta[1];
  for (var i = 0u; i < kmeta[0]; i = i + 1u) { x = x * 1664525u + 1013904223u; }
  b0[0] = x;
}
`;
const spinKernel = acc.kernel(SPIN_SOURCE, 'kiln.profile.spin');
const spinOut = kiln.zeros([4], { dtype: 'int32', device: 'webgpu' });
const spin = (steps: number): void => acc.dispatch(spinKernel, [spinOut.storage.buffer], new Uint32Array([steps, 12345]), [1, 1, 1]);

/** Spin steps for SPIN_MS, from one timed spin of a million steps. */
function calibrateSpin(): number {
  const probe = 1_000_000;
  spin(probe);
  kiln.synchronize('webgpu');
  const a = new kiln.Event('webgpu');
  const b = new kiln.Event('webgpu');
  a.record();
  spin(probe);
  b.record();
  b.synchronize();
  const ms = Math.max(a.elapsedTime(b), 1e-3);
  return Math.min(2 ** 31, Math.round((probe * SPIN_MS) / ms));
}

const w = getWorkload(workload).build({ size, device: 'webgpu', dtype });
// The profiled program runs step by step, so without recorded replay (KILN_WEBGPU_REPLAY, read
// at compile time); the whole-call timings below use a second compile, as users get it.
setOption('KILN_WEBGPU_REPLAY', false);
const cf = kiln.compile(w.forward, { name: `${workload}-profiled` });
// The first call outside kiln.scope: tensors a model makes on its first forward are lifted into
// the program and must outlive the call.
kiln.noGrad(() => void cf(...w.inputs));
setOption('KILN_WEBGPU_REPLAY', undefined);
kiln.synchronize('webgpu');
const program = cf.programs().inference[0];
if (!(program instanceof WgslProgram)) throw new Error(`webgpu-profile: ${workload} did not compile to one webgpu program (got ${program?.constructor.name ?? 'none'})`);
// The GPU's clock first brought up by the program itself (steady.ts), before the spin is
// calibrated and before each profiled run (session 29: idle clocks made steps read up to 2x slow).
const warm = (): void => void warmUntilSteady('webgpu', [() => void kiln.noGrad(() => kiln.scope(() => void cf(...w.inputs)))]);
warm();
const spinSteps = calibrateSpin();

const totals = new Map<string, { ms: number; count: number }>();
const stepSums: number[] = [];
for (let r = 0; r < reps; r++) {
  warm();
  const events: { label: string; ev: kiln.Event }[] = [];
  const start = new kiln.Event('webgpu');
  spin(spinSteps);
  start.record();
  program.onStep = (_i, label) => {
    const ev = new kiln.Event('webgpu');
    ev.record();
    events.push({ label, ev });
  };
  try {
    kiln.noGrad(() => kiln.scope(() => void cf(...w.inputs)));
  } finally {
    program.onStep = undefined;
  }
  kiln.synchronize('webgpu');
  let prev = start;
  let sum = 0;
  for (const { label, ev } of events) {
    const ms = prev.elapsedTime(ev);
    prev = ev;
    sum += ms;
    if (r === 0) continue; // the first profiled run is a warm-up
    const t = totals.get(label) ?? { ms: 0, count: 0 };
    t.ms += ms;
    t.count++;
    totals.set(label, t);
  }
  if (r > 0) stepSums.push(sum);
}
const runs = Math.max(1, reps - 1);
const rows = [...totals.entries()].map(([label, t]) => ({ label, ms_per_call: t.ms / runs, count_per_call: t.count / runs })).sort((a, b) => b.ms_per_call - a.ms_per_call);

// Whole calls, compiled as users get it (replayed where KILN_WEBGPU_REPLAY_MIN_STEPS says): one
// between two events (kiln bench's timing) and 20 queued back to back.
const cfUser = kiln.compile(w.forward, { name: workload });
kiln.noGrad(() => void cfUser(...w.inputs));
const userProgram = cfUser.programs().inference[0];
const call = (): void => void kiln.noGrad(() => kiln.scope(() => void cfUser(...w.inputs)));
const single: number[] = [];
for (let i = 0; i < 21; i++) {
  kiln.scope(() => {
    const a = new kiln.Event('webgpu');
    const b = new kiln.Event('webgpu');
    a.record();
    call();
    b.record();
    b.synchronize();
    single.push(a.elapsedTime(b));
  });
}
const [queued] = deviceMsPerCall([call], 5, 20);

// kiln bench's own harness on the same workload (eager and compiled alternating, one call between
// events each), to compare with the figures above.
const harness = argv.includes('--harness') ? benchWorkload(getWorkload(workload).build({ size, device: 'webgpu', dtype }), { reps: 20, warmup: 3 }).row : null;

const summary = {
  workload,
  dtype,
  size,
  device: acc.properties(0).name,
  steps_per_call: rows.reduce((n, r) => n + r.count_per_call, 0),
  step_ms_sum: median(stepSums),
  single_call_ms: median(single),
  queued_call_ms: queued,
  spin_ms: SPIN_MS,
  replayed: userProgram instanceof WgslReplayProgram ? userProgram.stats : null,
  harness_eager_ms: harness?.eager_ms ?? null,
  harness_compiled_ms: harness?.compiled_ms ?? null,
};
console.log(JSON.stringify(summary));
console.log(`${'ms/call'.padStart(9)} ${'share'.padStart(6)} ${'n'.padStart(5)}  step`);
for (const r of rows.slice(0, top)) console.log(`${r.ms_per_call.toFixed(4).padStart(9)} ${((100 * r.ms_per_call) / summary.step_ms_sum).toFixed(1).padStart(5)}% ${String(r.count_per_call).padStart(5)}  ${r.label}`);
const out = flag('--json');
if (out) fs.writeFileSync(out, JSON.stringify({ meta: { command: `node dist/bench/webgpu-profile.js ${argv.join(' ')}`, date: new Date().toISOString() }, summary, rows }, null, 1));
