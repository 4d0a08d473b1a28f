/**
 * Benchmark workloads compiled with programmatic dependent launch off, on with the default policy
 * (the attribute only on launches that follow a kernel) and on for every launch ('all'), side by
 * side in one process. Per workload: one build (weights, inputs), then one compiled function per
 * variant, each compiled and its CUDA graph captured under its own setting (setPdlEnabled /
 * setPdlPolicy decide whether sources get the prologue and which launches the attribute). Each
 * rep times every variant once with CUDA events around one call, in an order rotated every rep
 * (so neither drift nor "who runs first" favours one); medians reported. Outputs are compared bit
 * for bit with the PDL-off variant's.
 *
 *   node dist/bench/cuda-pdl-workloads.js [--reps N] [--json out.json] [workload ...]
 *   (default: elementwise-1024 mlp-64x512 transformer-block qwen3-0.6b-forward, bfloat16)
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { getWorkload } from '../src/bench/workloads.js';
import { setPdlEnabled, setPdlPolicy, type PdlPolicy } from '../src/runtime/cuda/pdl.js';
import type { Tensor } from '../src/tensor/tensor.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const names = argv.filter((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--'));
const workloads = names.length > 0 ? names : ['elementwise-1024', 'mlp-64x512', 'transformer-block', 'qwen3-0.6b-forward'];
// 30 rounds: enough for a stable median of graph replays (tens of us to 2 ms each).
const REPS = Number(flag('--reps') ?? 30);
const WARMUP = 5;

interface Setting {
  label: string;
  on: boolean;
  policy: PdlPolicy;
}
const SETTINGS: Setting[] = [
  { label: 'off', on: false, policy: 'after-kernel' },
  { label: 'after-kernel', on: true, policy: 'after-kernel' },
  { label: 'all', on: true, policy: 'all' },
];
const apply = (s: Setting): void => {
  setPdlEnabled(s.on);
  setPdlPolicy(s.policy);
};

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Row {
  workload: string;
  ms: Record<string, number>;
  savedUs: Record<string, number>;
  identical: Record<string, boolean>;
}

const rows: Row[] = [];
const out = flag('--json');
// Written after every workload, so a run stopped by a time limit keeps what it finished.
const save = (): void => {
  if (out) fs.writeFileSync(out, JSON.stringify({ date: new Date().toISOString(), command: `node dist/bench/cuda-pdl-workloads.js ${argv.join(' ')}`, reps: REPS, dtype: 'bfloat16', rows }, null, 1));
};

console.log(`workload             ${SETTINGS.map((s) => `${s.label} ms`.padStart(16)).join('')}   saved us (after-kernel, all)  identical`);
for (const name of workloads) {
  const w = getWorkload(name).build({ size: 'full', device: 'cuda', dtype: 'bfloat16' });
  const variants = SETTINGS.map((s) => {
    apply(s);
    const cf = kiln.compile(w.forward, { name: `${name}-pdl-${s.label}` });
    // The first call outside kiln.scope: tensors made lazily on a first forward must outlive it.
    const first = kiln.noGrad(() => cf(...w.inputs)) as Tensor;
    const values = first.to('float32').toFlatArray() as number[];
    first.dispose();
    return { s, cf, values, times: [] as number[] };
  });
  const start = new kiln.Event('cuda');
  const end = new kiln.Event('cuda');
  for (let r = 0; r < WARMUP + REPS; r++) {
    for (let k = 0; k < variants.length; k++) {
      const v = variants[(r + k) % variants.length]!;
      apply(v.s);
      kiln.scope(() => {
        start.record();
        kiln.noGrad(() => void v.cf(...w.inputs));
        end.record();
        end.synchronize();
      });
      if (r >= WARMUP) v.times.push(start.elapsedTime(end));
    }
  }
  const off = variants[0]!;
  const row: Row = { workload: name, ms: {}, savedUs: {}, identical: {} };
  for (const v of variants) {
    row.ms[v.s.label] = +median(v.times).toFixed(4);
    row.savedUs[v.s.label] = +((median(off.times) - median(v.times)) * 1000).toFixed(1);
    row.identical[v.s.label] = v.values.every((x, i) => Object.is(x, off.values[i]));
  }
  rows.push(row);
  console.log(
    `${name.padEnd(20)} ${SETTINGS.map((s) => row.ms[s.label]!.toFixed(4).padStart(16)).join('')}   ${String(row.savedUs['after-kernel']).padStart(10)} ${String(row.savedUs['all']).padStart(10)}       ${String(Object.values(row.identical).every(Boolean))}`,
  );
  save();
}
setPdlEnabled(undefined);
setPdlPolicy(undefined);
