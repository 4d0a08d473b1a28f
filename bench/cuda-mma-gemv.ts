/**
 * The tensor-core skinny GEMM (src/kernels/cuda/mma-gemv.ts) against cuBLASLt on Qwen3-0.6B's
 * decode shapes at M = 8, 16, 32, 64 rows (issue #17: batch 8 and 64 decode). Per shape (W [N, K])
 * and M:
 *   - mma auto: the kernel as dispatch runs it (configuration from mmaGemvConfig, printed);
 *   - mma kw=.. c=..: the other configurations (k split over warps and cluster blocks), unless
 *     --no-sweep: is the heuristic's pick the fastest?
 *   - cublaslt: kiln.linear with KILN_MMA_GEMV_MAX_ROWS=0 and KILN_GEMV_MAX_ROWS=0 (as before);
 *   - gate_up+silu: llm.linearSiluAndMul over W [6144, 1024]: the gated kernel against cuBLASLt's
 *     linear plus the silu * mul kernel (the op's fallback, what batch 8/64 decode runs today).
 * Device time per call with the host's enqueue gaps hidden behind a spin kernel (cuda-spin.ts),
 * every wait bounded (--timeout ms, default 20000: a kernel that never ends fails the bench with
 * its label instead of hanging the device). Each call reads another copy of W (copies cycled, at
 * least 256 MB in all), so W comes from HBM and not from the 50 MB L2, as in a decode step.
 * GB/s counts W, x and out once.
 *
 *   node dist/bench/cuda-mma-gemv.js [--rows 8,16,32,64] [--runs 30] [--batches 5] [--no-sweep] [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { deviceMsBehindSpin } from './cuda-spin.js';
import { mmaGemvConfigFor, runMmaGemv, type MmaGemvConfig } from '../src/kernels/cuda/mma-gemv.js';
import { ptrOf } from '../src/kernels/cuda/device.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { getAccelerator } from '../src/runtime/registry.js';
import { getOption, setOption } from '../src/runtime/config.js';
import type { Tensor } from '../src/tensor/tensor.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const rowsList = (flag('--rows') ?? '8,16,32,64').split(',').map(Number);
const runs = Number(flag('--runs') ?? 30);
const batches = Number(flag('--batches') ?? 5);
const timeoutMs = Number(flag('--timeout') ?? 20000);
const sweep = !argv.includes('--no-sweep');
const jsonPath = flag('--json');

/** Qwen3-0.6B's decode linears (after horizontal fusion of q/k/v and of gate/up): [N, K]; gated: W [2N, K]. */
const SHAPES: readonly { name: string; n: number; k: number; gated?: boolean }[] = [
  { name: 'qkv', n: 4096, k: 1024 },
  { name: 'o', n: 1024, k: 2048 },
  { name: 'gate_up', n: 6144, k: 1024 },
  { name: 'gu+silu', n: 3072, k: 1024, gated: true },
  { name: 'down', n: 1024, k: 3072 },
  { name: 'lm_head', n: 151936, k: 1024 },
];
const MIN_BYTES = 256 * 2 ** 20;

const acc = getAccelerator('cuda') as unknown as CudaAccelerator;
const stream = acc.defaultStream(0);
const sms = deviceInfo(0).smCount;
const fast = getOption('KILN_CUDA_FAST_MATH');

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
const cfgName = (c: MmaGemvConfig): string => `nt=${c.nt} kw=${c.kw} c=${c.c}`;

for (const s of SHAPES) {
  const wRows = s.gated ? 2 * s.n : s.n;
  const wBytes = wRows * s.k * 2;
  const copies = Math.max(1, Math.min(64, Math.ceil(MIN_BYTES / wBytes)));
  const ws: Tensor[] = Array.from({ length: copies }, () => kiln.keep(kiln.mul(kiln.randn([wRows, s.k], { device: 'cuda' }), 0.02).to('bfloat16')));
  for (const m of rowsList) {
    const x = kiln.keep(kiln.randn([m, s.k], { device: 'cuda' }).to('bfloat16'));
    const out = kiln.keep(kiln.empty([m, s.n], { dtype: 'bfloat16', device: 'cuda' }));
    const bytes = wBytes + m * s.k * 2 + m * s.n * 2;
    const label = `${s.name} M=${m}`;
    const record = (impl: string, fn: () => void): void => {
      for (let i = 0; i < copies + 2; i++) kiln.scope(fn); // warm-up: kernels loaded, plans made
      const ms = deviceMsBehindSpin(fn, { runs, batches, spinNs: 5_000_000, timeoutMs, label: `${label} ${impl}` });
      rows.push({ shape: s.name, n: s.n, k: s.k, m, impl, us: ms * 1e3, gbps: bytes / (ms * 1e-3) / 1e9 });
    };
    let i = 0;
    const next = (): Tensor => ws[i++ % copies]!;
    const problem = (w: Tensor) => ({ m, n: s.n, k: s.k, x: ptrOf(x), ldx: s.k, w: ptrOf(w), ldw: s.k, out: ptrOf(out), ldo: s.n });
    const auto = mmaGemvConfigFor(0, problem(ws[0]!), s.gated === true, fast);
    record(`mma auto (${cfgName(auto)})`, () => runMmaGemv(0, stream, problem(next()), s.gated === true, fast));
    if (sweep) {
      const steps = Math.ceil(s.k / 64);
      for (const nt of s.gated ? [2] : [1, 2]) {
        for (const kw of [1, 2, 4, 8]) {
          for (const c of [1, 2, 4]) {
            if ((c > 1 && kw < 2) || kw * c > steps || (nt === auto.nt && kw === auto.kw && c === auto.c)) continue;
            const cfg = { ...auto, nt, kw, c };
            record(`mma ${cfgName(cfg)}`, () => runMmaGemv(0, stream, problem(next()), s.gated === true, fast, cfg));
          }
        }
      }
    }
    setOption('KILN_MMA_GEMV_MAX_ROWS', 0);
    setOption('KILN_GEMV_MAX_ROWS', 0);
    if (s.gated) record('cublaslt + silu*mul', () => void kiln.llm.linearSiluAndMul(x, next()));
    else record('cublaslt', () => void kiln.linear(x, next()));
    setOption('KILN_MMA_GEMV_MAX_ROWS', undefined);
    setOption('KILN_GEMV_MAX_ROWS', undefined);
    for (const t of [x, out]) t.dispose();
  }
  for (const w of ws) w.dispose();
}

const pad = (v: string, n: number): string => v.padEnd(n);
console.log(`${pad('shape', 9)}${pad('N x K', 14)}${pad('M', 4)}${pad('impl', 28)}${pad('us', 9)}GB/s`);
for (const r of rows) console.log(`${pad(r.shape, 9)}${pad(`${r.n}x${r.k}`, 14)}${pad(String(r.m), 4)}${pad(r.impl, 28)}${pad(r.us.toFixed(2), 9)}${r.gbps.toFixed(0)}`);
// The decode step's linears: 28 layers of qkv, o, gate/up (+ silu * mul), down, and the LM head.
for (const m of rowsList) {
  const best = (shape: string, pick: (r: Row) => boolean): number => Math.min(...rows.filter((r) => r.shape === shape && r.m === m && pick(r)).map((r) => r.us));
  const step = (pick: (r: Row) => boolean): number => 28 * (best('qkv', pick) + best('o', pick) + best('gu+silu', pick) + best('down', pick)) + best('lm_head', pick);
  console.log(
    `M=${m}: the step's linears (gate/up with silu*mul), mma auto ${(step((r) => r.impl.startsWith('mma auto')) / 1e3).toFixed(3)} ms; ` +
      `best mma config per shape ${(step((r) => r.impl.startsWith('mma')) / 1e3).toFixed(3)} ms; cublaslt ${(step((r) => r.impl.startsWith('cublaslt')) / 1e3).toFixed(3)} ms`,
  );
}
if (jsonPath) {
  fs.writeFileSync(jsonPath, JSON.stringify({ bench: 'cuda-mma-gemv', host: os.hostname(), device: deviceInfo(0).name, sms, date: new Date().toISOString(), runs, batches, rows }, null, 2));
  console.log(`wrote ${jsonPath}`);
}
