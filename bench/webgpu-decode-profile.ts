/**
 * Where a webgpu decode step's device time goes (issue #20): seeded random weights of a Qwen3
 * config, one request decoding on the serve engine (its default decode path on webgpu, or
 * --decode), and for `steps` warm steps every dispatch bracketed by device timestamps (a stamp
 * before each dispatch and one after the last: dispatch i takes stamp i+1 - stamp i). Kernels are
 * grouped by pipeline label (kiln.gemm keys say which GEMM kernel ran: gemv*, sm*, smstaged*, or
 * the tiled kernel's storage kinds). Per step it also counts dispatches and the blocking calls into
 * the device thread (reads, syncs, compiles), and reports the step's wall time without stamps.
 * Stamps end compute passes, so the profiled step's device time is an upper bound of the real one.
 *
 *   node dist/bench/webgpu-decode-profile.js --dtype float16 [--config qwen3-0.6b] [--steps 4] [--json out.json]
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import * as kiln from '../src/index.js';
import type { DType } from '../src/index.js';
import type { DeviceBuffer } from '../src/runtime/accelerator.js';
import type { WebgpuAccelerator, WebgpuKernel } from '../src/runtime/webgpu/webgpu-accelerator.js';

const { values: a } = parseArgs({ options: { config: { type: 'string', default: 'qwen3-0.6b' }, dtype: { type: 'string', default: 'float16' }, prompt: { type: 'string', default: '16' }, steps: { type: 'string', default: '4' }, decode: { type: 'string', default: '' }, json: { type: 'string' } } });
const config = a.config === 'tiny' ? kiln.models.QWEN3_TINY : kiln.models.QWEN3_0_6B;
const dtype = a.dtype as DType;
const steps = Number(a.steps);
const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
if (!acc.deviceTimestamps) throw new Error('webgpu-decode-profile: the adapter has no timestamp-query (or KILN_WEBGPU_TIMESTAMPS=0): nothing to time dispatches with');

const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 0, dtype, device: 'webgpu' });
model.eval();
const engine = new kiln.serve.Engine(model, { numBlocks: 64, maxNumSeqs: 1, decode: a.decode === '' ? undefined : (a.decode as 'compiled' | 'eager' | 'step'), prefixCaching: false });
const prompt = Array.from({ length: Number(a.prompt) }, (_, i) => (i * 7919) % config.vocabSize);
engine.addRequest(prompt, { maxNewTokens: 64 + 2 * steps, ignoreEos: true });
// Prefill and warm-up (pipelines compiled, buckets captured).
for (let i = 0; i < 6; i++) engine.step();

// Blocking calls into the device thread and dispatches, per step.
const bridge = acc.bridge as unknown as { call: (c: { k: string }, ...r: unknown[]) => unknown };
const calls: Record<string, number> = {};
const origCall = bridge.call.bind(bridge);
bridge.call = (c, ...r) => {
  calls[c.k] = (calls[c.k] ?? 0) + 1;
  return origCall(c, ...r);
};

// Wall time of plain steps (no stamps).
const wall: number[] = [];
let dispatches = 0;
const origDispatch = acc.dispatch.bind(acc);
acc.dispatch = (k: WebgpuKernel, bufs: readonly DeviceBuffer[], meta: Uint32Array, groups: readonly [number, number, number]): void => {
  dispatches++;
  origDispatch(k, bufs, meta, groups);
};
for (let i = 0; i < steps; i++) {
  const t = performance.now();
  engine.step();
  wall.push(performance.now() - t);
}
const perStep = { dispatches: dispatches / steps, calls: Object.fromEntries(Object.entries(calls).map(([k, v]) => [k, v / steps])) };

// Profiled steps: a stamp before every dispatch.
type Stamp = ReturnType<WebgpuAccelerator['recordStamp']>;
const byLabel = new Map<string, { n: number; ms: number }>();
let deviceMs = 0;
for (let i = 0; i < steps; i++) {
  const marks: { stamp: Stamp; label: string }[] = [];
  acc.dispatch = (k, bufs, meta, groups): void => {
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
const rows = [...byLabel.entries()].map(([label, e]) => ({ label, per_step: e.n / steps, ms_per_step: Number((e.ms / steps).toFixed(4)), us_per_dispatch: Number(((1000 * e.ms) / e.n).toFixed(2)) })).sort((x, y) => y.ms_per_step - x.ms_per_step);
console.log(`${a.config} ${dtype} decode on webgpu (${engine.decodeRunner?.path ?? 'step'}): step wall ${median(wall).toFixed(2)} ms (median of ${steps}), device ${(deviceMs / steps).toFixed(2)} ms per step summed over dispatches, ${perStep.dispatches} dispatches, calls ${JSON.stringify(perStep.calls)} per step`);
for (const r of rows) console.log(`${r.ms_per_step.toFixed(3).padStart(9)} ms  ${String(r.per_step).padStart(5)} x ${r.us_per_dispatch.toFixed(1).padStart(8)} us  ${r.label}`);
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ config: a.config, dtype, path: engine.decodeRunner?.path ?? 'step', step_wall_ms: median(wall), device_ms_per_step: deviceMs / steps, ...perStep, kernels: rows }, null, 2));
process.exit(0);
