/**
 * Where a cpu decode step's time goes (issue #17): seeded random weights of a Qwen3 config, one
 * request decoding on the engine's eager decode path, every op of the measured steps timed through
 * a dispatch mode (wall time per op call, the op's own kernel plus anything it dispatches). Ops are
 * grouped by class: each linear by its weight shape (q/k/v/o, gate/up, down, lm_head), attention
 * (llm.pagedAttention, llm.reshapeAndCache), norms, the rest by op name. "host" is the step's wall
 * time minus the ops' (the engine, sampling, tensor bookkeeping between ops). It profiles the op
 * graph, so the cpu's whole-step decoder (one native call a step, on by default) is turned off
 * here; bench/cpu-decode-phases.ts splits that call by phase.
 *
 *   node dist/bench/decode-profile.js --dtype float32 [--steps 8] [--json out.json]
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import * as kiln from '../src/index.js';
import type { DType } from '../src/index.js';
import { popDispatchMode, pushDispatchMode, dispatch, type DispatchMode } from '../src/ops/public.js';
import { Tensor } from '../src/tensor/tensor.js';
import { setOption } from '../src/runtime/config.js';

const { values: a } = parseArgs({ options: { config: { type: 'string', default: 'qwen3-0.6b' }, dtype: { type: 'string', default: 'float32' }, prompt: { type: 'string', default: '16' }, steps: { type: 'string', default: '8' }, decode: { type: 'string', default: 'eager' }, json: { type: 'string' } } });
const config = a.config === 'tiny' ? kiln.models.QWEN3_TINY : kiln.models.QWEN3_0_6B;
const dtype = a.dtype as DType;
const steps = Number(a.steps);
const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 0, dtype, device: 'cpu' });
model.eval();
setOption('KILN_DECODE_MEGAKERNEL', false);

const H = config.hiddenSize;
const names = new Map<string, string>([
  [`${config.numAttentionHeads * config.headDim}x${H}`, 'linear q'],
  [`${config.numKeyValueHeads * config.headDim}x${H}`, 'linear k/v'],
  [`${H}x${config.numAttentionHeads * config.headDim}`, 'linear o'],
  [`${config.intermediateSize}x${H}`, 'linear gate/up'],
  [`${H}x${config.intermediateSize}`, 'linear down'],
  [`${config.vocabSize}x${H}`, 'linear lm_head'],
]);

const totals = new Map<string, { ms: number; calls: number }>();
let depth = 0;
const mode: DispatchMode = {
  handle(op, args) {
    if (depth > 0) return undefined; // nested dispatch: counted in its caller
    let cls = op.name;
    if (op.name === 'linear') {
      const w = args[1] as Tensor;
      cls = names.get(w.shape.join('x')) ?? `linear ${w.shape.join('x')}`;
    }
    depth++;
    popDispatchMode(mode);
    const t0 = performance.now();
    try {
      return dispatch(op, ...(args as never[]));
    } finally {
      const ms = performance.now() - t0;
      pushDispatchMode(mode);
      depth--;
      const e = totals.get(cls) ?? { ms: 0, calls: 0 };
      e.ms += ms;
      e.calls++;
      totals.set(cls, e);
    }
  },
};

const engine = new kiln.serve.Engine(model, { numBlocks: 16, maxNumSeqs: 1, decode: a.decode as 'eager' | 'compiled', prefixCaching: false });
const prompt = Array.from({ length: Number(a.prompt) }, (_, i) => (i * 7919) % config.vocabSize);
engine.addRequest(prompt, { maxNewTokens: steps + 4, ignoreEos: true });
engine.step(); // prefill
engine.step(); // first decode step (warm-up: native builds, weight packing)
let stepMs = 0;
const load0 = os.loadavg();
for (let s = 0; s < steps; s++) {
  pushDispatchMode(mode);
  const t0 = performance.now();
  engine.step();
  stepMs += performance.now() - t0;
  popDispatchMode(mode);
}
const load1 = os.loadavg();
engine.dispose();

const per = (ms: number): number => Number((ms / steps).toFixed(3));
const opMs = [...totals.values()].reduce((s, e) => s + e.ms, 0);
const rows = [...totals.entries()].sort((x, y) => y[1].ms - x[1].ms).map(([cls, e]) => ({ class: cls, ms_per_step: per(e.ms), calls_per_step: e.calls / steps, share: Number((e.ms / stepMs).toFixed(3)) }));
rows.push({ class: 'host (step - ops)', ms_per_step: per(stepMs - opMs), calls_per_step: 0, share: Number(((stepMs - opMs) / stepMs).toFixed(3)) });
for (const r of rows) console.log(`${r.class.padEnd(24)} ${String(r.ms_per_step).padStart(9)} ms/step  ${String(r.calls_per_step).padStart(4)} calls  ${(100 * r.share).toFixed(1).padStart(5)}%`);
console.log(`step ${per(stepMs)} ms (${a.dtype}, ${a.decode}); load ${load0.map((x) => x.toFixed(2)).join(' ')} -> ${load1.map((x) => x.toFixed(2)).join(' ')}`);
let commit = '';
try {
  commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
} catch {
  /* not a checkout */
}
if (a.json) {
  const meta = { machine: os.hostname(), cpus: os.cpus().length, date: new Date().toISOString(), command: `node dist/bench/decode-profile.js ${process.argv.slice(2).join(' ')}`, commit, node: process.version, loadavg_before: load0, loadavg_after: load1 };
  fs.writeFileSync(a.json, JSON.stringify({ meta, step_ms: per(stepMs), results: rows }, null, 2) + '\n');
}
