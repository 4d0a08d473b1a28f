/**
 * How close the bfloat16 GEMV (src/kernels/cuda/gemv.ts) comes to the H200's memory bandwidth on
 * Qwen3-0.6B's decode shapes (issue #17: the step's 113 linears are most of its 1.2 ms, while the
 * 1.19 GB of weights stream in ~0.28 ms at the bandwidth). Per shape (W [N, K]) and rows M:
 *   - gemv auto: the kernel as dispatch runs it (warps per output column from gemvWarpsPerRow);
 *   - gemv kw=1/2/4/8: the same source with the split of K over 1..8 warps forced (does a wider
 *     split, or a narrower one, stream faster than the heuristic's pick?);
 *   - cublaslt: kiln.linear with KILN_GEMV_MAX_ROWS=0 (cuBLASLt's pick, as before the GEMV).
 * Device time per call, with the host's enqueue gaps hidden behind a spin kernel (cuda-spin.ts),
 * so each row is a kernel's time plus the GPU's gap between back-to-back kernels, as inside a
 * CUDA graph. Each call reads another copy of W (copies cycled, at least 256 MB in all), so W
 * comes from HBM and not from the 50 MB L2, as in a decode step. GB/s counts W, x and out once.
 *
 * Guards (session 15 ran it twice into the device call's cap; `timeout 40` did not end it): every
 * wait for the device polls an event with a bound (--timeout-ms) and throws naming the row instead
 * of blocking in the driver; a progress line is written synchronously before and after each row;
 * rows stop starting past --budget-s (what was measured is still printed); the spin kernel's
 * length follows the host's measured enqueue time per call (runs behind it, so the spin really
 * covers the queueing, capped at 200 ms); the weights are drawn on the device (the host randn of
 * ~690M values and 2.8 GB of uploads took tens of seconds); and the process exits explicitly.
 * Chains of the decode shapes with PDL and KILN_GEMV_PREFETCH: bench/cuda-gemv-chain.ts.
 *
 *   node dist/bench/cuda-gemv.js [--rows 1,8] [--runs 40] [--batches 7] [--shapes qkv,o,gate_up,down,lm_head]
 *       [--timeout-ms 15000] [--budget-s 150] [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { deviceMsBehindSpin, syncWithin } from './cuda-spin.js';
import { gemvSource, gemvWarpsPerRow, runGemv } from '../src/kernels/cuda/gemv.js';
import { ptrOf } from '../src/kernels/cuda/device.js';
import { fillUniformStd_ } from '../src/models/init.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch, type ParamType } from '../src/runtime/cuda/launch.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { getAccelerator } from '../src/runtime/registry.js';
import { setOption } from '../src/runtime/config.js';
import type { Tensor } from '../src/tensor/tensor.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const rowsList = (flag('--rows') ?? '1,8').split(',').map(Number);
const runs = Number(flag('--runs') ?? 40);
const batches = Number(flag('--batches') ?? 7);
const jsonPath = flag('--json');
const shapeFilter = flag('--shapes')?.split(',');
const timeoutMs = Number(flag('--timeout-ms') ?? 15_000);
const budgetMs = Number(flag('--budget-s') ?? 150) * 1e3;
const t0 = performance.now();
/** A line on stdout now (synchronous, so a later hang cannot swallow it). */
const say = (s: string): void => void fs.writeSync(1, `${s}\n`);

/** Qwen3-0.6B's decode linears (after horizontal fusion of q/k/v and of gate/up): [N, K]. */
const SHAPES: readonly { name: string; n: number; k: number }[] = [
  { name: 'qkv', n: 4096, k: 1024 },
  { name: 'o', n: 1024, k: 2048 },
  { name: 'gate_up', n: 6144, k: 1024 },
  { name: 'down', n: 1024, k: 3072 },
  { name: 'lm_head', n: 151936, k: 1024 },
];
const PARAMS: readonly ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i64', 'i64', 'i64'];
const THREADS = 256;
const MIN_BYTES = 256 * 2 ** 20;

const acc = getAccelerator('cuda') as unknown as CudaAccelerator;
const stream = acc.defaultStream(0);
const sms = deviceInfo(0).smCount;

interface Row {
  shape: string;
  n: number;
  k: number;
  m: number;
  impl: string;
  us: number;
  gbps: number;
}
const rows: Row[] = [];

let skipped = 0;
const gen = new kiln.Generator(7);
for (const s of SHAPES) {
  if (shapeFilter && !shapeFilter.includes(s.name)) continue;
  const wBytes = s.n * s.k * 2;
  const copies = Math.max(1, Math.min(64, Math.ceil(MIN_BYTES / wBytes)));
  say(`[${((performance.now() - t0) / 1e3).toFixed(1)}s] ${s.name}: ${copies} weight copies of ${s.n}x${s.k}`);
  // Drawn on the device (models/init.ts; cuda draws the words itself). Before, kiln.randn drew ~690M
  // float32 normals on the host (about 0.15 s per million here: over a minute) and uploaded 2.8 GB,
  // far past session 15's `timeout 40` before the first row: the likely cause of its two hangs.
  const ws: Tensor[] = Array.from({ length: copies }, () => kiln.keep(fillUniformStd_(kiln.empty([s.n, s.k], { dtype: 'bfloat16', device: 'cuda' }), 0.02, gen)));
  syncWithin(timeoutMs, `${s.name}: weights`);
  for (const m of rowsList) {
    const x = kiln.keep(fillUniformStd_(kiln.empty([m, s.k], { dtype: 'bfloat16', device: 'cuda' }), 1, gen));
    const out = kiln.keep(kiln.empty([m, s.n], { dtype: 'bfloat16', device: 'cuda' }));
    const bytes = wBytes + m * s.k * 2 + m * s.n * 2;
    const record = (impl: string, fn: () => void): void => {
      const label = `${s.name} M=${m} ${impl}`;
      if (performance.now() - t0 > budgetMs) {
        skipped++;
        say(`skip ${label} (past --budget-s)`);
        return;
      }
      say(`[${((performance.now() - t0) / 1e3).toFixed(1)}s] ${label} ...`);
      kiln.scope(fn); // first call: kernels compiled and loaded, plans made
      syncWithin(timeoutMs, `${label} (first call)`);
      // Warm-up, timing the host's enqueue per call: the spin must outlast `runs` of them.
      const h0 = performance.now();
      for (let i = 0; i < copies + 2; i++) kiln.scope(fn);
      const hostMs = (performance.now() - h0) / (copies + 2);
      syncWithin(timeoutMs, `${label} (warm-up)`);
      const spinNs = Math.min(200e6, Math.max(5e6, Math.ceil(3 * runs * hostMs * 1e6)));
      const ms = deviceMsBehindSpin(fn, { runs, batches, spinNs, timeoutMs, label });
      rows.push({ shape: s.name, n: s.n, k: s.k, m, impl, us: ms * 1e3, gbps: bytes / (ms * 1e-3) / 1e9 });
      say(`  ${(ms * 1e3).toFixed(2)} us (host ${(hostMs * 1e3).toFixed(1)} us/call, spin ${(spinNs / 1e6).toFixed(1)} ms)`);
    };
    let i = 0;
    const next = (): Tensor => ws[i++ % copies]!;
    const problem = (w: Tensor) => ({ m, n: s.n, k: s.k, x: ptrOf(x), ldx: s.k, w: ptrOf(w), ldw: s.k, out: ptrOf(out), ldo: s.n });
    record(`gemv auto (kw=${gemvWarpsPerRow(s.n, sms)})`, () => runGemv(0, stream, problem(next())));
    for (const kw of [1, 2, 4, 8]) {
      const kern = kernelFromSource(0, gemvSource(m, kw), `kiln_gemv_bf16_m${m}_kw${kw}`, PARAMS);
      const grid = Math.ceil(s.n / (THREADS / 32 / kw));
      record(`gemv kw=${kw}`, () => launch(kern, [ptrOf(x), ptrOf(next()), ptrOf(out), 0, s.n, s.k, s.k, s.k, s.n], { grid, block: THREADS }, stream));
    }
    setOption('KILN_GEMV_MAX_ROWS', 0);
    try {
      record('cublaslt', () => void kiln.linear(x, next()));
    } finally {
      setOption('KILN_GEMV_MAX_ROWS', undefined);
    }
    for (const t of [x, out]) t.dispose();
  }
  for (const w of ws) w.dispose();
}

const pad = (v: string, n: number): string => v.padEnd(n);
if (skipped) say(`${skipped} rows skipped past --budget-s`);
console.log(`${pad('shape', 9)}${pad('N x K', 14)}${pad('M', 4)}${pad('impl', 20)}${pad('us', 9)}GB/s`);
for (const r of rows) console.log(`${pad(r.shape, 9)}${pad(`${r.n}x${r.k}`, 14)}${pad(String(r.m), 4)}${pad(r.impl, 20)}${pad(r.us.toFixed(2), 9)}${r.gbps.toFixed(0)}`);
// The decode step's linears at batch 1: 28 layers of qkv, o, gate_up, down, and the LM head.
for (const m of rowsList) {
  if (SHAPES.some((s) => !rows.some((r) => r.shape === s.name && r.m === m))) continue; // a shape not measured
  const best = (shape: string, pick: (r: Row) => boolean): number => Math.min(...rows.filter((r) => r.shape === shape && r.m === m && pick(r)).map((r) => r.us));
  const step = (pick: (r: Row) => boolean): number => 28 * (best('qkv', pick) + best('o', pick) + best('gate_up', pick) + best('down', pick)) + best('lm_head', pick);
  console.log(`M=${m}: the step's 113 linears, gemv auto ${(step((r) => r.impl.startsWith('gemv auto')) / 1e3).toFixed(3)} ms; best gemv kw per shape ${(step((r) => r.impl.startsWith('gemv')) / 1e3).toFixed(3)} ms; cublaslt ${(step((r) => r.impl === 'cublaslt') / 1e3).toFixed(3)} ms`);
}
if (jsonPath) {
  fs.writeFileSync(jsonPath, JSON.stringify({ bench: 'cuda-gemv', host: os.hostname(), device: deviceInfo(0).name, sms, date: new Date().toISOString(), runs, batches, rows }, null, 2));
  console.log(`wrote ${jsonPath}`);
}
// Exit explicitly: nothing left open (a worker, a handle) may keep the device call waiting.
process.exit(0);
