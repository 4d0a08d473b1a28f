/**
 * Issue #20: the webgpu flash-attention prefill's forms side by side, device time per call from
 * timestamp events (webgpu-device-ms.ts: calls queued back to back, forms alternating), on a
 * Qwen3-0.6B prefill's attention (16 query heads over 8 kv heads, head dim 128, causal) of 128 and
 * 1024 tokens: the row-per-invocation kernel (KILN_WEBGPU_ATTN_PREFILL=rows) and the tiled kernel.
 * (Session 28 also timed the tiled kernel's copies with 8 loads staged per invocation before any
 * store: no difference, 33.9 against 34.2 us at 128 tokens float32; dropped, code in c288044.)
 *
 * Also the float16 kernel on subgroup matrices (KILN_WEBGPU_ATTN_PREFILL=matrix, session 31) and its
 * key-split form (matrix-split: a workgroup's subgroups share the key blocks of one tile of rows),
 * the one-pass row tiles (matrix-online, session 39), and other shapes: --shape B,H,HKV,E (the transformer-block workload: 8,16,16,64 at 512 tokens).
 *
 *   node dist/bench/webgpu-attention.js [--dtypes float32,float16] [--lengths 128,1024] [--shape 1,16,8,128]
 *        [--forms "rows;tiled, word copies;matrix;matrix-split;matrix-online"] [--calls 20] [--reps 9] [--json out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import type { DType } from '../src/tensor/dtype.js';
import { deviceMsPerCall } from './webgpu-device-ms.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const dtypes = (flag('--dtypes') ?? 'float32,float16').split(',') as DType[];
const lengths = (flag('--lengths') ?? '128,1024').split(',').map(Number);
const calls = Number(flag('--calls') ?? 20);
const reps = Number(flag('--reps') ?? 9);

const [B, H, HKV, E] = (flag('--shape') ?? '1,16,8,128').split(',').map(Number) as [number, number, number, number];
const only = flag('--forms')?.split(';');

const ALL_FORMS: readonly { name: string; prefill: 'rows' | 'tiled' | 'matrix' | 'matrix-split'; words: boolean; store?: 'exact'; online?: boolean }[] = [
  { name: 'rows', prefill: 'rows', words: false },
  { name: 'tiled, scalar copies', prefill: 'tiled', words: false },
  { name: 'tiled, word copies', prefill: 'tiled', words: true },
  // float16 only: stores rounded by the integer code whatever the probe says (KILN_WEBGPU_F16_STORE=exact).
  { name: 'tiled, words, exact store', prefill: 'tiled', words: true, store: 'exact' },
  // float16 only: subgroup matrices where the device has them (else it runs the tiled kernel).
  { name: 'matrix', prefill: 'matrix', words: true },
  { name: 'matrix-split', prefill: 'matrix-split', words: true },
  // float16 only: the one-pass row tiles (KILN_WEBGPU_ATTN_MATRIX_FORM=online, session 39).
  { name: 'matrix-online', prefill: 'matrix', words: true, online: true },
];
const FORMS = ALL_FORMS.filter((f) => only === undefined || only.includes(f.name));

const rows: Record<string, unknown>[] = [];
for (const dtype of dtypes) {
  for (const L of lengths) {
    kiln.manualSeed(0);
    const q = kiln.randn([B, H, L, E]).to('webgpu').to(dtype);
    const k = kiln.randn([B, HKV, L, E]).to('webgpu').to(dtype);
    const v = kiln.randn([B, HKV, L, E]).to('webgpu').to(dtype);
    const forms = FORMS.filter((f) => (f.store === undefined && !f.prefill.startsWith('matrix')) || dtype === 'float16');
    // The forms' outputs against the first form's (largest absolute difference): a form that computes something else shows.
    const outs = forms.map((f) => {
      setOption('KILN_WEBGPU_ATTN_PREFILL', f.prefill);
      setOption('KILN_WEBGPU_ATTN_WORDS', f.words);
      setOption('KILN_WEBGPU_ATTN_MATRIX_FORM', f.online === true ? 'online' : undefined);
      try {
        return kiln.scaledDotProductAttention(q, k, v, null, 0, true, null, H !== HKV).to('float32');
      } finally {
        setOption('KILN_WEBGPU_ATTN_PREFILL', undefined);
        setOption('KILN_WEBGPU_ATTN_WORDS', undefined);
        setOption('KILN_WEBGPU_ATTN_MATRIX_FORM', undefined);
      }
    });
    const diffs = outs.map((o) => Number(kiln.max(kiln.abs(kiln.sub(o, outs[0]!))).item()));
    const fns = forms.map((f) => (): void => {
      setOption('KILN_WEBGPU_ATTN_PREFILL', f.prefill);
      setOption('KILN_WEBGPU_ATTN_WORDS', f.words);
      setOption('KILN_WEBGPU_F16_STORE', f.store);
      setOption('KILN_WEBGPU_ATTN_MATRIX_FORM', f.online === true ? 'online' : undefined);
      try {
        kiln.scope(() => void kiln.scaledDotProductAttention(q, k, v, null, 0, true, null, H !== HKV));
      } finally {
        setOption('KILN_WEBGPU_ATTN_PREFILL', undefined);
        setOption('KILN_WEBGPU_ATTN_WORDS', undefined);
        setOption('KILN_WEBGPU_F16_STORE', undefined);
        setOption('KILN_WEBGPU_ATTN_MATRIX_FORM', undefined);
      }
    });
    const ms = deviceMsPerCall(fns, reps, calls);
    // Attention FLOPs of the causal product (q k^T and p v, half the square).
    const flops = 2 * 2 * B * H * E * ((L * (L + 1)) / 2);
    forms.forEach((f, i) => {
      const row = { framework: 'kiln', workload: 'sdpa-prefill', device: 'webgpu:0', dtype, batch: B, heads: H, kv_heads: HKV, head_dim: E, tokens: L, form: f.name, ms: ms[i]!, tflops: flops / (ms[i]! * 1e9), max_abs_diff_vs_first: diffs[i] };
      rows.push(row);
      console.log(`${dtype.padEnd(8)} L ${String(L).padStart(5)}  ${f.name.padEnd(15)} ${(ms[i]! * 1000).toFixed(1).padStart(8)} us  ${row.tflops.toFixed(2)} TFLOP/s  diff ${diffs[i]!.toExponential(2)}`);
    });
  }
}
const out = flag('--json');
if (out) fs.writeFileSync(out, JSON.stringify({ meta: { command: `node dist/bench/webgpu-attention.js ${argv.join(' ')}`, date: new Date().toISOString(), device: kiln.getAccelerator('webgpu') ? 'webgpu:0' : null }, results: rows }, null, 1));
