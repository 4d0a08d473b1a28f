/**
 * cuda-profile.ts's 'conv-stack-train': where the device time of bench/train-step.ts's step goes
 * (the same step: train-step-runner.ts), compiled and eager, on cuda.
 *
 * - Compiled: a runner whose programs are built without CUDA graphs (KILN_CUDA_GRAPHS=0 while it
 *   compiles), so the joint's forward and backward programs enqueue step by step and a CUDA event
 *   goes after every step (CudaProgram.onStep), labelled 'fwd#i'/'bwd#i' (step i of the program, as
 *   KILN_LOG=output_code lists them) and the step's ops. The eager
 *   ops around them (autograd's glue between forward and backward, the gradient accumulation, the
 *   SGD update) get an event each through a post-dispatch hook, labelled 'eager' and the op; the
 *   hook is silent while a program runs (its externs dispatch ops too).
 * - Eager: the other runner with the same hook, every op labelled by its name and output shape.
 * A spin kernel (__nanosleep, --spin-ms, 200 ms by default) goes first, so everything after it is
 * queued before the GPU reaches it and the gaps between events are device time, not host launch
 * gaps; if the host was still enqueueing when the spin ended (an op that synchronised, or a host
 * slower than the spin) the run says so ('host caught up'), and its deltas include host time.
 * Then the whole step is timed three ways with events and the host clock (median of 20): eager,
 * compiled without graphs, compiled as users get it (graph replay where faster).
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import type { CudaProgram } from '../src/compile/codegen/cuda/program.js';
import type { CompiledProgram } from '../src/compile/backend.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch } from '../src/runtime/cuda/launch.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { getAccelerator } from '../src/runtime/registry.js';
import { addPostDispatchHook } from '../src/ops/dispatch.js';
import { Tensor } from '../src/tensor/tensor.js';
import { trainRunner, type TrainRunner } from './train-step-runner.js';

export const TRAIN_WORKLOAD = 'conv-stack-train';

const SPIN = `extern "C" __global__ void kiln_spin(long long ns) { long long t = 0; while (t < ns) { __nanosleep(1000000); t += 1000000; } }`;

export interface TrainProfileOptions {
  readonly top: number;
  readonly json: string | undefined;
  readonly spinMs: number;
  readonly reps: number;
  readonly command: string;
}

interface Mark {
  readonly label: string;
  readonly ev: kiln.Event;
}

/** Where events go while a profiled step runs (null: nowhere). */
let marks: Mark[] | null = null;
/** Label prefix of the eager ops recorded now. */
let eagerPrefix = '';
/** > 0 while a compiled program runs (its externs' dispatches are not recorded separately). */
let inProgram = 0;

/** An op's result as shapes (results that are not tensors, such as a list's nulls, as '-'). */
const fmtShape = (r: unknown): string => (Array.isArray(r) ? r.map(fmtShape).join(' ') : r instanceof Tensor ? `[${r.shape.join(',')}]` : '-');

addPostDispatchHook((op, _args, result) => {
  if (marks === null || inProgram > 0) return;
  const ev = new kiln.Event('cuda');
  ev.record();
  marks.push({ label: `${eagerPrefix}${op.name} ${fmtShape(result)}`, ev });
});

/** The CudaProgram under a compiled program, with its runs counted in `inProgram`. */
function instrument(p: CompiledProgram, tag: string): CudaProgram {
  if (!(p instanceof CudaGraphProgram)) throw new Error(`cuda-profile: the ${tag} program is not a cuda program`);
  const cp = p.program;
  const run = cp.run.bind(cp);
  cp.run = (inputs) => {
    inProgram++;
    try {
      return run(inputs);
    } finally {
      inProgram--;
    }
  };
  cp.onStep = (i, label) => {
    if (marks === null) return;
    const ev = new kiln.Event('cuda');
    ev.record();
    marks.push({ label: `${tag}#${i} ${label}`, ev });
  };
  return cp;
}

interface Row {
  label: string;
  ms_per_step: number;
  count_per_step: number;
}

interface Profile {
  rows: Row[];
  /** Device time from the end of the spin to the last event, per step. */
  device_ms: number;
  /** Per phase (forward, backward, update): device time per step. */
  phases: Record<string, number>;
  /** Runs where the host had not finished enqueueing when the spin ended. */
  host_caught_up: number;
}

function profileSteps(r: TrainRunner, reps: number, spinMs: number, prefix: string): Profile {
  const stream = (getAccelerator('cuda') as unknown as CudaAccelerator).defaultStream(0);
  const spin = kernelFromSource(0, SPIN, 'kiln_spin', ['i64']);
  const totals = new Map<string, { ms: number; count: number }>();
  const phases: Record<string, number> = { forward: 0, backward: 0, update: 0 };
  let device = 0;
  let caughtUp = 0;
  for (let rep = 0; rep <= reps; rep++) {
    launch(spin, [spinMs * 1e6], { grid: 1, block: 1 }, stream);
    const start = new kiln.Event('cuda').record();
    const ends: kiln.Event[] = [];
    marks = [];
    eagerPrefix = prefix;
    try {
      const loss = r.forward();
      ends.push(new kiln.Event('cuda').record());
      r.backward(loss);
      ends.push(new kiln.Event('cuda').record());
      r.update();
      ends.push(new kiln.Event('cuda').record());
    } finally {
      eagerPrefix = '';
    }
    const got = marks;
    marks = null;
    // The spin should still be running: otherwise the GPU waited for the host somewhere.
    const late = start.query();
    kiln.synchronize('cuda');
    if (rep === 0) continue; // warm-up
    if (late) caughtUp++;
    let prev = start;
    for (const { label, ev } of got) {
      const t = totals.get(label) ?? { ms: 0, count: 0 };
      t.ms += prev.elapsedTime(ev);
      t.count++;
      totals.set(label, t);
      prev = ev;
    }
    phases.forward! += start.elapsedTime(ends[0]!);
    phases.backward! += ends[0]!.elapsedTime(ends[1]!);
    phases.update! += ends[1]!.elapsedTime(ends[2]!);
    device += start.elapsedTime(ends[2]!);
  }
  for (const k of Object.keys(phases)) phases[k]! /= reps;
  const rows = [...totals.entries()].map(([label, t]) => ({ label, ms_per_step: t.ms / reps, count_per_step: t.count / reps })).sort((a, b) => b.ms_per_step - a.ms_per_step);
  return { rows, device_ms: device / reps, phases, host_caught_up: caughtUp };
}

/** Median over 20 steps of the device span (events) and the host time of step() (which synchronises). */
function timeSteps(r: TrainRunner): { device_ms: number; host_ms: number } {
  const dev: number[] = [];
  const host: number[] = [];
  for (let i = 0; i < 20; i++) {
    const a = new kiln.Event('cuda').record();
    const t0 = performance.now();
    r.step();
    host.push(performance.now() - t0);
    const b = new kiln.Event('cuda').record();
    b.synchronize();
    dev.push(a.elapsedTime(b));
  }
  const med = (xs: number[]): number => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
  return { device_ms: med(dev), host_ms: med(host) };
}

function printRows(title: string, p: Profile, top: number): void {
  console.log(`\n${title}: device ${p.device_ms.toFixed(3)} ms/step (forward ${p.phases.forward!.toFixed(3)}, backward ${p.phases.backward!.toFixed(3)}, update ${p.phases.update!.toFixed(3)})${p.host_caught_up ? `; host caught up in ${p.host_caught_up} runs: deltas include host time` : ''}`);
  console.log(`${'ms/step'.padStart(9)} ${'n'.padStart(4)}  step`);
  for (const r of p.rows.slice(0, top)) console.log(`${r.ms_per_step.toFixed(4).padStart(9)} ${String(r.count_per_step).padStart(4)}  ${r.label.length > 160 ? `${r.label.slice(0, 157)}...` : r.label}`);
}

export function profileTrainStep(o: TrainProfileOptions): void {
  const base = { workload: 'conv-stack', size: 'full' as const, device: 'cuda' };
  // KILN_CUDA_GRAPHS is read when a program is built: the plain runner's joint programs are built
  // (on its first step) with graphs off, the other runner's as users get them.
  const graphsEnv = process.env.KILN_CUDA_GRAPHS;
  process.env.KILN_CUDA_GRAPHS = '0';
  const plain = trainRunner({ ...base, compiled: true });
  plain.step();
  if (graphsEnv === undefined) delete process.env.KILN_CUDA_GRAPHS;
  else process.env.KILN_CUDA_GRAPHS = graphsEnv;
  const joint = plain.compiled!.programs().joint;
  if (joint.length !== 1) throw new Error(`cuda-profile: expected one compiled joint, got ${joint.length} (counters ${JSON.stringify(plain.counters)})`);
  const fwd = instrument(joint[0]!.forward, 'fwd');
  const bwd = instrument(joint[0]!.backward, 'bwd');
  const graphed = trainRunner({ ...base, compiled: true });
  const eager = trainRunner({ ...base, compiled: false });
  for (let i = 0; i < 3; i++) {
    graphed.step();
    eager.step();
  }
  const compiledProfile = profileSteps(plain, o.reps, o.spinMs, 'eager ');
  const eagerProfile = profileSteps(eager, o.reps, o.spinMs, '');
  const whole = { eager: timeSteps(eager), compiled_plain: timeSteps(plain), compiled: timeSteps(graphed) };
  const summary = {
    workload: TRAIN_WORKLOAD,
    step: 'conv-stack full, mse loss, backward, SGD(momentum 0.9), module.train() (bench/train-step.ts)',
    compiled_device_ms: compiledProfile.device_ms,
    compiled_phases: compiledProfile.phases,
    eager_device_ms: eagerProfile.device_ms,
    eager_phases: eagerProfile.phases,
    whole_step: whole,
    forward_program: { kernels: fwd.stats.kernels, externs: fwd.stats.externs },
    backward_program: { kernels: bwd.stats.kernels, externs: bwd.stats.externs },
    counters: graphed.counters,
  };
  console.log(JSON.stringify(summary));
  printRows('compiled (joint programs without graphs; eager glue and SGD)', compiledProfile, o.top);
  printRows('eager', eagerProfile, o.top);
  if (o.json) fs.writeFileSync(o.json, JSON.stringify({ meta: { command: o.command, date: new Date().toISOString() }, summary, compiled: compiledProfile, eager: eagerProfile }, null, 1));
}
