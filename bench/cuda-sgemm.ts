/**
 * Exact-fp32 GEMMs of Qwen3-0.6B at M = 128 tokens on cuda: kiln.linear (cuBLASLt, autotuned as
 * the compiled model runs it) against the experimental SIMT kernel of
 * src/kernels/cuda/codegen/sgemm-simt.ts over tiles x split-K factors, in device time (15 batches
 * of 20 calls queued behind a spin kernel, median per call; warm L2 on both sides, as torch's side
 * in scripts/device/f32_torch.py). Each SIMT row also reports max |simt - cuBLASLt| relative to
 * max |cuBLASLt| (both exact fp32: differences are summation order only, ~1e-6).
 *
 *   node dist/bench/cuda-sgemm.js [out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch } from '../src/runtime/cuda/launch.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { getAccelerator } from '../src/runtime/registry.js';
import { ptrOf } from '../src/kernels/cuda/device.js';
import { SGEMM_PARAMS, SGEMM_REDUCE_NAME, SGEMM_REDUCE_PARAMS, SGEMM_THREADS, sgemmName, sgemmReduceSource, sgemmSource, type SgemmTile } from '../src/kernels/cuda/codegen/sgemm-simt.js';

const M = 128;
const SHAPES: { name: string; k: number; n: number }[] = [
  { name: 'qkv', k: 1024, n: 4096 },
  { name: 'o', k: 2048, n: 1024 },
  { name: 'gate_up', k: 1024, n: 6144 },
  { name: 'down', k: 3072, n: 1024 },
  { name: 'lm_head', k: 1024, n: 151936 },
];
const TILES: SgemmTile[] = [
  { bm: 128, bn: 128, bk: 16 },
  { bm: 128, bn: 128, bk: 8 },
  { bm: 128, bn: 64, bk: 16 },
  { bm: 64, bn: 64, bk: 16 },
];
const SPLITS = [1, 2, 3, 4, 6, 8, 12, 16];
const SHAPE_FILTER = process.env['KILN_SGEMM_SHAPES']?.split(',');

const REPS = 15;
const BATCH = 20;
const SPIN = `extern "C" __global__ void kiln_spin(long long ns) { long long t = 0; while (t < ns) { __nanosleep(100000); t += 100000; } }`;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const stream = (getAccelerator('cuda') as unknown as CudaAccelerator).defaultStream(0);
const spin = kernelFromSource(0, SPIN, 'kiln_spin', ['i64']);

function time(body: () => void): number {
  for (let i = 0; i < 3; i++) body();
  kiln.synchronize('cuda');
  const ms: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const s = new kiln.Event('cuda');
    const e = new kiln.Event('cuda');
    launch(spin, [3_000_000], { grid: 1, block: 1 }, stream);
    s.record();
    for (let j = 0; j < BATCH; j++) body();
    e.record();
    e.synchronize();
    ms.push(s.elapsedTime(e) / BATCH);
  }
  return median(ms);
}

interface Row {
  shape: string;
  impl: string;
  ms: number;
  tflops: number;
  rel_diff?: number;
}

function main(): void {
  const rows: Row[] = [];
  const reduce = kernelFromSource(0, sgemmReduceSource(), SGEMM_REDUCE_NAME, SGEMM_REDUCE_PARAMS);
  for (const sh of SHAPES.filter((s) => !SHAPE_FILTER || SHAPE_FILTER.includes(s.name))) {
    const { k, n } = sh;
    const g = new kiln.Generator(1);
    const x = kiln.randn([M, k], { generator: g, device: 'cuda' });
    const w = kiln.randn([n, k], { generator: g, device: 'cuda' }).mul(1 / Math.sqrt(k));
    const flop = 2 * M * k * n;
    const label = `[${M}x${k}]@[${k}x${n}]`;
    const outs: Tensor[] = [];
    const ref = kiln.linear(x, w, null);
    const cub = time(() => outs.push(kiln.linear(x, w, null)));
    for (const o of outs.splice(0)) o.dispose();
    rows.push({ shape: label, impl: 'cublaslt', ms: cub, tflops: flop / cub / 1e9 });
    console.log(`${sh.name.padEnd(8)} ${label.padEnd(24)} cublaslt ${(cub * 1000).toFixed(1).padStart(7)} us ${(flop / cub / 1e9).toFixed(1).padStart(5)} TFLOP/s`);
    const refMax = ref.abs().max().item() as number;
    const out = kiln.empty([M, n], { device: 'cuda' });
    let best = { ms: Infinity, what: '' };
    for (const t of TILES) {
      const kern = kernelFromSource(0, sgemmSource(t), sgemmName(t), SGEMM_PARAMS);
      for (const s of SPLITS) {
        if (k % (s * t.bk) !== 0) continue;
        const tiles = Math.ceil(n / t.bn) * Math.ceil(M / t.bm);
        if (s > 1 && tiles >= 264) continue; // already two blocks per SM: nothing to gain
        const ws = s > 1 ? kiln.empty([s, M, n], { device: 'cuda' }) : null;
        const run = (): void => {
          launch(kern, [ptrOf(x), ptrOf(w), ptrOf(ws ?? out), 0, M, n, k, k, k, n, k / s], { grid: Math.ceil(n / t.bn), gridY: Math.ceil(M / t.bm), gridZ: s, block: SGEMM_THREADS }, stream);
          if (ws) launch(reduce, [ptrOf(ws), ptrOf(out), 0, M, n, n, s], { grid: Math.ceil((M * n) / 4 / 256), block: 256 }, stream);
        };
        const ms = time(run);
        const diff = (kiln.sub(out, ref).abs().max().item() as number) / refMax;
        const impl = `simt ${t.bm}x${t.bn}x${t.bk} split ${s}`;
        rows.push({ shape: label, impl, ms, tflops: flop / ms / 1e9, rel_diff: diff });
        if (ms < best.ms) best = { ms, what: impl };
        console.log(`         ${impl.padEnd(28)} ${(ms * 1000).toFixed(1).padStart(7)} us ${(flop / ms / 1e9).toFixed(1).padStart(5)} TFLOP/s  rel diff ${diff.toExponential(1)}`);
        ws?.dispose();
      }
    }
    console.log(`BEST ${sh.name} cublaslt ${(cub * 1000).toFixed(1)} us  simt ${(best.ms * 1000).toFixed(1)} us (${best.what})`);
    for (const t of [x, w, ref, out]) t.dispose();
  }
  if (process.argv[2]) fs.writeFileSync(process.argv[2], JSON.stringify({ device: 'cuda', m: M, rows }, null, 1));
}

main();
