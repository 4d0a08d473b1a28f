/**
 * Kiln side of the MoE / mHC / sort benchmark on cuda. Reads the cases and PyTorch timings written
 * by scripts/bench_llm_moe_pytorch.py (so both sides time the same shapes), times Kiln's eager op
 * for each case with kiln.Event (CUDA events around one call, median of REPS after WARMUP calls,
 * as the PyTorch side does) and writes merged rows
 *   { op, shape, dtype, torch_ms, kiln_ms, speedup, gbps, torch_impl }
 * (speedup = torch_ms / kiln_ms; gbps = the case's minimal bytes moved / kiln_ms).
 *
 *   python3 scripts/bench_llm_moe_pytorch.py /tmp/torch.json && node dist/bench/llm-moe-cuda.js /tmp/torch.json out.json
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';

// MOECUDA_DEVICE=cpu runs the same code on the CPU (a smoke test of the runner without a GPU).
const DEVICE = process.env.MOECUDA_DEVICE ?? 'cuda';
const WARMUP = 5;
const REPS = 50;
const llm = kiln.llm;
type T = kiln.Tensor;

interface Case {
  op: string;
  dtype: DType;
  p: Record<string, number | boolean>;
  shape: string;
  torch_ms: number;
  torch_impl: string;
  bytes: number;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Random-looking data of any size without generating it all on the host: a 1M-element random block
 * repeated (timing does not depend on the values beyond routing, whose inputs are small).
 */
function fill(shape: number[], dtype: DType, scale = 1): T {
  const n = shape.reduce((a, b) => a * b, 1);
  const m = Math.min(n, 1 << 20);
  const base = kiln.mul(kiln.randn([1, m]), scale).to(DEVICE);
  const rep = Math.ceil(n / m);
  const flat = kiln.contiguous(kiln.expand(base, [rep, m])).reshape([rep * m]);
  const out = kiln.contiguous(kiln.narrow(flat, 0, 0, n)).reshape(shape).to(dtype);
  base.dispose();
  flat.dispose();
  return out;
}

function small(shape: number[], dtype: DType, lo = -1, hi = 1): T {
  return kiln.add(kiln.mul(kiln.rand(shape), hi - lo), lo).to(dtype).to(DEVICE);
}

/** Distinct random experts per token, int32 [t, k]. */
function routing(t: number, e: number, k: number): T {
  return kiln.narrow(kiln.argsort(kiln.rand([t, e]), -1), 1, 0, k).to('int32').to(DEVICE);
}

function build(c: Case): () => unknown {
  const p = c.p as Record<string, number>;
  const d = c.dtype;
  switch (c.op) {
    case 'llm.topkSoftmax': {
      const g = small([p.T!, p.E!], d, -3, 3);
      return () => llm.topkSoftmax(g, p.k!, true);
    }
    case 'llm.groupedTopk': {
      const g = small([p.T!, p.E!], d, -3, 3);
      const b = small([p.E!], 'float32', -0.1, 0.1);
      return () => llm.groupedTopk(g, p.k!, true, { numExpertGroup: p.groups!, topkGroup: p.topkGroup!, scoringFunc: 'sigmoid', eScoreCorrectionBias: b, routedScalingFactor: p.scale! });
    }
    case 'llm.moeSum': {
      const x = fill([p.T!, p.k!, p.H!], d);
      return () => llm.moeSum(x);
    }
    case 'llm.fusedMoe': {
      const x = fill([p.T!, p.H!], d);
      const w13 = fill([p.E!, 2 * p.I!, p.H!], d, 0.02);
      const w2 = fill([p.E!, p.H!, p.I!], d, 0.02);
      const ids = routing(p.T!, p.E!, p.k!);
      const tw = small([p.T!, p.k!], 'float32', 0, 1);
      return () => llm.fusedMoe(x, w13, w2, tw, ids, 'silu');
    }
    case 'llm.mhcPre':
    case 'llm.mhcPost':
    case 'llm.mhcHeadCollapse': {
      const [t, n, h] = [p.T!, p.n!, p.H!];
      const s = fill([t, n, h], d);
      const rows = c.op === 'llm.mhcPre' ? n * (n + 2) : n;
      const phi = fill([rows, n * h], 'float32', 0.01);
      const alpha = small([3], 'float32', 0.5, 1.5);
      const bias = small([rows], 'float32', -0.1, 0.1);
      if (c.op === 'llm.mhcPre') return () => llm.mhcPre(s, phi, alpha, bias, { sinkhornIters: 20 });
      if (c.op === 'llm.mhcHeadCollapse') return () => llm.mhcHeadCollapse(s, phi, kiln.narrow(alpha, 0, 0, 1), bias);
      const f = fill([t, h], d);
      const post = small([t, n], 'float32', 0, 2);
      const comb = small([t, n, n], 'float32', 0, 1);
      return () => llm.mhcPost(f, s, post, comb);
    }
    case 'topk': {
      const x = fill([p.rows!, p.R!], d);
      return () => kiln.topk(x, p.k!, -1);
    }
    case 'sort': {
      const x = fill([p.rows!, p.R!], d);
      return () => kiln.sort(x, -1, false, true);
    }
    default:
      throw new Error(`unknown case ${c.op}`);
  }
}

function disposeAll(r: unknown): void {
  if (r instanceof kiln.Tensor) r.dispose();
  else if (Array.isArray(r)) r.forEach(disposeAll);
  else if (r && typeof r === 'object') Object.values(r).forEach(disposeAll);
}

/**
 * Host calls of an op's first case before it is timed: V8 optimises the op's dispatch path over
 * the first few hundred calls, and with only WARMUP calls the first small case of each op measured
 * the unoptimised host path (s4 R2: moeSum [1, 8, 4096] fp32 at 16.9 us, the next rows 11-12 us).
 */
const JIT_WARMUP = 200;
/**
 * And more, up to JIT_WARMUP_CALLS calls or JIT_WARMUP_MS of host time, whichever comes first: 200
 * calls left V8 short of its steady state, and the small moeSum rows, whose per-call time is mostly
 * host dispatch (a 3 us kernel in 12-18 us), swung between 0.92x and 1.37x of PyTorch from run to
 * run (session 6); bench/cuda-launch.ts measured the same settling over 20,000 calls.
 */
const JIT_WARMUP_CALLS = 20_000;
const JIT_WARMUP_MS = 400;
const warmedOps = new Set<string>();

function timeMs(f: () => unknown, op: string): number {
  if (!warmedOps.has(op)) {
    const t0 = performance.now();
    for (let i = 0; i < JIT_WARMUP_CALLS && (i < JIT_WARMUP || performance.now() - t0 < JIT_WARMUP_MS); i++) disposeAll(f());
    kiln.synchronize(DEVICE);
  }
  warmedOps.add(op);
  for (let i = 0; i < WARMUP; i++) disposeAll(f());
  kiln.synchronize(DEVICE);
  const ts: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const s = new kiln.Event(DEVICE);
    const e = new kiln.Event(DEVICE);
    s.record();
    const r = f();
    e.record();
    e.synchronize();
    ts.push(s.elapsedTime(e));
    disposeAll(r);
  }
  return median(ts);
}

function main(): void {
  const [torchPath, outPath] = process.argv.slice(2);
  if (!torchPath || !outPath) throw new Error('usage: node dist/bench/llm-moe-cuda.js <torch.json> <out.json>');
  const cases = JSON.parse(fs.readFileSync(torchPath, 'utf8')) as Case[];
  const rows: Record<string, unknown>[] = [];
  for (const c of cases) {
    let kilnMs: number;
    try {
      kilnMs = kiln.noGrad(() => timeMs(build(c), c.op));
    } catch (e) {
      console.log(`kiln  ${c.op.padEnd(22)} ${c.dtype.padEnd(9)} ${c.shape.padEnd(42)} FAILED: ${(e as Error).message.split('\n')[0]}`);
      continue;
    }
    const row = { op: c.op, shape: c.shape, dtype: c.dtype, torch_ms: c.torch_ms, kiln_ms: kilnMs, speedup: c.torch_ms / kilnMs, gbps: c.bytes / (kilnMs * 1e-3) / 1e9, torch_impl: c.torch_impl };
    rows.push(row);
    fs.writeFileSync(outPath, JSON.stringify(rows, null, 1));
  }
  console.log(`${'op'.padEnd(20)} ${'dtype'.padEnd(9)} ${'shape'.padEnd(42)} ${'torch ms'.padStart(9)} ${'kiln ms'.padStart(9)} ${'x'.padStart(6)} ${'GB/s'.padStart(7)}`);
  for (const r of rows as { op: string; dtype: string; shape: string; torch_ms: number; kiln_ms: number; speedup: number; gbps: number }[]) {
    console.log(`${r.op.padEnd(20)} ${r.dtype.padEnd(9)} ${r.shape.padEnd(42)} ${r.torch_ms.toFixed(4).padStart(9)} ${r.kiln_ms.toFixed(4).padStart(9)} ${r.speedup.toFixed(2).padStart(6)} ${r.gbps.toFixed(0).padStart(7)}`);
  }
}

main();
