/**
 * The cuda llm.pagedAttention kernels side by side (issue #17: at batch 1 the decode step's 28
 * calls took 0.38 ms, 13.7 us each, for about 1 MB of K/V per layer; at batch 64 0.83 ms, ~30 us
 * each for ~64 MB): v1, the default (codegen/paged-attention-v1.ts: a second kernel merges the
 * splits), v2 (codegen/paged-attention.ts: chunks over many blocks, 16-byte loads, the splits
 * folded by the last-arriving block in the same launch) and v3 (codegen/paged-attention-v3.ts:
 * v2 with the next chunk's loads in flight during the math, and splits that keep every block
 * resident), selected per call with the KILN_CUDA_PAGED_ATTN option. A kernel written `v3:sN` is v3
 * with its split count pinned to N (KILN_CUDA_PAGED_SPLITS), `v3:uN` with N token batches per warp
 * and chunk (KILN_CUDA_PAGED_UNROLL), `v3:sN:uM` both.
 * A context written `lo-hi` gives the batch's rows lengths spread evenly over lo..hi (the decode
 * bench's 128-token prompts plus 0..256 new tokens: `128-384`; batch 1 takes the middle).
 * Qwen3-0.6B's attention heads (16 query heads over 8 kv heads, head dim 128), blocks of 16 tokens,
 * every row at the same context length, tables as wide as the engine's (2560 blocks: Qwen3-0.6B's
 * 40960 positions, so the split count is the engine's); entries past a row's blocks are -1 (unused
 * by contract: a kernel that read them as block ids would report it).
 *
 * Device time per call, the host's enqueue gaps hidden behind a spin kernel (cuda-spin.ts): calls
 * run back to back as in a CUDA graph. Each call reads another copy of the rows' K/V (blocks cycled
 * over at least --min-mb MB), so K/V come from HBM and not from the 50 MB L2. The kernels
 * alternate (--rounds rounds of --batches batches of --runs calls each); a row is the median over
 * rounds of the per-round medians. Before timing, each kernel's output is compared with the
 * other's (max |v2 - v1| is in the row). GB/s counts the K/V bytes read once.
 *
 * Bounded by construction (the first version ran past its `timeout 60` on the H200): K/V are made
 * on the device (a small host-random pattern tiled by a device copy, not gigabytes of host randn);
 * every wait for the device polls an event with a bound (--sync-timeout-ms), so a kernel that never
 * ends fails with the kernel and shape named; no configuration starts after --budget-s seconds; a
 * watchdog thread kills the process (SIGKILL, after printing the step it was in) at --watchdog-s
 * even if the main thread is stuck inside a driver call; the JSON is rewritten after every
 * configuration, so whatever finished is kept. Progress lines go to stderr.
 *
 *   node dist/bench/cuda-paged-attention.js [--batch 1,8,64] [--context 128,256,384,128-384]
 *     [--dtype bfloat16] [--kernels v1,v3] [--table-blocks 2560] [--runs 20] [--batches 3]
 *     [--rounds 2] [--min-mb 256] [--budget-s 70] [--watchdog-s 85] [--sync-timeout-ms 5000]
 *     [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import * as kiln from '../src/index.js';
import { deviceMsBehindSpin, syncWithin } from './cuda-spin.js';
import { setOption } from '../src/runtime/config.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { pagedPlan, pagedSplits, pagedLayout } from '../src/kernels/cuda/codegen/paged-attention.js';
import { pagedPlanV3, pagedSplitsV3 } from '../src/kernels/cuda/codegen/paged-attention-v3.js';
import type { DType } from '../src/tensor/dtype.js';

const t0 = performance.now();
const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const num = (name: string, dflt: number): number => {
  const v = Number(flag(name) ?? dflt);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`cuda-paged-attention: ${name} takes a positive number, got '${flag(name)}'`);
  return v;
};
const list = (name: string, dflt: string): number[] => (flag(name) ?? dflt).split(',').map(Number);
const batches = list('--batch', '1,8,64');
/** A context: one length for every row, or `lo-hi`: the rows' lengths spread over lo..hi. */
const contexts = (flag('--context') ?? '128,256,384,128-384').split(',');
function rowLens(spec: string, B: number): number[] {
  const m = /^(\d+)-(\d+)$/.exec(spec);
  if (!m) {
    const n = Number(spec);
    if (!Number.isInteger(n) || n <= 0) throw new Error(`cuda-paged-attention: --context takes lengths or lo-hi ranges, got '${spec}'`);
    return new Array<number>(B).fill(n);
  }
  const lo = Number(m[1]);
  const hi = Number(m[2]);
  if (!(lo > 0 && hi >= lo)) throw new Error(`cuda-paged-attention: --context range '${spec}' needs 0 < lo <= hi`);
  return Array.from({ length: B }, (_, b) => (B === 1 ? Math.round((lo + hi) / 2) : lo + Math.round(((hi - lo) * b) / (B - 1))));
}
const dtype = (flag('--dtype') ?? 'bfloat16') as DType;
const kernels = (flag('--kernels') ?? 'v1,v3').split(',');
const tableBlocks = num('--table-blocks', 2560);
const runs = num('--runs', 20);
const timingBatches = num('--batches', 3);
const rounds = num('--rounds', 2);
const minBytes = num('--min-mb', 256) * 2 ** 20;
const budgetMs = num('--budget-s', 70) * 1e3;
const watchdogMs = num('--watchdog-s', 85) * 1e3;
const syncMs = num('--sync-timeout-ms', 5000);
const jsonPath = flag('--json');
for (const k of kernels) if (!/^(v1|v2|v3(:s\d+)?(:u[1-8])?)$/.test(k)) throw new Error(`cuda-paged-attention: --kernels takes v1, v2, v3, v3:sN (N pinned splits), v3:uN (N token batches, 1-8) and v3:sN:uM, got '${k}'`);
/** v3's pinned splits and unroll in a kernel name (0: the kernel's rule). */
function pins(k: string): { splits: number; unroll: number } {
  return { splits: Number(/:s(\d+)/.exec(k)?.[1] ?? 0), unroll: Number(/:u(\d+)/.exec(k)?.[1] ?? 0) };
}
/** The options a kernel name sets: KILN_CUDA_PAGED_ATTN, and for v3 KILN_CUDA_PAGED_SPLITS / _UNROLL. */
function select(k: string | undefined): void {
  const p = k === undefined ? undefined : pins(k);
  setOption('KILN_CUDA_PAGED_ATTN', k === undefined ? undefined : (k.split(':')[0] as 'v1' | 'v2' | 'v3'));
  setOption('KILN_CUDA_PAGED_SPLITS', p?.splits);
  setOption('KILN_CUDA_PAGED_UNROLL', p?.unroll);
}
function planV3(k: string): ReturnType<typeof pagedPlanV3> {
  const u = pins(k).unroll;
  return pagedPlanV3({ dtype, headDim: D, group: G, align: 16, ...(u > 0 ? { unroll: u } : {}) });
}

// The watchdog: a thread of its own, so it fires even while the main thread waits inside a driver
// call. The main thread writes what it is doing into `stepBuf`; the watchdog prints it and kills.
const stepBuf = new SharedArrayBuffer(512);
const stepBytes = new Uint8Array(stepBuf);
let step = 'start';
function progress(s: string): void {
  step = s;
  const b = new TextEncoder().encode(s.slice(0, 500));
  stepBytes.fill(0);
  stepBytes.set(b);
  process.stderr.write(`[${((performance.now() - t0) / 1e3).toFixed(1)}s] ${s}\n`);
}
const watchdog = new Worker(
  `const { workerData } = require('node:worker_threads');
   const fs = require('node:fs');
   setTimeout(() => {
     const b = new Uint8Array(workerData.buf);
     const n = b.indexOf(0);
     const step = Buffer.from(b.subarray(0, n < 0 ? b.length : n)).toString();
     fs.writeSync(2, 'cuda-paged-attention: watchdog: still running after ' + workerData.ms / 1000 + ' s, in: ' + step + '; killing the process\\n');
     process.kill(process.pid, 'SIGKILL');
   }, workerData.ms);`,
  { eval: true, workerData: { buf: stepBuf, ms: watchdogMs } },
);
watchdog.unref();

const HKV = 8;
const G = 2;
const D = 128;
const BS = 16;
const H = HKV * G;
const SCALE = 1 / Math.sqrt(D);
/** Blocks of host-random K/V tiled over the cache (device copies make the rest). */
const PATTERN_BLOCKS = 61;
const sms = deviceInfo(0).smCount;

interface Row {
  batch: number;
  /** The --context entry: a length, or lo-hi. */
  context: string;
  /** Mean length over the rows. */
  meanLen: number;
  dtype: DType;
  kernel: string;
  us: number;
  gbps: number;
  splits: number;
  /** v2/v3: tokens a block loads per round, lanes per K/V row, bytes per load; v3: token batches per warp. */
  span?: number;
  unroll?: number;
  lanesPerRow?: number;
  loadBytes?: number;
  copies: number;
  maxAbsDiffVsOther?: number;
}
const rows: Row[] = [];
const skipped: string[] = [];

function splitsOf(kernel: string, b: number, capacity: number): number {
  if (kernel === 'v1') return Math.max(1, Math.min(32, Math.ceil((2 * sms) / (b * HKV)), Math.ceil(capacity / 32)));
  if (kernel === 'v2') return pagedSplits(b, HKV, capacity, pagedPlan({ dtype, headDim: D, group: G, align: 16 }).span, sms);
  return pagedSplitsV3(b, HKV, capacity, planV3(kernel).span, sms, pins(kernel).splits);
}

function writeJson(done: boolean, error?: string): void {
  if (!jsonPath) return;
  const doc = { bench: 'cuda-paged-attention', host: os.hostname(), device: deviceInfo(0).name, sms, date: new Date().toISOString(), complete: done, ...(error ? { error } : {}), skipped, heads: { query: H, kv: HKV, headDim: D, blockSize: BS }, tableBlocks, runs, batches: timingBatches, rounds, rows };
  fs.writeFileSync(jsonPath, JSON.stringify(doc, null, 2));
}

/** [n, BS, HKV, D] on the device: PATTERN_BLOCKS host-random blocks, tiled by a device copy. */
function cacheOnDevice(n: number, seed: number): kiln.Tensor {
  const p = Math.min(n, PATTERN_BLOCKS);
  const g = new kiln.Generator().manualSeed(seed);
  const pattern = kiln.randn([p, BS, HKV, D], { dtype, generator: g }).to('cuda');
  const tiled = pattern.repeat(Math.ceil(n / p), 1, 1, 1);
  const out = tiled.narrow(0, 0, n).contiguous();
  pattern.dispose();
  if (tiled !== out) tiled.dispose();
  return out;
}

function runConfig(B: number, ctx: string): void {
  const lensB = rowLens(ctx, B);
  const perRowB = lensB.map((l) => Math.ceil(l / BS));
  const rowBlocks = perRowB.reduce((a, n) => a + n, 0);
  const M = Math.max(tableBlocks, ...perRowB);
  const tokens = lensB.reduce((a, n) => a + n, 0);
  const kvBytes = tokens * HKV * D * 2 * (dtype === 'float32' ? 4 : dtype === 'float64' ? 8 : 2);
  const copies = Math.max(1, Math.min(64, Math.ceil(minBytes / kvBytes)));
  const numBlocks = copies * rowBlocks + 1;
  const label = `batch ${B} context ${ctx}`;
  const made: kiln.Tensor[] = [];
  const keepT = (t: kiln.Tensor): kiln.Tensor => {
    made.push(kiln.keep(t));
    return t;
  };
  try {
    progress(`${label}: K/V (${numBlocks} blocks, ${copies} copies)`);
    const kc = keepT(cacheOnDevice(numBlocks, 1000 + B * 31 + tokens));
    const vc = keepT(cacheOnDevice(numBlocks, 2000 + B * 31 + tokens));
    const q = keepT(kiln.randn([B, H, D], { dtype }).to('cuda'));
    const lens = keepT(kiln.tensor(lensB, { dtype: 'int32' }).to('cuda'));
    // Copy c: its rows' blocks one after another from c x rowBlocks; the rest of a row's entries -1.
    const tables = Array.from({ length: copies }, (_, c) => {
      const t = new Int32Array(B * M).fill(-1);
      let next = c * rowBlocks;
      for (let b = 0; b < B; b++) for (let j = 0; j < perRowB[b]!; j++) t[b * M + j] = next++;
      return keepT(kiln.tensor(t, { dtype: 'int32' }).reshape([B, M]).to('cuda'));
    });
    syncWithin(syncMs, `${label}: uploads`);
    const attend = (t: kiln.Tensor): kiln.Tensor => kiln.llm.pagedAttention(q, kc, vc, t, lens, SCALE);
    let i = 0;
    const call = (): void => void attend(tables[i++ % copies]!);
    // Both kernels on copy 0, compared; then warm-up (kernels compiled and loaded).
    const outs = new Map<string, number[]>();
    for (const k of kernels) {
      select(k);
      progress(`${label}: ${k} first call`);
      const o = attend(tables[0]!);
      syncWithin(syncMs, `${label}: ${k} first call`);
      outs.set(k, o.to('float32').toFlatArray() as number[]);
      o.dispose();
      for (let w = 0; w < copies + 2; w++) kiln.scope(call);
      syncWithin(syncMs, `${label}: ${k} warm-up`);
    }
    const diff = (a: number[], b: number[]): number => a.reduce((m, x, j) => Math.max(m, Math.abs(x - b[j]!)), 0);
    const times = new Map<string, number[]>(kernels.map((k) => [k, []]));
    for (let r = 0; r < rounds; r++) {
      for (const k of kernels) {
        select(k);
        progress(`${label}: ${k} round ${r + 1}`);
        times.get(k)!.push(deviceMsBehindSpin(call, { runs, batches: timingBatches, spinNs: 5_000_000, timeoutMs: syncMs, label: `${label}: ${k} timing` }));
      }
    }
    for (const k of kernels) {
      const ts = times.get(k)!.sort((a, b) => a - b);
      const ms = ts[ts.length >> 1]!;
      // The difference against the first other kernel of the list (v1 first by default).
      const other = kernels.find((o) => o !== k);
      const l = pagedLayout(dtype, D, G, 16);
      rows.push({
        batch: B,
        context: ctx,
        meanLen: tokens / B,
        dtype,
        kernel: k,
        us: ms * 1e3,
        gbps: kvBytes / (ms * 1e-3) / 1e9,
        splits: splitsOf(k, B, M * BS),
        ...(k === 'v2' ? { span: pagedPlan({ dtype, headDim: D, group: G, align: 16 }).span, lanesPerRow: l.r, loadBytes: l.vb } : {}),
        ...(k.startsWith('v3') ? { span: planV3(k).span, unroll: planV3(k).u, lanesPerRow: l.r, loadBytes: l.vb } : {}),
        copies,
        ...(other ? { maxAbsDiffVsOther: diff(outs.get(k)!, outs.get(other)!) } : {}),
      });
    }
  } finally {
    select(undefined);
    for (const t of made) t.dispose();
  }
}

let failure: string | undefined;
try {
  outer: for (const B of batches) {
    for (const ctx of contexts) {
      if (performance.now() - t0 > budgetMs) {
        for (const b2 of batches) for (const c2 of contexts) if (!rows.some((r) => r.batch === b2 && r.context === c2)) skipped.push(`batch ${b2} context ${c2}`);
        progress(`budget of ${budgetMs / 1e3} s spent: ${skipped.length} configuration(s) skipped`);
        break outer;
      }
      runConfig(B, ctx);
      writeJson(false);
    }
  }
} catch (e) {
  failure = `${(e as Error).message} (in: ${step})`;
}

const pad = (v: string, n: number): string => v.padEnd(n);
console.log(`${pad('batch', 6)}${pad('context', 9)}${pad('kernel', 10)}${pad('us', 9)}${pad('GB/s', 7)}${pad('splits', 7)}max|diff|`);
for (const r of rows) console.log(`${pad(String(r.batch), 6)}${pad(r.context, 9)}${pad(r.kernel, 10)}${pad(r.us.toFixed(2), 9)}${pad(r.gbps.toFixed(0), 7)}${pad(String(r.splits), 7)}${r.maxAbsDiffVsOther?.toExponential(1) ?? ''}`);
if (kernels.includes('v1')) {
  for (const k of kernels.filter((x) => x !== 'v1')) {
    for (const B of batches) {
      const ratio = contexts.flatMap((c) => {
        const t = (kk: string): number | undefined => rows.find((r) => r.batch === B && r.context === c && r.kernel === kk)?.us;
        const a = t('v1');
        const b = t(k);
        return a !== undefined && b !== undefined ? [`${c}: ${(a / b).toFixed(2)}x`] : [];
      });
      if (ratio.length) console.log(`batch ${B}, v1 time / ${k} time: ${ratio.join(', ')}`);
    }
  }
}
if (skipped.length) console.log(`skipped (budget): ${skipped.join('; ')}`);
writeJson(failure === undefined && skipped.length === 0, failure);
if (jsonPath) console.log(`wrote ${jsonPath}`);
if (failure !== undefined) {
  console.error(`cuda-paged-attention: ${failure}`);
  // A device that did not finish may never finish: exit without the driver's teardown waiting on it.
  process.kill(process.pid, 'SIGKILL');
}
