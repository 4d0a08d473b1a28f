/**
 * The copy-bandwidth reference for issue #5's "elementwise-4096 compiled reaches at least 85% of the
 * measured device-to-device copy bandwidth", measured in the same process as the compiled workload
 * and timed the same two ways, so the ratio compares like with like:
 *   - per call, as `kiln bench` times a call: event, the call, event, synchronise; median of many.
 *     Both sides pay one host enqueue and one launch latency per call.
 *   - device time: N calls queued behind a spin kernel (__nanosleep) between two events, so the
 *     host's enqueue gaps are hidden; median of several batches.
 * The copy moves the bytes the workload moves: cuMemcpyDtoDAsync from its input (read) to a buffer
 * of the output's size (write). The three timings (compiled call, raw copy, Kiln `clone`)
 * alternate rep by rep so clock drift hits all of them alike.
 *
 *   node dist/bench/cuda-copy-reference.js [--workload elementwise-4096] [--dtypes float32,bfloat16]
 *     [--reps 200] [--runs 20] [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { getWorkload } from '../src/bench/workloads.js';
import { deviceMsBehindSpin } from './cuda-spin.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { getAccelerator } from '../src/runtime/registry.js';
import type { DType } from '../src/tensor/dtype.js';
import { itemSize } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const workload = flag('--workload') ?? 'elementwise-4096';
const dtypes = (flag('--dtypes') ?? 'float32,bfloat16').split(',') as DType[];
const reps = Number(flag('--reps') ?? 200);
const runs = Number(flag('--runs') ?? 20);

const acc = getAccelerator('cuda') as unknown as CudaAccelerator;
const stream = acc.defaultStream(0);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

/** Per-call ms of each fn, harness style, alternating fn by fn within every rep. */
function perCall(fns: (() => void)[]): number[] {
  const start = new kiln.Event('cuda');
  const end = new kiln.Event('cuda');
  const times = fns.map(() => [] as number[]);
  for (let r = 0; r < reps; r++) {
    fns.forEach((fn, k) => {
      kiln.scope(() => {
        start.record();
        fn();
        end.record();
        end.synchronize();
      });
      times[k]!.push(start.elapsedTime(end));
    });
  }
  return times.map(median);
}

/** Device ms per call of fn: `runs` calls queued behind a spin kernel, median of 5 batches. */
const deviceMs = (fn: () => void): number => deviceMsBehindSpin(fn, { runs, batches: 5 });

interface Row {
  workload: string;
  dtype: DType;
  bytes: number;
  compiled_call_ms: number;
  copy_call_ms: number;
  clone_call_ms: number;
  compiled_device_ms: number;
  copy_device_ms: number;
  /** copy_call_ms / compiled_call_ms: the compiled call's share of per-call copy bandwidth. */
  fraction_of_copy_per_call: number;
  /** copy_device_ms / compiled_device_ms. */
  fraction_of_copy_device: number;
  copy_device_tbps: number;
}

const rows: Row[] = [];
for (const dtype of dtypes) {
  const w = getWorkload(workload).build({ size: 'full', device: 'cuda', dtype });
  const x = w.inputs[0] as Tensor;
  const nbytes = x.numel() * itemSize(x.dtype);
  const dst = kiln.empty(x.shape, { dtype: x.dtype, device: 'cuda' });
  const cf = kiln.compile(w.forward, { name: workload });
  const compiled = (): void => void kiln.noGrad(() => cf(...w.inputs));
  const copy = (): void => acc.copyDeviceToDevice(dst.storage.buffer, 0, x.storage.buffer, x.offset * itemSize(x.dtype), nbytes, stream);
  const clone = (): void => void kiln.noGrad(() => x.clone());
  for (let i = 0; i < 5; i++) kiln.scope(() => (compiled(), copy(), clone()));
  kiln.synchronize('cuda');
  const [compiledCall, copyCall, cloneCall] = perCall([compiled, copy, clone]) as [number, number, number];
  const compiledDevice = deviceMs(compiled);
  const copyDevice = deviceMs(copy);
  const row: Row = {
    workload,
    dtype,
    bytes: 2 * nbytes,
    compiled_call_ms: compiledCall,
    copy_call_ms: copyCall,
    clone_call_ms: cloneCall,
    compiled_device_ms: compiledDevice,
    copy_device_ms: copyDevice,
    fraction_of_copy_per_call: copyCall / compiledCall,
    fraction_of_copy_device: copyDevice / compiledDevice,
    copy_device_tbps: (2 * nbytes) / (copyDevice * 1e-3) / 1e12,
  };
  rows.push(row);
  dst.dispose();
}

const pct = (f: number): string => `${(100 * f).toFixed(1)}%`;
console.log('workload          dtype     call ms: compiled  copy   clone | device ms: compiled  copy (TB/s) | of copy: per call  device');
for (const r of rows) {
  console.log(
    `${r.workload.padEnd(17)} ${r.dtype.padEnd(9)} ${r.compiled_call_ms.toFixed(4).padStart(17)} ${r.copy_call_ms.toFixed(4)} ${r.clone_call_ms.toFixed(4)} | ` +
      `${r.compiled_device_ms.toFixed(4).padStart(18)} ${r.copy_device_ms.toFixed(4)} (${r.copy_device_tbps.toFixed(2)}) | ${pct(r.fraction_of_copy_per_call).padStart(17)} ${pct(r.fraction_of_copy_device).padStart(7)}`,
  );
}
const out = flag('--json');
if (out) {
  const meta = { date: new Date().toISOString(), host: os.hostname(), command: `node dist/bench/cuda-copy-reference.js ${argv.join(' ')}`.trim(), reps, runs };
  fs.writeFileSync(out, JSON.stringify({ meta, rows }, null, 1));
}
