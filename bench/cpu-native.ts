/**
 * Native CPU path benchmark, side by side in one run (variants interleaved rep by rep, so a
 * change in machine load hits every variant alike): float32 GEMM at n^3 through the native
 * kernel with 1 and 2 threads, the existing Wasm f64x2 engine (gemm.ts) and the compiled Wasm
 * f32x4 GEMM (kiln.compile of a linear on the wasm path); and the elementwise workload compiled
 * on the native and wasm paths. Reports medians of wall time, GFLOP/s, and the process CPU time
 * per rep (on a shared machine, wall / CPU shows how much of the time the threads actually ran),
 * with the load average before and after. Writes JSON when given --out FILE.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/cpu-native.js [--n 1024] [--reps 15] [--out bench/results/x.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { gemm } from '../src/kernels/cpu/gemm.js';
import { cpuPathInfo, setCpuPath, sgemm } from '../src/kernels/cpu/native/index.js';
import type { Tensor } from '../src/tensor/tensor.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
}
const N = Number(arg('n', '1024'));
const REPS = Number(arg('reps', '15'));
const OUT = arg('out', '');

function randomArray(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 4294967296 - 0.5;
  }
  return out;
}

interface Variant {
  name: string;
  flops: number;
  run: () => void;
  wall: number[];
  cpu: number[];
}

const a = randomArray(N * N, 1);
const b = randomArray(N * N, 2);
const c = new Float32Array(N * N);
const row = (data: Float32Array) => ({ data, offset: 0, rowStride: N, colStride: 1 });
const gemmFlops = 2 * N ** 3;

const ta = kiln.tensor(Array.from(a), { dtype: 'float32' }).reshape([N, N]);
const tb = kiln.tensor(Array.from(b), { dtype: 'float32' }).reshape([N, N]);
setCpuPath('wasm');
const wasmLinear = kiln.compile((x: Tensor, w: Tensor) => kiln.nn.functional.linear(x, w));
wasmLinear(ta, tb);
const elementwise = (x: Tensor): Tensor => {
  let y = kiln.add(kiln.mul(x, 1.5), 0.5);
  y = kiln.mul(kiln.relu(y), kiln.sigmoid(x));
  y = kiln.add(y, kiln.tanh(kiln.mul(x, 0.5)));
  y = kiln.sub(y, kiln.mul(kiln.exp(kiln.neg(kiln.mul(x, x))), 0.1));
  return kiln.sub(kiln.mul(y, 2), 1);
};
const ewWasm = kiln.compile(elementwise);
ewWasm(ta);
setCpuPath('native');
const ewNative = kiln.compile(elementwise);
ewNative(ta);
setCpuPath(undefined);

const onPath = (p: 'native' | 'wasm', fn: () => void) => () => {
  setCpuPath(p);
  try {
    fn();
  } finally {
    setCpuPath(undefined);
  }
};
const variants: Variant[] = [
  { name: `native sgemm 1 thread`, flops: gemmFlops, run: () => sgemm(N, N, N, 1, row(a), row(b), 0, { data: c, offset: 0, stride: 1, ldc: N }, { threads: 1 }) },
  { name: `native sgemm 2 threads`, flops: gemmFlops, run: () => sgemm(N, N, N, 1, row(a), row(b), 0, { data: c, offset: 0, stride: 1, ldc: N }, { threads: 2 }) },
  { name: 'wasm f64x2 engine (eager gemm.ts)', flops: gemmFlops, run: onPath('wasm', () => gemm(N, N, N, 1, row(a), row(b), 0, { ...row(c) })) },
  { name: 'wasm f32x4 compiled linear', flops: gemmFlops, run: onPath('wasm', () => wasmLinear(ta, tb).dispose()) },
  { name: 'kiln.matmul (native path, default threads)', flops: gemmFlops, run: onPath('native', () => kiln.matmul(ta, tb).dispose()) },
  { name: `elementwise-${N} compiled, native`, flops: 0, run: onPath('native', () => ewNative(ta).dispose()) },
  { name: `elementwise-${N} compiled, wasm`, flops: 0, run: onPath('wasm', () => ewWasm(ta).dispose()) },
].map((v) => ({ ...v, wall: [], cpu: [] }));

const load0 = os.loadavg();
for (const v of variants) v.run(); // warm-up
for (let r = 0; r < REPS; r++) {
  for (const v of variants) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    v.run();
    v.wall.push(performance.now() - t0);
    const cu = process.cpuUsage(c0);
    v.cpu.push((cu.user + cu.system) / 1000);
  }
}
const load1 = os.loadavg();
const median = (xs: number[]): number => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)]!;
const rows = variants.map((v) => {
  const ms = median(v.wall);
  const cpuMs = median(v.cpu);
  return { name: v.name, medianMs: ms, minMs: Math.min(...v.wall), medianCpuMs: cpuMs, gflops: v.flops ? v.flops / (ms * 1e6) : null, gflopsPerCpuSecond: v.flops ? v.flops / (cpuMs * 1e6) : null };
});
const info = cpuPathInfo();
console.log(`n = ${N}, ${REPS} interleaved reps; cpu path ${info.path}: ${info.reason}`);
console.log(`load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')} (${os.availableParallelism()} cpus)`);
for (const r of rows) {
  console.log(`${r.name.padEnd(44)} ${r.medianMs.toFixed(2).padStart(9)} ms (min ${r.minMs.toFixed(2)}, cpu ${r.medianCpuMs.toFixed(2)})${r.gflops ? `  ${r.gflops.toFixed(1).padStart(6)} GFLOP/s  (${r.gflopsPerCpuSecond!.toFixed(1)} per cpu-second)` : ''}`);
}
if (OUT) {
  fs.writeFileSync(OUT, `${JSON.stringify({ date: new Date().toISOString(), n: N, reps: REPS, cpu: os.cpus()[0]?.model, cpus: os.availableParallelism(), loadavgBefore: load0, loadavgAfter: load1, cpuPath: info, results: rows }, null, 2)}\n`);
  console.log(`wrote ${OUT}`);
}
