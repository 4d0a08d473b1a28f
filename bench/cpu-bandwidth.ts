/**
 * Memory bandwidth of this machine as Kiln can reach it (issue #17: the bound of cpu decode is
 * bandwidth / weight bytes read per token). Buffers are far larger than the caches (default
 * 256 MiB per array against a 32 MiB L3), so every pass streams from DRAM.
 *
 * Variants, interleaved rep by rep (a change of machine load hits all alike), medians reported:
 * - native C (built by Kiln's toolchain with its flags, -O3 -march=native -fopenmp), 1 and 2 (or
 *   --threads) OpenMP threads: `read` (a float32 sum, the access pattern of a GEMV over weights;
 *   bytes = the array), and STREAM's copy / scale / add / triad (bytes counted as STREAM does:
 *   read + written arrays, no write-allocate traffic);
 * - Wasm SIMD read (one thread: Kiln's Wasm workers are not used here), a f32x4 sum over a
 *   Memory of the same size;
 * - JavaScript read (a Float32Array sum loop).
 * The best read rate is "the machine's measured bandwidth" the decode bench divides by.
 *
 *   node dist/bench/cpu-bandwidth.js [--mib 256] [--reps 7] [--threads 2] [--json bench/results/x.json]
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { bandwidthKernels } from './bandwidth-lib.js';
import { encodeModule, F32, FnBuilder, get, I32, i32c, set, simd, v128Load, V128, V128_ZERO, wasmApi, ADD, LOOP, END, BLOCK, brIf, br, GE_U, OP } from '../src/kernels/cpu/wasm-asm.js';

const { values: a } = parseArgs({ options: { mib: { type: 'string', default: '256' }, reps: { type: 'string', default: '7' }, threads: { type: 'string', default: String(os.availableParallelism()) }, json: { type: 'string' } } });
const MIB = Number(a.mib);
const REPS = Number(a.reps);
const N = (MIB * 1024 * 1024) / 4;
const maxThreads = Number(a.threads);


interface Variant {
  name: string;
  threads: number;
  bytes: number;
  run: () => void;
  secs: number[];
}
const variants: Variant[] = [];

const A = new Float32Array(N).fill(1);
const B = new Float32Array(N).fill(2);
const C = new Float32Array(N).fill(0);

const k = bandwidthKernels();
if (typeof k !== 'string') {
  for (const t of [...new Set([1, maxThreads])]) {
    variants.push({ name: 'native read', threads: t, bytes: 4 * N, run: () => k.read(A, N, t), secs: [] });
    variants.push({ name: 'native copy', threads: t, bytes: 8 * N, run: () => k.copy(C, A, N, t), secs: [] });
    variants.push({ name: 'native scale', threads: t, bytes: 8 * N, run: () => k.scale(B, C, N, t), secs: [] });
    variants.push({ name: 'native add', threads: t, bytes: 12 * N, run: () => k.add(C, A, B, N, t), secs: [] });
    variants.push({ name: 'native triad', threads: t, bytes: 12 * N, run: () => k.triad(A, B, C, N, t), secs: [] });
  }
} else {
  console.error(`cpu-bandwidth: no native toolchain (${k}); Wasm and JS only`);
}

// Wasm SIMD read: sum(ptr, bytes) with four f32x4 accumulators (64 bytes per iteration).
const W = wasmApi();
if (W) {
  const f = new FnBuilder('sum', [I32, I32], [F32]);
  const [p, end] = [0, 1];
  const acc = [f.local(V128), f.local(V128), f.local(V128), f.local(V128)];
  for (const r of acc) f.emit(V128_ZERO, set(r));
  f.emit(BLOCK, LOOP, get(p), get(end), GE_U, brIf(1));
  for (let j = 0; j < 4; j++) f.emit(get(acc[j]!), get(p), v128Load(16 * j), OP.F32X4_ADD, set(acc[j]!));
  f.emit(get(p), i32c(64), ADD, set(p), br(0), END, END);
  f.emit(get(acc[0]!), get(acc[1]!), OP.F32X4_ADD, get(acc[2]!), OP.F32X4_ADD, get(acc[3]!), OP.F32X4_ADD, simd(0x1f), [0]);
  const pages = (4 * N) / 65536 + 1;
  const inst = new W.Instance(new W.Module(encodeModule({ functions: [f], pages, memory: 'export' })), {});
  const mem = new Float32Array((inst.exports.mem as { buffer: ArrayBuffer }).buffer);
  mem.fill(1, 0, N);
  const sum = inst.exports.sum as (p: number, e: number) => number;
  variants.push({ name: 'wasm read', threads: 1, bytes: 4 * N, run: () => sum(0, 4 * N), secs: [] });
}

variants.push({
  name: 'js read',
  threads: 1,
  bytes: 4 * N,
  run: () => {
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (let i = 0; i < N; i += 4) {
      s0 += A[i]!;
      s1 += A[i + 1]!;
      s2 += A[i + 2]!;
      s3 += A[i + 3]!;
    }
    if (s0 + s1 + s2 + s3 < 0) throw new Error('unreachable');
  },
  secs: [],
});

const loadBefore = os.loadavg();
for (const v of variants) v.run(); // warm-up (page faults, JIT)
for (let r = 0; r < REPS; r++) {
  for (const v of variants) {
    const t0 = performance.now();
    v.run();
    v.secs.push((performance.now() - t0) / 1000);
  }
}
const loadAfter = os.loadavg();
const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
const rows = variants.map((v) => ({ name: v.name, threads: v.threads, mib_per_array: MIB, gb_s_median: Number((v.bytes / median(v.secs) / 1e9).toFixed(2)), gb_s_best: Number((v.bytes / Math.min(...v.secs) / 1e9).toFixed(2)) }));
const reads = rows.filter((r) => r.name.endsWith('read'));
const best = reads.reduce((x, y) => (y.gb_s_median > x.gb_s_median ? y : x));
for (const r of rows) console.log(`${r.name.padEnd(13)} ${r.threads} thr  median ${String(r.gb_s_median).padStart(6)} GB/s  best ${r.gb_s_best}`);
console.log(`machine bandwidth (best read median): ${best.gb_s_median} GB/s (${best.name}, ${best.threads} threads); load ${loadBefore.map((x) => x.toFixed(2)).join(' ')} -> ${loadAfter.map((x) => x.toFixed(2)).join(' ')}`);

let commit = '';
try {
  commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
} catch {
  /* not a checkout */
}
const out = {
  meta: { machine: os.hostname(), cpu: os.cpus()[0]?.model, cpus: os.cpus().length, date: new Date().toISOString(), command: `node dist/bench/cpu-bandwidth.js ${process.argv.slice(2).join(' ')}`, commit, node: process.version, loadavg_before: loadBefore, loadavg_after: loadAfter, reps: REPS },
  bandwidth_gb_s: best.gb_s_median,
  bandwidth_from: `${best.name}, ${best.threads} threads`,
  results: rows,
};
if (a.json) fs.writeFileSync(a.json, JSON.stringify(out, null, 2) + '\n');
