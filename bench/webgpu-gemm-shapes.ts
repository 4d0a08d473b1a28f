/**
 * Issue #20: the float16 webgpu GEMM on the shapes the workloads run, under several staged
 * subgroup-matrix plans side by side (KILN_WEBGPU_SM_PLAN, gemm-subgroup-matrix-staged.ts), so the
 * planner's choice per shape class can follow measurements instead of the square 4096^3 / 8192^3
 * sweeps (scripts/device/wggemm-sweep.mjs) it was tuned on. Shapes (linear: x [M, K] @ w[N, K]^T):
 * a 128-token Qwen3-0.6B prefill's projections and LM head, mlp-2048x4096's layers and the
 * transformer block's (4096 tokens, dim 1024), and conv-stack's two float16 convolutions as the
 * im2col route's GEMMs (group conv).
 *
 * Each variant sets options for the call only ('auto' is the build's defaults; a plan string is a
 * KILN_WEBGPU_SM_PLAN; 'nosplit' is KILN_WEBGPU_GEMM_SMALL=0; a '+split=N' suffix also sets
 * KILN_WEBGPU_GEMM_SPLIT_TARGET, the workgroups a small product's split K aims for. Session 32's
 * '+refill=words' sets KILN_WEBGPU_SM_REFILL. Session 32's
 * '+epi=all', an all-at-once GEMM epilogue, measured slower and was dropped: code in b8f6690). Device time per call from timestamp
 * events (webgpu-device-ms.ts: calls queued back to back, variants alternating, each batch after
 * KILN_BENCH_WARM_MS of its own calls); a variant the device cannot run is reported and skipped.
 * Every variant's product is compared with the default's (largest absolute difference), so a plan
 * that computes something else is seen.
 *
 * --cold N: calls rotate
 * over N copies of the weight (N x its bytes past the 50 MB L2 of an H100 or H200), so each call
 * reads its weight from DRAM, as a forward pass does; the default reuses one (warm in L2).
 *
 *   node dist/bench/webgpu-gemm-shapes.js [--shapes qwen3,mlp,block,conv,mlp64,square] [--plans "p1;p2"] [--calls 20]
 *        [--reps 7] [--cold N] [--json out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { deviceMsPerCall } from './webgpu-device-ms.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const calls = Number(flag('--calls') ?? 20);
const reps = Number(flag('--reps') ?? 7);

interface Shape {
  readonly group: string;
  readonly name: string;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly bias: boolean;
}

const SHAPES: readonly Shape[] = [
  { group: 'qwen3', name: 'gate_up', m: 128, n: 6144, k: 1024, bias: false },
  { group: 'qwen3', name: 'qkv', m: 128, n: 4096, k: 1024, bias: false },
  { group: 'qwen3', name: 'down', m: 128, n: 1024, k: 3072, bias: false },
  { group: 'qwen3', name: 'o_proj', m: 128, n: 1024, k: 2048, bias: false },
  { group: 'qwen3', name: 'lm_head', m: 128, n: 151936, k: 1024, bias: false },
  { group: 'mlp', name: 'fc', m: 2048, n: 4096, k: 4096, bias: true },
  { group: 'block', name: 'qkv', m: 4096, n: 3072, k: 1024, bias: true },
  { group: 'block', name: 'proj', m: 4096, n: 1024, k: 1024, bias: true },
  { group: 'block', name: 'fc1', m: 4096, n: 4096, k: 1024, bias: true },
  { group: 'block', name: 'fc2', m: 4096, n: 1024, k: 4096, bias: true },
  // mlp-64x512's two layers (a small product: split K by default).
  { group: 'mlp64', name: 'fc', m: 64, n: 512, k: 512, bias: true },
  // conv-stack's float16 convolutions as conv-im2col.ts runs them: im2col [pixels, Kp] @ Wp[64, Kp]^T.
  { group: 'conv', name: '3x3', m: 200704, n: 64, k: 576, bias: true },
  { group: 'conv', name: '7x7', m: 200704, n: 64, k: 152, bias: true },
  // The issue's square products (its matmul rows).
  { group: 'square', name: '4096', m: 4096, n: 4096, k: 4096, bias: false },
  { group: 'square', name: '8192', m: 8192, n: 8192, k: 8192, bias: false },
];

const DEFAULT_PLANS = [
  'auto',
  'nosplit',
  '2,2,2,2,4',
  '2,2,2,2,2,stages=2',
  '2,2,2,2,4,stages=2',
  '2,2,2,2,2,stages=0',
  '2,2,2,2,4,stages=0',
  '2,2,4,4,2',
  '2,2,4,4,2,stages=2',
  '2,2,4,4,2,stages=0',
  '2,2,4,2,2',
  '2,4,2,2,2',
  '2,4,4,2,2,stages=2',
];

const groups = new Set((flag('--shapes') ?? 'qwen3,mlp,block').split(','));
const plans = (flag('--plans') ?? DEFAULT_PLANS.join(';')).split(';').filter((p) => p.length > 0);

/**
 * Runs fn with the options of variant `variant` set (a `+split=N` suffix sets the split's workgroup
 * target, `+refill=words|halves` the staged kernel's tile refill), and restores them.
 */
function under<T>(variant: string, fn: () => T): T {
  const [plan, ...extras] = variant.split('+');
  for (const x of extras) {
    const m = /^split=(\d+)$/.exec(x);
    const r = /^refill=(halves|words)$/.exec(x);
    if (m) setOption('KILN_WEBGPU_GEMM_SPLIT_TARGET', Number(m[1]));
    else if (r) setOption('KILN_WEBGPU_SM_REFILL', r[1] as 'halves' | 'words');
    else throw new Error(`variant ${JSON.stringify(variant)}: unknown suffix ${JSON.stringify(x)} (want +split=N or +refill=halves|words)`);
  }
  if (plan === 'nosplit') setOption('KILN_WEBGPU_GEMM_SMALL', false);
  else if (plan !== 'auto') setOption('KILN_WEBGPU_SM_PLAN', plan);
  try {
    return fn();
  } finally {
    setOption('KILN_WEBGPU_GEMM_SMALL', undefined);
    setOption('KILN_WEBGPU_SM_PLAN', undefined);
    setOption('KILN_WEBGPU_GEMM_SPLIT_TARGET', undefined);
    setOption('KILN_WEBGPU_SM_REFILL', undefined);
  }
}
const cold = Number(flag('--cold') ?? 1);

const rows: Record<string, unknown>[] = [];
for (const s of SHAPES.filter((x) => groups.has(x.group))) {
  kiln.manualSeed(0);
  const x = kiln.randn([s.m, s.k]).mul(0.5).to('float16').to('webgpu');
  const w = kiln.randn([s.n, s.k]).mul(1 / Math.sqrt(s.k)).to('float16').to('webgpu');
  const b = s.bias ? kiln.randn([s.n]).to('float16').to('webgpu') : null;
  const run = (): Tensor => kiln.nn.functional.linear(x, w, b);
  const ref = run().to('cpu').to('float32');
  // --cold: the timed calls rotate over copies of the weight.
  const copies = Array.from({ length: cold }, (_, i) => (i === 0 ? w : w.clone()));
  let turn = 0;
  const timed = (): Tensor => kiln.nn.functional.linear(x, copies[turn++ % cold]!, b);
  const live: string[] = [];
  const diffs: number[] = [];
  for (const plan of plans) {
    try {
      diffs.push(kiln.scope(() => kiln.sub(under(plan, run).to('cpu').to('float32'), ref).abs().max().item() as number));
      live.push(plan);
    } catch (e) {
      console.log(`${s.group}/${s.name} ${plan}: skipped (${(e as Error).message.split('\n')[0]!.slice(0, 160)})`);
      rows.push({ framework: 'kiln', workload: 'gemm-shape', device: 'webgpu:0', dtype: 'float16', shape: `${s.group}/${s.name}`, m: s.m, n: s.n, k: s.k, plan, status: 'skip', why: (e as Error).message.slice(0, 300) });
    }
  }
  const ms = deviceMsPerCall(live.map((plan) => () => void under(plan, timed)), reps, calls);
  const flops = 2 * s.m * s.n * s.k;
  const best = Math.min(...ms);
  live.forEach((plan, i) => {
    const tflops = flops / (ms[i]! * 1e9);
    rows.push({ framework: 'kiln', workload: 'gemm-shape', device: 'webgpu:0', dtype: 'float16', shape: `${s.group}/${s.name}`, m: s.m, n: s.n, k: s.k, bias: s.bias, plan, cold_copies: cold, status: 'ok', ms: ms[i]!, tflops, max_abs_diff_vs_auto: diffs[i]! });
    console.log(`${`${s.group}/${s.name}`.padEnd(14)} ${`${s.m}x${s.n}x${s.k}`.padEnd(16)} ${plan.padEnd(22)} ${(ms[i]! * 1000).toFixed(1).padStart(9)} us ${tflops.toFixed(1).padStart(7)} TFLOP/s  diff ${diffs[i]!.toExponential(1)}${ms[i] === best ? '  best' : ''}`);
  });
  for (const t of [x, ...copies, b, ref]) t?.dispose();
  kiln.emptyCache('webgpu');
}
const out = flag('--json');
if (out) fs.writeFileSync(out, JSON.stringify({ meta: { command: `node dist/bench/webgpu-gemm-shapes.js ${argv.join(' ')}`, date: new Date().toISOString() }, results: rows }, null, 1));
