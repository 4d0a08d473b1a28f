/**
 * Eager scaled_dot_product_attention on cuda: Kiln's fused kernel, Kiln's math path (cuBLASLt GEMM +
 * softmax + GEMM, what ran before) and, when a PyTorch results file is given, torch's
 * F.scaled_dot_product_attention on the same shapes (scripts/device/attn_torch.py; is_causal=True,
 * enable_gqa where kv heads differ). Each case: warm-up, then CUDA events around every rep, median
 * of 15 batches of 20 calls queued behind a spin kernel (device time). Rows `{op: 'sdpa', shape, dtype, torch_ms, kiln_ms, kiln_math_ms, speedup}` (speedup =
 * torch_ms / kiln_ms) go to the JSON file given second; a table goes to stdout.
 *
 *   node dist/bench/cuda-sdpa.js [torch.json] [out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { setCudaAttentionPath, setFlashF32Rows, setFlashF32Tile, setFlashTcConfig } from '../src/kernels/cuda/flash-run.js';
import type { F32AsyncTile } from '../src/kernels/cuda/codegen/flash-f32-async.js';
import type { TcConfig } from '../src/kernels/cuda/codegen/flash-tc.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch } from '../src/runtime/cuda/launch.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { getAccelerator } from '../src/runtime/registry.js';

const REPS = 15;
const WARMUP = 5;

/** [batch, q heads, T, head dim] with kv heads; causal unless `s` (a kv length for a decode step) is given. */
export const SDPA_CASES: { name: string; b: number; h: number; hk: number; t: number; d: number; s?: number }[] = [
  { name: 'transformer-block [8,16,512,64]', b: 8, h: 16, hk: 16, t: 512, d: 64 },
  { name: 'qwen3 [1,16,128,128] kv 8', b: 1, h: 16, hk: 8, t: 128, d: 128 },
  { name: 'long [1,16,4096,128]', b: 1, h: 16, hk: 16, t: 4096, d: 128 },
  { name: 'decode q [1,16,1,128] kv 8x4096', b: 1, h: 16, hk: 8, t: 1, d: 128, s: 4096 },
];
// KILN_SDPA_DTYPES=float32 and KILN_SDPA_CASES=qwen3,long (name prefixes) narrow a device run.
const DTYPES = (process.env['KILN_SDPA_DTYPES']?.split(',') ?? ['float32', 'bfloat16']) as ('float32' | 'bfloat16')[];
const CASE_FILTER = process.env['KILN_SDPA_CASES']?.split(',');

/** bf16 tile shapes tried besides the default (warps x row tiles per warp x keys per tile), by head dim. */
export const TC_SWEEP: Record<number, TcConfig[]> = {
  64: [
    { nw: 4, mi: 1, bn: 64 },
    { nw: 8, mi: 1, bn: 64 },
    { nw: 4, mi: 1, bn: 128 },
  ],
  128: [
    { nw: 1, mi: 1, bn: 64 },
    { nw: 2, mi: 1, bn: 64 },
    { nw: 4, mi: 1, bn: 64 },
    { nw: 4, mi: 1, bn: 32 },
    { nw: 8, mi: 1, bn: 32 },
    { nw: 4, mi: 1, bn: 128 },
  ],
};

/** cp.async float32 tiles tried (rows per thread x lanes per row group x keys per tile). */
const F32_SWEEP: F32AsyncTile[] = [
  { rm: 1, tx: 16, bn: 64 },
  { rg: 4, rm: 4, tx: 16, bn: 64 },
  { rg: 4, rm: 4, tx: 16, bn: 32 },
  { rg: 8, rm: 2, tx: 16, bn: 64 },
  { rg: 8, rm: 2, tx: 8, bn: 64 },
  { rg: 8, rm: 4, tx: 16, bn: 32 },
  { rg: 4, rm: 4, tx: 16, bn: 32, ks: 2 },
  { rg: 8, rm: 2, tx: 16, bn: 32, ks: 2 },
  { rm: 1, tx: 16, bn: 32, ks: 2 },
  { rm: 2, tx: 8, bn: 32 },
  { rm: 4, tx: 8, bn: 32 },
];

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// Device time, not the host's: a spin kernel (__nanosleep) holds the stream while the host enqueues
// BATCH calls between two events, so the GPU runs them back to back. Eager timing of single calls
// was dominated by host launch work at the short shapes (qwen3's 20-40 us per call of 5-10 us work).
const SPIN = `extern "C" __global__ void kiln_spin(long long ns) { long long t = 0; while (t < ns) { __nanosleep(100000); t += 100000; } }`;
const BATCH = 20;
const SPIN_NS = 5_000_000;
let spinKernel: ReturnType<typeof kernelFromSource> | null = null;

function time(body: () => Tensor): number {
  for (let i = 0; i < WARMUP; i++) body().dispose();
  kiln.synchronize('cuda');
  spinKernel ??= kernelFromSource(0, SPIN, 'kiln_spin', ['i64']);
  const stream = (getAccelerator('cuda') as unknown as CudaAccelerator).defaultStream(0);
  const ms: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const s = new kiln.Event('cuda');
    const e = new kiln.Event('cuda');
    launch(spinKernel, [SPIN_NS], { grid: 1, block: 1 }, stream);
    s.record();
    const outs: Tensor[] = [];
    for (let j = 0; j < BATCH; j++) outs.push(body());
    e.record();
    e.synchronize();
    ms.push(s.elapsedTime(e) / BATCH);
    for (const o of outs) o.dispose();
  }
  return median(ms);
}

interface Row {
  op: 'sdpa';
  shape: string;
  dtype: string;
  torch_ms: number | null;
  kiln_ms: number;
  kiln_math_ms: number;
  speedup: number | null;
  /** max |fused - math path| over the output (a check on the large shapes the tests do not cover). */
  math_max_diff: number;
  /** Median ms per swept tile (bf16 'warps x tiles x keys', f32 'rm<rows per thread>' register-staged, 'a<rows>x<lanes>x<keys>' cp.async), and max |swept - default|. */
  sweep?: Record<string, number>;
  sweep_max_diff?: Record<string, number>;
}

function main(): void {
  const torchFile = process.argv[2];
  const outFile = process.argv[3];
  const torchRows = torchFile && fs.existsSync(torchFile) ? (JSON.parse(fs.readFileSync(torchFile, 'utf8')) as { shape: string; dtype: string; torch_ms: number }[]) : [];
  const rows: Row[] = [];
  for (const c of SDPA_CASES.filter((x) => !CASE_FILTER || CASE_FILTER.some((p) => x.name.startsWith(p)))) {
    for (const dtype of DTYPES) {
      // One seeded randn per case (cuda randn is drawn on the host): k and v are scaled head slices
      // of it, which times the same as independent data.
      const s = c.s ?? c.t;
      const base = kiln.randn([c.b, c.h, Math.max(c.t, s), c.d], { generator: new kiln.Generator(1), device: 'cuda' });
      const q = kiln.narrow(base, 2, 0, c.t).to(dtype);
      const k = kiln.narrow(base, 1, 0, c.hk).narrow(2, 0, s).mul(0.5).to(dtype);
      const v = kiln.narrow(base, 1, c.h - c.hk, c.hk).narrow(2, 0, s).mul(-1).to(dtype);
      base.dispose();
      const run = (): Tensor => kiln.scaledDotProductAttention(q, k, v, null, 0, c.s === undefined, null, c.hk !== c.h);
      const fused = time(run);
      const ref = run();
      const maxDiff = (o: Tensor): number => kiln.sub(o.to('float32'), ref.to('float32')).abs().max().item() as number;
      setCudaAttentionPath('math');
      let math: number;
      let mathDiff: number;
      try {
        math = time(run);
        mathDiff = maxDiff(run());
      } finally {
        setCudaAttentionPath('auto');
      }
      let sweep: Record<string, number> | undefined;
      const sweepDiff: Record<string, number> = {};
      // (The decode case runs the math path by the fused path's rule: nothing to sweep.)
      if (dtype === 'float32' && c.s === undefined) {
        sweep = {};
        for (const rm of [1, 2, 4]) {
          setFlashF32Rows(rm);
          try {
            sweep[`rm${rm}`] = time(run);
            sweepDiff[`rm${rm}`] = maxDiff(run());
          } finally {
            setFlashF32Rows(null);
          }
        }
        for (const tile of F32_SWEEP) {
          const name = `a${tile.rg ?? 16}x${tile.rm}x${tile.tx}x${tile.bn}${tile.ks ? `k${tile.ks}` : ''}`;
          setFlashF32Tile(tile);
          try {
            sweep[name] = time(run);
            sweepDiff[name] = maxDiff(run());
          } catch (e) {
            console.log(`  ${name}: ${(e as Error).message.split('\n')[0]}`);
          } finally {
            setFlashF32Tile(null);
          }
        }
      }
      if (dtype === 'bfloat16' && c.s === undefined) {
        sweep = {};
        for (const cfg of TC_SWEEP[c.d] ?? []) {
          setFlashTcConfig(cfg);
          try {
            sweep[`${cfg.nw}x${cfg.mi}x${cfg.bn}`] = time(run);
            sweepDiff[`${cfg.nw}x${cfg.mi}x${cfg.bn}`] = maxDiff(run());
          } finally {
            setFlashTcConfig(null);
          }
        }
      }
      const t = torchRows.find((r) => r.shape === c.name && r.dtype === dtype);
      const row: Row = { op: 'sdpa', shape: c.name, dtype, torch_ms: t?.torch_ms ?? null, kiln_ms: fused, kiln_math_ms: math, speedup: t ? t.torch_ms / fused : null, math_max_diff: mathDiff, sweep, sweep_max_diff: sweep ? sweepDiff : undefined };
      rows.push(row);
      console.log(`${c.name.padEnd(34)} ${dtype.padEnd(9)} torch ${row.torch_ms?.toFixed(4) ?? '-'} ms  kiln ${fused.toFixed(4)} ms  kiln-math ${math.toFixed(4)} ms (diff ${mathDiff.toExponential(1)})  speedup ${row.speedup?.toFixed(2) ?? '-'}`);
      if (sweep) console.log(`  sweep: ${Object.entries(sweep).map(([k2, ms]) => `${k2} ${ms.toFixed(4)} (diff ${sweepDiff[k2]!.toExponential(1)})`).join('  ')}`);
      for (const x of [q, k, v, ref]) x.dispose();
    }
  }
  if (outFile) fs.writeFileSync(outFile, JSON.stringify({ device: 'cuda', reps: REPS, rows }, null, 1));
}

main();
