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
 *   node dist/bench/cuda-gemv.js [--rows 1,8] [--runs 40] [--batches 7] [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { deviceMsBehindSpin } from './cuda-spin.js';
import { gemvSource, gemvWarpsPerRow, runGemv } from '../src/kernels/cuda/gemv.js';
import { ptrOf } from '../src/kernels/cuda/device.js';
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

for (const s of SHAPES) {
  const wBytes = s.n * s.k * 2;
  const copies = Math.max(1, Math.min(64, Math.ceil(MIN_BYTES / wBytes)));
  const ws: Tensor[] = Array.from({ length: copies }, () => kiln.keep(kiln.mul(kiln.randn([s.n, s.k], { device: 'cuda' }), 0.02).to('bfloat16')));
  for (const m of rowsList) {
    const x = kiln.keep(kiln.randn([m, s.k], { device: 'cuda' }).to('bfloat16'));
    const out = kiln.keep(kiln.empty([m, s.n], { dtype: 'bfloat16', device: 'cuda' }));
    const bytes = wBytes + m * s.k * 2 + m * s.n * 2;
    const record = (impl: string, fn: () => void): void => {
      for (let i = 0; i < copies + 2; i++) kiln.scope(fn); // warm-up: kernels loaded, plans made
      const ms = deviceMsBehindSpin(fn, { runs, batches, spinNs: 5_000_000 });
      rows.push({ shape: s.name, n: s.n, k: s.k, m, impl, us: ms * 1e3, gbps: bytes / (ms * 1e-3) / 1e9 });
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
    record('cublaslt', () => void kiln.linear(x, next()));
    setOption('KILN_GEMV_MAX_ROWS', undefined);
    for (const t of [x, out]) t.dispose();
  }
  for (const w of ws) w.dispose();
}

const pad = (v: string, n: number): string => v.padEnd(n);
console.log(`${pad('shape', 9)}${pad('N x K', 14)}${pad('M', 4)}${pad('impl', 20)}${pad('us', 9)}GB/s`);
for (const r of rows) console.log(`${pad(r.shape, 9)}${pad(`${r.n}x${r.k}`, 14)}${pad(String(r.m), 4)}${pad(r.impl, 20)}${pad(r.us.toFixed(2), 9)}${r.gbps.toFixed(0)}`);
// The decode step's linears at batch 1: 28 layers of qkv, o, gate_up, down, and the LM head.
for (const m of rowsList) {
  const best = (shape: string, pick: (r: Row) => boolean): number => Math.min(...rows.filter((r) => r.shape === shape && r.m === m && pick(r)).map((r) => r.us));
  const step = (pick: (r: Row) => boolean): number => 28 * (best('qkv', pick) + best('o', pick) + best('gate_up', pick) + best('down', pick)) + best('lm_head', pick);
  console.log(`M=${m}: the step's 113 linears, gemv auto ${(step((r) => r.impl.startsWith('gemv auto')) / 1e3).toFixed(3)} ms; best gemv kw per shape ${(step((r) => r.impl.startsWith('gemv')) / 1e3).toFixed(3)} ms; cublaslt ${(step((r) => r.impl === 'cublaslt') / 1e3).toFixed(3)} ms`);
}
if (jsonPath) {
  fs.writeFileSync(jsonPath, JSON.stringify({ bench: 'cuda-gemv', host: os.hostname(), device: deviceInfo(0).name, sms, date: new Date().toISOString(), runs, batches, rows }, null, 2));
  console.log(`wrote ${jsonPath}`);
}
