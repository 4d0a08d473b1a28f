/**
 * Where a compiled workload's device time goes on cuda: runs the compiled program kernel by kernel
 * (no CUDA graph) with a CUDA event after every step, and sums the time between consecutive events
 * per step label (fused kernel: its ops; extern: the op). A spin kernel (__nanosleep, about 50 ms)
 * is enqueued after the first step, so every later launch is queued before the GPU reaches it: the deltas are device
 * time, not the host's launch gaps. Also times the whole program plain and as a graph replay.
 *
 *   node dist/bench/cuda-profile.js [workload] [dtype] [--top N] [--json out.json]
 * Besides `kiln bench`'s workloads, 'qwen3-0.6b-decode-bN' profiles the engine's decode step at batch N,
 * and 'conv-stack-train' bench/train-step.ts's training step, compiled (joint forward and backward
 * programs step by step, the eager glue and SGD op by op) and eager (op by op), float32 only
 * (cuda-profile-train.ts; [--spin-ms 200] [--reps 5]).
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { getWorkload } from '../src/bench/workloads.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import type { CudaProgram } from '../src/compile/codegen/cuda/program.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch } from '../src/runtime/cuda/launch.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { getAccelerator } from '../src/runtime/registry.js';
import { profileTrainStep, TRAIN_WORKLOAD } from './cuda-profile-train.js';
import type { DType } from '../src/tensor/dtype.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const positional = argv.filter((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--'));
const workload = positional[0] ?? 'qwen3-0.6b-forward';
const dtype = (positional[1] ?? 'bfloat16') as DType;
const top = Number(flag('--top') ?? 25);
const REPS = 5;

const SPIN = `extern "C" __global__ void kiln_spin(long long ns) { long long t = 0; while (t < ns) { __nanosleep(1000000); t += 1000000; } }`;

/**
 * 'qwen3-0.6b-decode-bN': the engine's decode step at batch N (what DecodeRunner compiles): seeded
 * Qwen3-0.6B weights, a paged cache, every row at position `DECODE_POS` (--pos, default 128) with its own blocks.
 */
function decodeWorkload(name: string): { forward: (...args: kiln.Tensor[]) => kiln.Tensor; inputs: kiln.Tensor[] } | null {
  const m = /^qwen3-0\.6b-decode-b(\d+)$/.exec(name);
  if (!m) return null;
  const B = Number(m[1]);
  const DECODE_POS = Number(flag('--pos') ?? 128);
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_0_6B, { seed: 0, dtype, device: 'cuda' });
  model.eval();
  model.prepareDecode();
  const blocksPerRow = Math.ceil((DECODE_POS + 1) / kiln.serve.DEFAULT_BLOCK_SIZE);
  const cache = new kiln.serve.PagedKvCache(model.kvGeometry(), { numBlocks: B * blocksPerRow + 1 });
  const tables = Array.from({ length: B }, (_, b) => Array.from({ length: blocksPerRow }, (_, j) => b * blocksPerRow + j));
  const long = (v: number[]): kiln.Tensor => kiln.tensor(v, { dtype: 'int64', device: 'cuda' });
  const inputs = [
    long(Array.from({ length: B }, (_, b) => (b * 7919) % 151936)),
    long(new Array<number>(B).fill(DECODE_POS)),
    long(tables.map((t) => t[Math.floor(DECODE_POS / kiln.serve.DEFAULT_BLOCK_SIZE)]! * kiln.serve.DEFAULT_BLOCK_SIZE + (DECODE_POS % kiln.serve.DEFAULT_BLOCK_SIZE))),
    kiln.tensor(tables.flat(), { dtype: 'int32', device: 'cuda' }).reshape([B, blocksPerRow]),
    kiln.tensor(new Array<number>(B).fill(DECODE_POS + 1), { dtype: 'int32', device: 'cuda' }),
  ];
  const caches = { keys: cache.keys, values: cache.values };
  const forward = (inputIds: kiln.Tensor, positions: kiln.Tensor, slotMapping: kiln.Tensor, blockTables: kiln.Tensor, contextLens: kiln.Tensor): kiln.Tensor =>
    model.decodeStep({ inputIds, positions, slotMapping, blockTables, contextLens }, caches);
  return { forward: forward as (...args: kiln.Tensor[]) => kiln.Tensor, inputs };
}

if (workload === TRAIN_WORKLOAD) {
  profileTrainStep({ top, json: flag('--json'), spinMs: Number(flag('--spin-ms') ?? 200), reps: Number(flag('--reps') ?? 5), command: `node dist/bench/cuda-profile.js ${argv.join(' ')}` });
} else profileProgram();

/** Profiles a compiled inference program (kiln bench workloads, decode steps). */
function profileProgram(): void {
  const w = decodeWorkload(workload) ?? getWorkload(workload).build({ size: 'full', device: 'cuda', dtype });
  // The profiled program runs without graphs (each step enqueued by the host, so events can sit
  // between steps); KILN_CUDA_GRAPHS is read when a program is built, so a second one, built after
  // the variable is restored, is timed as users get it.
  const graphsEnv = process.env.KILN_CUDA_GRAPHS;
  process.env.KILN_CUDA_GRAPHS = '0';
  const cfPlain = kiln.compile(w.forward, { name: `${workload}-profiled` });
  // First calls outside kiln.scope: tensors a model creates lazily on its first forward (rotary
  // tables) are lifted into the program and must outlive the call.
  kiln.noGrad(() => void cfPlain(...w.inputs));
  if (graphsEnv === undefined) delete process.env.KILN_CUDA_GRAPHS;
  else process.env.KILN_CUDA_GRAPHS = graphsEnv;
  const cf = kiln.compile(w.forward, { name: workload });
  kiln.noGrad(() => void cf(...w.inputs));
  kiln.synchronize('cuda');
  const plainProgram = cfPlain.programs().inference[0];
  const program = cf.programs().inference[0];
  if (!(plainProgram instanceof CudaGraphProgram) || !(program instanceof CudaGraphProgram)) throw new Error(`cuda-profile: ${workload} did not compile to a cuda program`);
  const cp: CudaProgram = plainProgram.program;
  const stream = (getAccelerator('cuda') as unknown as CudaAccelerator).defaultStream(0);
  const spin = kernelFromSource(0, SPIN, 'kiln_spin', ['i64']);

  const totals = new Map<string, { ms: number; count: number }>();
  let perRun = 0;
  for (let r = 0; r < REPS; r++) {
    const events: { label: string; ev: kiln.Event }[] = [];
    const start = new kiln.Event('cuda');
    // The spin goes in after the first step, not before the call: a first step that synchronised
    // with the host would otherwise wait the spin out and leave the GPU idle while the host enqueues
    // the rest. The first step's own time is therefore not shown.
    cp.onStep = (i, label) => {
      if (i === 0) {
        launch(spin, [50_000_000], { grid: 1, block: 1 }, stream);
        start.record();
        return;
      }
      const ev = new kiln.Event('cuda');
      ev.record();
      events.push({ label, ev });
    };
    kiln.noGrad(() => kiln.scope(() => void cfPlain(...w.inputs)));
    cp.onStep = undefined;
    kiln.synchronize('cuda');
    let prev = start;
    for (const { label, ev } of events) {
      const ms = prev.elapsedTime(ev);
      prev = ev;
      if (r === 0) continue; // the first run after compile is a warm-up
      const t = totals.get(label) ?? { ms: 0, count: 0 };
      t.ms += ms;
      t.count++;
      totals.set(label, t);
    }
    if (r > 0) perRun += start.elapsedTime(prev);
  }
  const runs = REPS - 1;
  const rows = [...totals.entries()].map(([label, t]) => ({ label, ms_per_call: t.ms / runs, count_per_call: t.count / runs })).sort((a, b) => b.ms_per_call - a.ms_per_call);

  // Whole-call timings: plain launches (host-bound where kernels are short) and the graph replay.
  const time = (f: () => void): number => {
    const xs: number[] = [];
    for (let i = 0; i < 20; i++) {
      const a = new kiln.Event('cuda');
      const b = new kiln.Event('cuda');
      a.record();
      kiln.noGrad(() => kiln.scope(f));
      b.record();
      b.synchronize();
      xs.push(a.elapsedTime(b));
    }
    return xs.sort((x, y) => x - y)[10]!;
  };
  const plainMs = time(() => void cfPlain(...w.inputs));
  const compiledMs = time(() => void cf(...w.inputs));
  // A call that could not be captured whole runs in pieces (piecewise.ts): their graphs' counters.
  const pw = program.piecewise();
  const pieces = pw && 'graphPieces' in pw ? (pw as unknown as { graphPieces(): CudaGraphProgram[] }).graphPieces().map((g) => ({ captures: g.stats.captures, replays: g.stats.replays, nodes: g.stats.lastNodeCount })) : null;
  const summary = { workload, dtype, device_ms_sum: perRun / runs, plain_ms: plainMs, compiled_ms: compiledMs, steps: rows.reduce((n, r) => n + r.count_per_call, 0), graph: program.stats, pieces };
  console.log(JSON.stringify(summary));
  console.log(`${'ms/call'.padStart(9)} ${'n'.padStart(5)}  step`);
  for (const r of rows.slice(0, top)) console.log(`${r.ms_per_call.toFixed(4).padStart(9)} ${String(r.count_per_call).padStart(5)}  ${r.label}`);
  const out = flag('--json');
  if (out) fs.writeFileSync(out, JSON.stringify({ meta: { command: `node dist/bench/cuda-profile.js ${argv.join(' ')}`, date: new Date().toISOString() }, summary, rows }, null, 1));
}
