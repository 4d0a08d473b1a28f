/**
 * The decode linears of a Qwen3 config at one row (issue #17), GEMV (KILN_CPU_GEMV on) against
 * the path before it (off: the packed-B GEMM for float32, the JS engine on decoded weights for
 * bfloat16), interleaved rep by rep in one process so machine load hits both alike. Reports the
 * median time and the weight stream rate (weight bytes / time), which the machine's bandwidth
 * (bench/cpu-bandwidth.ts) bounds.
 *
 *   node dist/bench/cpu-gemv.js [--dtypes float32,bfloat16] [--reps 9] [--threads N] [--json out.json]
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import * as kiln from '../src/index.js';
import { setCpuPath, setNativeThreads } from '../src/kernels/cpu/native/index.js';
import { setOption } from '../src/runtime/config.js';

const { values: a } = parseArgs({ options: { dtypes: { type: 'string', default: 'float32,bfloat16' }, reps: { type: 'string', default: '9' }, threads: { type: 'string' }, 'skip-old-bf16-head': { type: 'boolean', default: true }, json: { type: 'string' } } });
const REPS = Number(a.reps);
if (a.threads) setNativeThreads(Number(a.threads));
const c = kiln.models.QWEN3_0_6B;
const H = c.hiddenSize;
const shapes: [string, number, number][] = [
  ['q', c.numAttentionHeads * c.headDim, H],
  ['k/v', c.numKeyValueHeads * c.headDim, H],
  ['o', H, c.numAttentionHeads * c.headDim],
  ['gate/up', c.intermediateSize, H],
  ['down', H, c.intermediateSize],
  ['lm_head', c.vocabSize, H],
];
setCpuPath('native');
const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
const rows: Record<string, unknown>[] = [];
const load0 = os.loadavg();
const dtypes = a.dtypes.split(',') as ('float32' | 'bfloat16')[];
for (const [name, n, k] of shapes) {
  // Each variant cycles through copies of its weight totalling >= 128 MB (4x the 32 MiB L3), so
  // every call streams from DRAM as in a decode step, not from a cache warmed by the last rep.
  const variants = dtypes.flatMap((dtype) => {
    const bytes = n * k * (dtype === 'float32' ? 4 : 2);
    const ws = Array.from({ length: Math.max(1, Math.ceil(128e6 / bytes)) }, () => kiln.randn([n, k], { dtype }));
    const x = kiln.randn([1, k], { dtype });
    // The old bfloat16 LM head decodes 155M weights in JS per call (seconds): skipped unless asked.
    const old = !(dtype === 'bfloat16' && name === 'lm_head' && a['skip-old-bf16-head']);
    return (old ? [true, false] : [true]).map((on) => ({ dtype, on, bytes, ws, x, next: 0, ms: [] as number[] }));
  });
  const run = (v: (typeof variants)[number]): number => {
    setOption('KILN_CPU_GEMV', v.on);
    const w = v.ws[v.next++ % v.ws.length]!;
    const t0 = performance.now();
    kiln.nn.functional.linear(v.x, w).dispose();
    return performance.now() - t0;
  };
  for (const v of variants) for (let i = 0; i < v.ws.length; i++) run(v); // warm-up: builds, the GEMM's cached packings
  for (let r = 0; r < REPS; r++) for (const v of variants) v.ms.push(run(v));
  setOption('KILN_CPU_GEMV', undefined);
  for (const v of variants) {
    const ms = median(v.ms);
    const row = { dtype: v.dtype, linear: name, n, k, path: v.on ? 'gemv' : 'before', weight_mb: Number((v.bytes / 1e6).toFixed(2)), copies: v.ws.length, ms: Number(ms.toFixed(3)), gb_s: Number((v.bytes / ms / 1e6).toFixed(2)) };
    rows.push(row);
    console.log(`${v.dtype.padEnd(8)} ${name.padEnd(8)} [${n}x${k}] ${row.path.padEnd(6)} ${String(row.ms).padStart(9)} ms ${String(row.gb_s).padStart(6)} GB/s`);
  }
  for (const v of variants) if (v.on) for (const w of v.ws) w.dispose();
}
const load1 = os.loadavg();
console.log(`threads ${a.threads ?? 'default (adaptive)'}; load ${load0.map((v) => v.toFixed(2)).join(' ')} -> ${load1.map((v) => v.toFixed(2)).join(' ')}`);
let commit = '';
try {
  commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
} catch {
  /* not a checkout */
}
const meta = { machine: os.hostname(), cpus: os.cpus().length, date: new Date().toISOString(), command: `node dist/bench/cpu-gemv.js ${process.argv.slice(2).join(' ')}`, commit, node: process.version, loadavg_before: load0, loadavg_after: load1, reps: REPS };
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ meta, results: rows }, null, 2) + '\n');
