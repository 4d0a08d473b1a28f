/**
 * The webgpu flash attention (kernels/webgpu/flash-attention*.ts) against a float64 reference
 * softmax(q k^T * scale + mask) v (helpers/nn-ref.ts refAttention, the [L, S] matrix materialised
 * on the host): prefill (the tiled kernel, keys in blocks of 32, so every case with S > 32 crosses
 * blocks; and the row-per-invocation kernel, KILN_WEBGPU_ATTN_PREFILL=rows) and decode (few query rows; long key ranges split and combined), causal
 * and not, Lq != Lk, grouped-query heads, head dims 32/64/128, bool / additive masks (broadcast,
 * a fully masked row is NaN), strided operands, float32 / float16 / bfloat16; and autograd through
 * the op on webgpu against the CPU's gradients. Skips without a computing adapter.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, randomValues, type Layout } from './helpers/make.js';
import { refAttention } from './helpers/nn-ref.js';
import { sameLayoutOnWebgpu, webgpuSkipReason } from './helpers/webgpu.js';
import { setOption } from '../src/runtime/config.js';
import { TILED_WG, tiledPrefillBytes, tiledPrefillPlan } from '../src/kernels/webgpu/flash-attention-tiled.js';

const skip = webgpuSkipReason();

interface Case {
  label: string;
  q: number[];
  k: number[];
  ev?: number;
  causal?: boolean;
  mask?: { shape: number[]; bool: boolean; hole?: boolean };
  dtype?: DType;
  layout?: Layout;
  scale?: number;
}

const numel = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);

/** `values` as a `dtype` tensor on the CPU (layout kept) and the values it holds (rounded). */
function input(values: number[], shape: number[], dtype: DType, layout: Layout = 'contiguous'): { t: Tensor; held: number[] } {
  const t = makeTensor(values, shape, dtype, layout);
  return { t, held: (t.toFlatArray() as number[]).map(Number) };
}

function check(c: Case, seed: number): string | null {
  const dtype = c.dtype ?? 'float32';
  const vShape = [...c.k.slice(0, -1), c.ev ?? c.k[c.k.length - 1]!];
  const q = input(randomValues(numel(c.q), seed, -1.5, 1.5), c.q, dtype, c.layout);
  const k = input(randomValues(numel(c.k), seed + 1, -1.5, 1.5), c.k, dtype, c.layout);
  const v = input(randomValues(numel(vShape), seed + 2, -2, 2), vShape, dtype, c.layout);
  let mask: ReturnType<typeof input> | null = null;
  if (c.mask) {
    const n = numel(c.mask.shape);
    const raw = randomValues(n, seed + 3, 0, 1);
    const s = c.mask.shape[c.mask.shape.length - 1]!;
    // Bool: about 30% dropped; float: some -inf, the rest small offsets. `hole`: row 0 fully masked.
    const vals = raw.map((r, i) => {
      const dropped = (c.mask!.hole === true && i < s) || r < 0.3;
      return c.mask!.bool ? (dropped ? 0 : 1) : dropped ? -Infinity : r - 0.5;
    });
    mask = input(vals, c.mask.shape, c.mask.bool ? 'bool' : dtype);
  }
  const want = refAttention({ values: q.held, shape: c.q }, { values: k.held, shape: c.k }, { values: v.held, shape: vShape }, {
    causal: c.causal,
    scale: c.scale,
    mask: mask && c.mask ? { values: mask.held, shape: c.mask.shape, bool: c.mask.bool } : undefined,
  });
  const out = kiln.scaledDotProductAttention(
    sameLayoutOnWebgpu(q.t),
    sameLayoutOnWebgpu(k.t),
    sameLayoutOnWebgpu(v.t),
    mask ? sameLayoutOnWebgpu(mask.t) : null,
    0,
    c.causal === true,
    c.scale ?? null,
    c.q[c.q.length - 3] !== c.k[c.k.length - 3],
  );
  if (out.shape.join(',') !== want.shape.join(',')) return `shape [${out.shape}] want [${want.shape}]`;
  const got = (out.to('cpu').toFlatArray() as number[]).map(Number);
  const tol = dtype === 'float32' ? 2e-5 : dtype === 'float16' ? 2e-3 : 1.6e-2;
  for (let i = 0; i < got.length; i++) {
    const a = got[i]!;
    const b = want.values[i]!;
    if (Number.isNaN(b) ? Number.isNaN(a) : Math.abs(a - b) <= tol * (1 + Math.abs(b))) continue;
    return `element ${i}: got ${a}, want ${b}`;
  }
  return null;
}

const CASES: Case[] = [
  { label: 'prefill causal L = S = 70, E 64', q: [2, 2, 70, 64], k: [2, 2, 70, 64], causal: true },
  { label: 'prefill Lq 40 != Lk 100, not causal, E 64', q: [1, 3, 40, 64], k: [1, 3, 100, 64] },
  { label: 'prefill causal Lq 33 < Lk 50 (top-left), GQA 4/2, E 128', q: [1, 4, 33, 128], k: [1, 2, 50, 128], causal: true },
  { label: 'prefill causal Lq 80 > Lk 20', q: [1, 1, 80, 32], k: [1, 1, 20, 32], causal: true },
  { label: 'prefill E 64, Ev 32, scale 0.3', q: [2, 1, 20, 64], k: [2, 1, 45, 64], ev: 32, scale: 0.3 },
  { label: 'prefill bool mask [L, S] broadcast, GQA 4/1', q: [2, 4, 24, 64], k: [2, 1, 37, 64], mask: { shape: [24, 37], bool: true } },
  { label: 'prefill float mask with -inf [B, 1, L, S], row 0 fully masked', q: [2, 2, 17, 32], k: [2, 2, 40, 32], mask: { shape: [2, 1, 17, 40], bool: false, hole: true } },
  { label: 'prefill strided operands', q: [1, 2, 19, 64], k: [1, 2, 35, 64], layout: 'strided', causal: true },
  { label: 'prefill transposed operands', q: [2, 2, 12, 16], k: [2, 2, 13, 16], layout: 'transposed' },
  { label: 'prefill 3-d (no heads)', q: [3, 20, 32], k: [3, 50, 32] },
  { label: 'prefill float16 causal E 64', q: [1, 2, 40, 64], k: [1, 2, 40, 64], causal: true, dtype: 'float16' },
  { label: 'prefill float16 GQA E 128', q: [1, 2, 20, 128], k: [1, 1, 36, 128], dtype: 'float16' },
  { label: 'prefill bfloat16 bool mask', q: [1, 2, 20, 64], k: [1, 2, 30, 64], dtype: 'bfloat16', mask: { shape: [1, 2, 20, 30], bool: true } },
  { label: 'decode one row, S 7', q: [2, 2, 1, 64], k: [2, 2, 7, 64] },
  { label: 'decode one row, long S 1000 (split), GQA 4/2', q: [1, 4, 1, 64], k: [1, 2, 1000, 64] },
  { label: 'decode one row, S 700 (split), E 128, bool mask', q: [1, 2, 1, 128], k: [1, 2, 700, 128], mask: { shape: [1, 1, 1, 700], bool: true } },
  { label: 'decode 4 rows causal, S 300 (split), E 128 Ev 200', q: [1, 1, 4, 128], k: [1, 1, 300, 128], ev: 200, causal: true },
  { label: 'decode float mask, row 0 fully masked', q: [1, 2, 3, 32], k: [1, 2, 90, 32], mask: { shape: [3, 90], bool: false, hole: true } },
  { label: 'decode float16, split', q: [1, 2, 1, 64], k: [1, 2, 600, 64], dtype: 'float16' },
  { label: 'decode bfloat16 GQA', q: [1, 4, 2, 64], k: [1, 1, 80, 64], dtype: 'bfloat16', causal: true },
];

/** Failures of `cases` (seeded by their index), each run under the prefill form `form`. */
function failuresOf(cases: readonly Case[], form: 'tiled' | 'rows'): string[] {
  const failures: string[] = [];
  setOption('KILN_WEBGPU_ATTN_PREFILL', form);
  try {
    cases.forEach((c, i) => {
      try {
        const m = check(c, 100 + 10 * i);
        if (m) failures.push(`${form} ${c.label}: ${m}`);
      } catch (e) {
        failures.push(`${form} ${c.label}: threw ${(e as Error).message}`);
      }
    });
  } finally {
    setOption('KILN_WEBGPU_ATTN_PREFILL', undefined);
  }
  return failures;
}

test('webgpu flash attention matches a float64 softmax(q k^T) v (prefill, decode, causal, masks, GQA, dtypes)', { skip }, () => {
  const failures = failuresOf(CASES, 'tiled');
  assert.deepEqual(failures, [], `${failures.length} cases differ:\n${failures.join('\n')}`);
});

test('webgpu flash attention prefill: the row kernel (KILN_WEBGPU_ATTN_PREFILL=rows) and the tiled kernel with 32-row tiles', { skip }, () => {
  const prefill = CASES.filter((c) => c.label.startsWith('prefill'));
  // 8 x 8 heads of 97 rows: 256 tiles of 32 rows (the last one partial), so the tiled kernel takes 32-row tiles.
  const wide: Case = { label: 'prefill causal, 64 heads of 97 rows (32-row tiles), E 16', q: [8, 8, 97, 16], k: [8, 8, 97, 16], causal: true };
  assert.deepEqual(tiledPrefillPlan(8 * 8 * Math.ceil(97 / 32), 16, 16, 16384), { bq: 32, bk: 32 });
  // Head dims that are not powers of two (the copies' last round is partial: E 96, E 20 / Ev 12).
  const odd: Case[] = [
    { label: 'prefill causal E 96', q: [1, 2, 40, 96], k: [1, 2, 40, 96], causal: true },
    { label: 'prefill E 20, Ev 12', q: [2, 1, 30, 20], k: [2, 1, 45, 20], ev: 12 },
  ];
  const failures = [...failuresOf(prefill, 'rows'), ...failuresOf([wide, ...odd], 'tiled')];
  assert.deepEqual(failures, [], `${failures.length} cases differ:\n${failures.join('\n')}`);
});

test('webgpu flash attention prefill: the tiled kernel with one element per load (KILN_WEBGPU_ATTN_WORDS=0), and word copies beside operands that are not whole words', { skip }, () => {
  const prefill = CASES.filter((c) => c.label.startsWith('prefill'));
  // E 20 / Ev 12 read as words of 4 float32 (5 and 3 a row: the copies' last round is partial);
  // E 18 is not whole words, so that call keeps the scalar copies with the option on.
  const odd: Case[] = [
    { label: 'prefill E 20, Ev 12, causal', q: [1, 2, 37, 20], k: [1, 2, 37, 20], ev: 12, causal: true },
    { label: 'prefill E 18', q: [1, 1, 21, 18], k: [1, 1, 29, 18] },
  ];
  setOption('KILN_WEBGPU_ATTN_WORDS', false);
  let failures: string[];
  try {
    failures = failuresOf(prefill, 'tiled');
  } finally {
    setOption('KILN_WEBGPU_ATTN_WORDS', undefined);
  }
  failures.push(...failuresOf(odd, 'tiled'));
  assert.deepEqual(failures, [], `${failures.length} cases differ:\n${failures.join('\n')}`);
});

test('tiled prefill plans: fewer tiles take 16-row tiles; plans shrink to the workgroup memory, or there is none', () => {
  // A 128-token Qwen3-0.6B prefill: 16 heads, 4 tiles of 32 rows each.
  assert.deepEqual(tiledPrefillPlan(64, 128, 128, 49152), { bq: 16, bk: 32 });
  assert.deepEqual(tiledPrefillPlan(1024, 128, 128, 49152), { bq: 32, bk: 32 });
  // WebGPU's guaranteed 16 KiB: head dim 128 fits a smaller tile or block.
  const small = tiledPrefillPlan(64, 128, 128, 16384);
  assert.ok(small !== null && small.bq * small.bk < 16 * 32 && tiledPrefillBytes(small, 128, 128) <= 16384, JSON.stringify(small));
  assert.equal(tiledPrefillPlan(64, 256, 256, 16384), null);
  for (const [e, ev] of [[64, 64], [128, 128], [256, 256], [64, 200]] as const) {
    const p = tiledPrefillPlan(64, e, ev, 49152)!;
    assert.ok(tiledPrefillBytes(p, e, ev) <= 49152, `${e}/${ev}`);
    assert.ok(p.bk >= TILED_WG / p.bq, `${e}/${ev}: a row's invocations each own a key of every block`);
  }
});

test('webgpu attention: S = 0 gives zeros, dropout keeps the math path, gradients match the CPU', { skip }, () => {
  const zeros = kiln.scaledDotProductAttention(kiln.ones([1, 3, 8], { device: 'webgpu' }), kiln.ones([1, 0, 8], { device: 'webgpu' }), kiln.ones([1, 0, 4], { device: 'webgpu' }));
  assert.deepEqual(zeros.to('cpu').toFlatArray(), new Array(12).fill(0));
  const grads = (device: 'cpu' | 'webgpu'): number[][] => {
    const mk = (shape: number[], seed: number): Tensor => makeTensor(randomValues(numel(shape), seed), shape).to(device).requiresGrad_();
    const q = mk([1, 2, 9, 16], 1);
    const k = mk([1, 1, 12, 16], 2);
    const v = mk([1, 1, 12, 16], 3);
    const o = kiln.scaledDotProductAttention(q, k, v, null, 0, true, null, true);
    o.mul(o).sum().backward();
    return [q, k, v].map((t) => (t.grad!.to('cpu').toFlatArray() as number[]).map(Number));
  };
  const want = grads('cpu');
  const got = grads('webgpu');
  want.forEach((w, i) => w.forEach((x, j) => assert.ok(Math.abs(got[i]![j]! - x) <= 1e-4 * (1 + Math.abs(x)), `grad ${i}[${j}]: ${got[i]![j]} vs ${x}`)));
});
