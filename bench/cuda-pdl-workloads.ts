/**
 * Benchmark workloads with programmatic dependent launch on and off, side by side in one process.
 * Per workload: one build (weights, inputs), then two compiled functions, one compiled (and its
 * CUDA graph captured) with PDL on, one with it off (setPdlEnabled decides whether sources get the
 * prologue and launches the attribute). Reps alternate eager-on, eager-off, compiled-on,
 * compiled-off, so clock drift hits all four alike; each is timed with CUDA events around one call,
 * median reported. Both compiled outputs are compared bit for bit.
 *
 *   node dist/bench/cuda-pdl-workloads.js [--reps N] [--json out.json] [workload ...]
 *   (default: elementwise-1024 mlp-64x512 transformer-block qwen3-0.6b-forward, bfloat16)
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { getWorkload } from '../src/bench/workloads.js';
import { launchStats } from '../src/runtime/cuda/launch.js';
import { setPdlEnabled } from '../src/runtime/cuda/pdl.js';
import type { Tensor } from '../src/tensor/tensor.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const names = argv.filter((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--'));
const workloads = names.length > 0 ? names : ['elementwise-1024', 'mlp-64x512', 'transformer-block', 'qwen3-0.6b-forward'];
// 30 alternating rounds: enough for a stable median of graph replays (tens of us to 2 ms each).
const REPS = Number(flag('--reps') ?? 30);
const WARMUP = 5;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Row {
  workload: string;
  eagerOnMs: number;
  eagerOffMs: number;
  compiledOnMs: number;
  compiledOffMs: number;
  compiledSavedUs: number;
  pdlLaunchesPerCompiledCall: number;
  compiledIdentical: boolean;
}

const rows: Row[] = [];
const out = flag('--json');
// Written after every workload, so a run stopped by a time limit keeps what it finished.
const save = (): void => {
  if (out) fs.writeFileSync(out, JSON.stringify({ date: new Date().toISOString(), command: `node dist/bench/cuda-pdl-workloads.js ${argv.join(' ')}`, reps: REPS, dtype: 'bfloat16', rows }, null, 1));
};
console.log('workload              eager on  eager off  compiled on  compiled off  saved us  identical');
for (const name of workloads) {
  const w = getWorkload(name).build({ size: 'full', device: 'cuda', dtype: 'bfloat16' });
  const variants = [true, false].map((on) => {
    setPdlEnabled(on);
    const cf = kiln.compile(w.forward, { name: `${name}-pdl-${on ? 'on' : 'off'}` });
    // The first call outside kiln.scope: tensors made lazily on a first forward must outlive it.
    const first = kiln.noGrad(() => cf(...w.inputs)) as Tensor;
    const out = first.to('float32').toFlatArray() as number[];
    first.dispose();
    return { on, cf, out };
  });
  const identical = variants[0]!.out.every((x, i) => Object.is(x, variants[1]!.out[i]));
  const start = new kiln.Event('cuda');
  const end = new kiln.Event('cuda');
  const time = (on: boolean, f: () => void): number => {
    setPdlEnabled(on);
    kiln.scope(() => {
      start.record();
      kiln.noGrad(f);
      end.record();
      end.synchronize();
    });
    return start.elapsedTime(end);
  };
  const t = { eagerOn: [] as number[], eagerOff: [] as number[], on: [] as number[], off: [] as number[] };
  let pdlLaunches = 0;
  for (let r = 0; r < WARMUP + REPS; r++) {
    const e1 = time(true, () => void w.forward(...w.inputs));
    const e0 = time(false, () => void w.forward(...w.inputs));
    const before = launchStats.pdl;
    const c1 = time(true, () => void variants[0]!.cf(...w.inputs));
    pdlLaunches = launchStats.pdl - before;
    const c0 = time(false, () => void variants[1]!.cf(...w.inputs));
    if (r < WARMUP) continue;
    t.eagerOn.push(e1);
    t.eagerOff.push(e0);
    t.on.push(c1);
    t.off.push(c0);
  }
  const row: Row = {
    workload: name,
    eagerOnMs: +median(t.eagerOn).toFixed(4),
    eagerOffMs: +median(t.eagerOff).toFixed(4),
    compiledOnMs: +median(t.on).toFixed(4),
    compiledOffMs: +median(t.off).toFixed(4),
    compiledSavedUs: +((median(t.off) - median(t.on)) * 1000).toFixed(1),
    // Zero when the compiled call is one CUDA graph replay (the launches happened at capture).
    pdlLaunchesPerCompiledCall: pdlLaunches,
    compiledIdentical: identical,
  };
  rows.push(row);
  console.log(
    `${name.padEnd(20)} ${row.eagerOnMs.toFixed(3).padStart(9)} ${row.eagerOffMs.toFixed(3).padStart(10)} ${row.compiledOnMs.toFixed(4).padStart(12)} ${row.compiledOffMs.toFixed(4).padStart(13)} ${row.compiledSavedUs.toFixed(1).padStart(9)}  ${String(identical)}`,
  );
  save();
}
setPdlEnabled(undefined);
