/**
 * Where a webgpu decode step's time goes (issue #20): seeded random weights of a Qwen3 config, one
 * request decoding on the serve engine (its default decode path on webgpu, or --decode).
 *
 * Host: for `steps` warm steps, the step's wall time, the main thread's time outside blocking calls
 * (what issuing the step costs it), the CPU time of the main thread and of the other threads
 * (Linux: /proc/self/task; unlike wall time, not moved by other processes on a loaded machine),
 * dispatches per step (those of replayed recordings included), the blocking calls into the device
 * thread (reads, syncs, compiles) and the device thread's counters (applyMs: its time encoding and
 * submitting; bind groups made and reused; replays).
 *
 * Device: for `stamp-steps` more steps (default `steps`; 0 skips them), every dispatch bracketed by
 * device timestamps (a stamp before each dispatch and one after the last: dispatch i takes stamp
 * i+1 - stamp i), grouped by pipeline label (kiln.gemm keys say which GEMM kernel ran: gemv*, sm*,
 * smstaged*, or the tiled kernel's storage kinds). Stamps end compute passes, so the profiled
 * step's device time is an upper bound of the real one. A replayed step is one command: profile
 * compiled decode per kernel with KILN_WEBGPU_REPLAY=0.
 *
 * Host time alone, on Dawn's null backend (it computes nothing; its memory is small, so smaller
 * matrices with the same layers, heads and ops):
 *   KILN_WEBGPU_BACKEND=null node dist/bench/webgpu-decode-profile.js --dtype float16 --steps 300 --stamp-steps 0 --vocab 32000 --hidden 256 --intermediate 768 --decode compiled
 *
 *   node dist/bench/webgpu-decode-profile.js --dtype float16 [--config qwen3-0.6b] [--steps 4] [--json out.json]
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import * as kiln from '../src/index.js';
import type { DType } from '../src/index.js';
import type { DeviceBuffer } from '../src/runtime/accelerator.js';
import type { WebgpuAccelerator, WebgpuKernel } from '../src/runtime/webgpu/webgpu-accelerator.js';

const { values: a } = parseArgs({ options: { config: { type: 'string', default: 'qwen3-0.6b' }, dtype: { type: 'string', default: 'float16' }, prompt: { type: 'string', default: '16' }, steps: { type: 'string', default: '4' }, 'stamp-steps': { type: 'string', default: '' }, decode: { type: 'string', default: '' }, vocab: { type: 'string', default: '' }, hidden: { type: 'string', default: '' }, intermediate: { type: 'string', default: '' }, json: { type: 'string' } } });
const base = a.config === 'tiny' ? kiln.models.QWEN3_TINY : kiln.models.QWEN3_0_6B;
// --vocab, --hidden, --intermediate: smaller matrices, same layers, heads and ops (Dawn's null backend
// caps a buffer at 256 MiB and its memory at less than Qwen3-0.6B's weights; host time per step
// depends on the ops, not on their sizes).
const config = base.with({ ...(a.vocab ? { vocabSize: Number(a.vocab) } : {}), ...(a.hidden ? { hiddenSize: Number(a.hidden) } : {}), ...(a.intermediate ? { intermediateSize: Number(a.intermediate) } : {}) });
const dtype = a.dtype as DType;
const steps = Number(a.steps);
/** Steps profiled with stamps (default: as many as timed; 0: none, host timing only). */
const stampSteps = a['stamp-steps'] === '' ? steps : Number(a['stamp-steps']);
const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
if (!acc.deviceTimestamps) throw new Error('webgpu-decode-profile: the adapter has no timestamp-query (or KILN_WEBGPU_TIMESTAMPS=0): nothing to time dispatches with');

const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 0, dtype, device: 'webgpu' });
model.eval();
const tokens = Number(a.prompt) + 64 + steps + Math.min(steps, 32) + stampSteps;
const engine = new kiln.serve.Engine(model, { numBlocks: Math.ceil(tokens / 16) + 8, maxNumSeqs: 1, decode: a.decode === '' ? undefined : (a.decode as 'compiled' | 'eager' | 'step'), prefixCaching: false });
const prompt = Array.from({ length: Number(a.prompt) }, (_, i) => (i * 7919) % config.vocabSize);
engine.addRequest(prompt, { maxNewTokens: 64 + steps + Math.min(steps, 32) + stampSteps, ignoreEos: true });
// Prefill and warm-up (pipelines compiled, buckets captured).
for (let i = 0; i < 6; i++) engine.step();

// Blocking calls into the device thread and dispatches, per step.
const bridge = acc.bridge as unknown as { call: (c: { k: string }, ...r: unknown[]) => unknown };
const calls: Record<string, number> = {};
const origCall = bridge.call.bind(bridge);
/** Time the main thread spent blocked in calls (waiting for the device thread) during the current step. */
let blockedMs = 0;
bridge.call = (c, ...r) => {
  calls[c.k] = (calls[c.k] ?? 0) + 1;
  const t = performance.now();
  try {
    return origCall(c, ...r);
  } finally {
    blockedMs += performance.now() - t;
  }
};

// Wall time of plain steps (no stamps).
const wall: number[] = [];
const origDispatch = acc.dispatch.bind(acc);
// Dispatches queued, those of replayed recordings included (compiled decode replays its step).
const dispatches0 = acc.dispatchCount;
/**
 * CPU time of this process's threads (Linux: /proc/self/task/<tid>/stat, utime + stime in clock
 * ticks of 10 ms), the main thread's (tid = pid) apart from the rest (the device thread, Dawn's and
 * V8's helpers): unlike wall time, what a loaded machine's other processes do not move.
 */
function threadCpuMs(): { main: number; others: number } | null {
  try {
    let main = 0;
    let others = 0;
    for (const tid of fs.readdirSync('/proc/self/task')) {
      const f = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
      const ms = (Number(fields[11]) + Number(fields[12])) * 10;
      if (Number(tid) === process.pid) main += ms;
      else others += ms;
    }
    return { main, others };
  } catch {
    return null;
  }
}

/** Main-thread time per step outside blocking calls: what the host spends issuing the step. */
const issue: number[] = [];
const cpu0 = threadCpuMs();
const thread0 = acc.deviceThreadStats();
for (let i = 0; i < steps; i++) {
  blockedMs = 0;
  const t = performance.now();
  engine.step();
  wall.push(performance.now() - t);
  issue.push(wall[wall.length - 1]! - blockedMs);
}
const cpu1 = threadCpuMs();
const thread1 = acc.deviceThreadStats();
const dispatches = acc.dispatchCount - dispatches0;
const callsTimed = { ...calls };

// The GPU's span of a step: a stamp queued before the step and one after it (the sampler's read
// included). Against the step's wall time it says whether the GPU or the host bounds the step;
// against the summed dispatch times, how long the GPU waited for commands inside it.
// Also a stamp before and after each replay inside the step: the GPU's time from the replay's
// first command to its last (its dispatches plus the gaps between them and between its submits).
const spans: number[] = [];
const replaySpans: number[] = [];
const origReplay = acc.replay.bind(acc);
for (let i = 0; i < Math.min(steps, 32); i++) {
  const around: ReturnType<WebgpuAccelerator['recordStamp']>[] = [];
  acc.replay = (id: number, n: number): void => {
    around.push(acc.recordStamp());
    origReplay(id, n);
    around.push(acc.recordStamp());
  };
  const s0 = acc.recordStamp();
  engine.step();
  const s1 = acc.recordStamp();
  acc.replay = origReplay;
  const ns = acc.readStamps([s0, s1, ...around]);
  spans.push((ns[1]! - ns[0]!) / 1e6);
  let r = 0;
  for (let j = 2; j + 1 < ns.length; j += 2) r += (ns[j + 1]! - ns[j]!) / 1e6;
  if (around.length > 0) replaySpans.push(r);
}
/** The device thread's counters over the timed steps, per step (applyMs: its time encoding and submitting). */
const threadStats = Object.fromEntries(Object.keys(thread1).map((k) => [k, Number((((thread1[k] ?? 0) - (thread0[k] ?? 0)) / steps).toFixed(3))]));
const cpuPerStep = cpu0 && cpu1 ? { main_thread_cpu_ms: (cpu1.main - cpu0.main) / steps, other_threads_cpu_ms: (cpu1.others - cpu0.others) / steps } : null;
const med3 = (xs: number[]): number | null => (xs.length ? Number([...xs].sort((x, y) => x - y)[xs.length >> 1]!.toFixed(3)) : null);
const perStep = { gpu_span_ms: med3(spans), replay_gpu_ms: med3(replaySpans), dispatches: dispatches / steps, calls: Object.fromEntries(Object.entries(callsTimed).map(([k, v]) => [k, v / steps])) };

// Profiled steps: a stamp before every dispatch.
type Stamp = ReturnType<WebgpuAccelerator['recordStamp']>;
const byLabel = new Map<string, { n: number; ms: number }>();
let deviceMs = 0;
for (let i = 0; i < stampSteps; i++) {
  const marks: { stamp: Stamp; label: string }[] = [];
  acc.dispatch = (k: WebgpuKernel, bufs: readonly DeviceBuffer[], meta: Uint32Array, groups: readonly [number, number, number]): void => {
    marks.push({ stamp: acc.recordStamp(), label: k.name });
    origDispatch(k, bufs, meta, groups);
  };
  engine.step();
  acc.dispatch = origDispatch;
  const end = acc.recordStamp();
  const ns = acc.readStamps([...marks.map((m) => m.stamp), end]);
  for (let j = 0; j < marks.length; j++) {
    const ms = Math.max(0, ns[j + 1]! - ns[j]!) / 1e6;
    const e = byLabel.get(marks[j]!.label) ?? { n: 0, ms: 0 };
    e.n++;
    e.ms += ms;
    byLabel.set(marks[j]!.label, e);
    deviceMs += ms;
  }
}
engine.dispose();

const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
const rows = [...byLabel.entries()].map(([label, e]) => ({ label, per_step: e.n / stampSteps, ms_per_step: Number((e.ms / stampSteps).toFixed(4)), us_per_dispatch: Number(((1000 * e.ms) / e.n).toFixed(2)) })).sort((x, y) => y.ms_per_step - x.ms_per_step);
console.log(`${a.config} ${dtype} decode on webgpu (${engine.decodeRunner?.path ?? 'step'}): step wall ${median(wall).toFixed(2)} ms (median of ${steps}; main thread outside blocking calls ${median(issue).toFixed(2)} ms${cpuPerStep ? `; cpu per step: main thread ${cpuPerStep.main_thread_cpu_ms.toFixed(2)} ms, other threads ${cpuPerStep.other_threads_cpu_ms.toFixed(2)} ms` : ''}), GPU span of a step ${perStep.gpu_span_ms} ms (median; of its replays ${perStep.replay_gpu_ms} ms), device ${(deviceMs / Math.max(stampSteps, 1)).toFixed(2)} ms per step summed over dispatches, ${perStep.dispatches} dispatches, calls ${JSON.stringify(perStep.calls)} per step; device thread ${JSON.stringify(threadStats)}`);
for (const r of rows) console.log(`${r.ms_per_step.toFixed(3).padStart(9)} ms  ${String(r.per_step).padStart(5)} x ${r.us_per_dispatch.toFixed(1).padStart(8)} us  ${r.label}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ config: a.config, dtype, path: engine.decodeRunner?.path ?? 'step', step_wall_ms: median(wall), step_main_thread_ms: median(issue), ...cpuPerStep, device_thread: threadStats, device_ms_per_step: deviceMs / Math.max(stampSteps, 1), ...perStep, kernels: rows }, null, 2));
process.exit(0);
