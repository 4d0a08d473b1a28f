/**
 * The cuda llm.pagedAttention kernels side by side (issue #17: at batch 1 the decode step's 28
 * calls took 0.38 ms, 13.7 us each, for about 1 MB of K/V per layer): v2, the current kernel
 * (codegen/paged-attention.ts: chunks over many blocks, 16-byte loads, the splits folded in the
 * same launch), and v1, the first one (codegen/paged-attention-v1.ts: a second kernel merges the
 * splits), selected per call with the KILN_CUDA_PAGED_ATTN option. Qwen3-0.6B's attention heads
 * (16 query heads over 8 kv heads, head dim 128), blocks of 16 tokens, every row at the same
 * context length, tables as wide as the engine's (2560 blocks: Qwen3-0.6B's 40960 positions,
 * so the split count is the engine's).
 *
 * Device time per call, the host's enqueue gaps hidden behind a spin kernel (cuda-spin.ts): calls
 * run back to back as in a CUDA graph, each its kernel(s) plus the gaps between them. Each call
 * reads another copy of the rows' K/V (blocks cycled over at least 256 MB), so K/V come from HBM
 * and not from the 50 MB L2, as in a decode step where a layer's cache was last read a step ago.
 * The kernels alternate (--rounds rounds of --batches batches of --runs calls each); a row is the
 * median over rounds of the per-round medians. Before timing, each kernel's output is compared
 * with the other's (max |v2 - v1| is in the row). GB/s counts the K/V bytes read once.
 *
 *   node dist/bench/cuda-paged-attention.js [--batch 1,8,64] [--context 128,256,512,2048,8192]
 *     [--dtype bfloat16] [--kernels v2,v1] [--table-blocks 2560] [--runs 50] [--batches 5]
 *     [--rounds 3] [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { deviceMsBehindSpin } from './cuda-spin.js';
import { setOption } from '../src/runtime/config.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { pagedPlan, pagedSplits, pagedLayout } from '../src/kernels/cuda/codegen/paged-attention.js';
import type { DType } from '../src/tensor/dtype.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const list = (name: string, dflt: string): number[] => (flag(name) ?? dflt).split(',').map(Number);
const batches = list('--batch', '1,8,64');
const contexts = list('--context', '128,256,512,2048,8192');
const dtype = (flag('--dtype') ?? 'bfloat16') as DType;
const kernels = (flag('--kernels') ?? 'v2,v1').split(',') as ('v1' | 'v2')[];
const tableBlocks = Number(flag('--table-blocks') ?? 2560);
const runs = Number(flag('--runs') ?? 50);
const timingBatches = Number(flag('--batches') ?? 5);
const rounds = Number(flag('--rounds') ?? 3);
const jsonPath = flag('--json');
for (const k of kernels) if (k !== 'v1' && k !== 'v2') throw new Error(`cuda-paged-attention: --kernels takes v1 and v2, got '${k}'`);

const HKV = 8;
const G = 2;
const D = 128;
const BS = 16;
const H = HKV * G;
const SCALE = 1 / Math.sqrt(D);
const MIN_BYTES = 256 * 2 ** 20;
const sms = deviceInfo(0).smCount;

interface Row {
  batch: number;
  context: number;
  dtype: DType;
  kernel: string;
  us: number;
  gbps: number;
  splits: number;
  /** v2 only: tokens a block loads per round, lanes per K/V row, bytes per load. */
  span?: number;
  lanesPerRow?: number;
  loadBytes?: number;
  copies: number;
  maxAbsDiffVsOther?: number;
}
const rows: Row[] = [];

function splitsOf(kernel: 'v1' | 'v2', b: number, capacity: number): number {
  if (kernel === 'v1') return Math.max(1, Math.min(32, Math.ceil((2 * sms) / (b * HKV)), Math.ceil(capacity / 32)));
  return pagedSplits(b, HKV, capacity, pagedPlan({ dtype, headDim: D, group: G, align: 16 }).span, sms);
}

for (const B of batches) {
  for (const ctx of contexts) {
    const perRow = Math.ceil(ctx / BS);
    const M = Math.max(tableBlocks, perRow);
    const kvBytes = B * ctx * HKV * D * 2 * (dtype === 'float32' ? 4 : dtype === 'float64' ? 8 : 2);
    const copies = Math.max(1, Math.min(64, Math.ceil(MIN_BYTES / kvBytes)));
    const numBlocks = copies * B * perRow + 1;
    const made: kiln.Tensor[] = [];
    const keepT = (t: kiln.Tensor): kiln.Tensor => {
      made.push(kiln.keep(t));
      return t;
    };
    const kc = keepT(kiln.randn([numBlocks, BS, HKV, D], { device: 'cuda', dtype }));
    const vc = keepT(kiln.randn([numBlocks, BS, HKV, D], { device: 'cuda', dtype }));
    const q = keepT(kiln.randn([B, H, D], { device: 'cuda', dtype }));
    const lens = keepT(kiln.tensor(new Array<number>(B).fill(ctx), { dtype: 'int32', device: 'cuda' }));
    // Copy c, row b: blocks (c B + b) perRow .. + perRow - 1; the rest of the row's entries 0.
    const tables = Array.from({ length: copies }, (_, c) => {
      const t = new Int32Array(B * M);
      for (let b = 0; b < B; b++) for (let j = 0; j < perRow; j++) t[b * M + j] = (c * B + b) * perRow + j;
      return keepT(kiln.tensor(Array.from(t), { dtype: 'int32', device: 'cuda' }).reshape([B, M]));
    });
    const attend = (t: kiln.Tensor): kiln.Tensor => kiln.llm.pagedAttention(q, kc, vc, t, lens, SCALE);
    let i = 0;
    const call = (): void => void attend(tables[i++ % copies]!);
    // Both kernels on copy 0, compared; then warm-up (kernels compiled and loaded).
    const outs = new Map<string, number[]>();
    for (const k of kernels) {
      setOption('KILN_CUDA_PAGED_ATTN', k);
      const o = attend(tables[0]!);
      outs.set(k, o.to('float32').toFlatArray() as number[]);
      o.dispose();
      for (let w = 0; w < copies + 2; w++) kiln.scope(call);
    }
    const diff = (a: number[], b: number[]): number => a.reduce((m, x, j) => Math.max(m, Math.abs(x - b[j]!)), 0);
    const times = new Map<string, number[]>(kernels.map((k) => [k, []]));
    for (let r = 0; r < rounds; r++) {
      for (const k of kernels) {
        setOption('KILN_CUDA_PAGED_ATTN', k);
        times.get(k)!.push(deviceMsBehindSpin(call, { runs, batches: timingBatches, spinNs: 10_000_000 }));
      }
    }
    setOption('KILN_CUDA_PAGED_ATTN', undefined);
    for (const k of kernels) {
      const ts = times.get(k)!.sort((a, b) => a - b);
      const ms = ts[ts.length >> 1]!;
      const other = kernels.find((o) => o !== k);
      const l = pagedLayout(dtype, D, G, 16);
      rows.push({
        batch: B,
        context: ctx,
        dtype,
        kernel: k,
        us: ms * 1e3,
        gbps: kvBytes / (ms * 1e-3) / 1e9,
        splits: splitsOf(k, B, M * BS),
        ...(k === 'v2' ? { span: pagedPlan({ dtype, headDim: D, group: G, align: 16 }).span, lanesPerRow: l.r, loadBytes: l.vb } : {}),
        copies,
        ...(other ? { maxAbsDiffVsOther: diff(outs.get(k)!, outs.get(other)!) } : {}),
      });
    }
    for (const t of made) t.dispose();
  }
}

const pad = (v: string, n: number): string => v.padEnd(n);
console.log(`${pad('batch', 6)}${pad('context', 8)}${pad('kernel', 7)}${pad('us', 9)}${pad('GB/s', 7)}${pad('splits', 7)}max|diff|`);
for (const r of rows) console.log(`${pad(String(r.batch), 6)}${pad(String(r.context), 8)}${pad(r.kernel, 7)}${pad(r.us.toFixed(2), 9)}${pad(r.gbps.toFixed(0), 7)}${pad(String(r.splits), 7)}${r.maxAbsDiffVsOther?.toExponential(1) ?? ''}`);
if (kernels.includes('v1') && kernels.includes('v2')) {
  for (const B of batches) {
    const ratio = contexts.map((c) => {
      const t = (k: string): number => rows.find((r) => r.batch === B && r.context === c && r.kernel === k)!.us;
      return `${c}: ${(t('v1') / t('v2')).toFixed(2)}x`;
    });
    console.log(`batch ${B}, v1 time / v2 time: ${ratio.join(', ')}`);
  }
}
if (jsonPath) {
  fs.writeFileSync(jsonPath, JSON.stringify({ bench: 'cuda-paged-attention', host: os.hostname(), device: deviceInfo(0).name, sms, date: new Date().toISOString(), heads: { query: H, kv: HKV, headDim: D, blockSize: BS }, tableBlocks, runs, batches: timingBatches, rounds, rows }, null, 2));
  console.log(`wrote ${jsonPath}`);
}
