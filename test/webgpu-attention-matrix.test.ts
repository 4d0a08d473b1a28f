/**
 * The float16 attention prefill on subgroup matrices (kernels/webgpu/flash-attention-matrix.ts,
 * KILN_WEBGPU_ATTN_PREFILL=matrix, and its key-split form, flash-attention-matrix-split.ts,
 * KILN_WEBGPU_ATTN_PREFILL=matrix-split) against a float64 softmax(q k^T * scale + mask) v
 * (helpers/nn-ref.ts). On SwiftShader the kernel runs emulated (linalg.ts's emulateSubgroupMatrix:
 * 8 x 8 x 8 matrices; subgroups of 8, 16 and 4, so a row's keys are split over two invocations
 * and merged, or one invocation takes two rows), with the real kernel's indices, barriers and
 * passes: causal (top-left, Lq != Lk), grouped-query heads, ragged row and key blocks, bool and
 * additive masks (a fully masked row is NaN), NaN in a query or a key, head dims 16 to 128, Ev != E, and
 * the planner's 1, 2 and 4 subgroups a workgroup; the key split with 4 and 2 subgroups sharing
 * the blocks (setMatrixSplitSubgroups). prefillStats shows which form ran. On a GPU with
 * shader-f16 these cases run on the real matrices (the emulation needs packed float16).
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { emulateSubgroupMatrix } from '../src/kernels/webgpu/linalg.js';
import { MATRIX_MIN_ROWS, MATRIX_SPLIT_MIN_ROWS, prefillStats, setMatrixSplitSubgroups } from '../src/kernels/webgpu/flash-attention.js';
import { matrixPrefillBytes, matrixPrefillPlan } from '../src/kernels/webgpu/flash-attention-matrix.js';
import { matrixOnlineBytes, matrixOnlinePlan } from '../src/kernels/webgpu/flash-attention-matrix-online.js';
import { setOption } from '../src/runtime/config.js';
import { makeTensor, randomValues } from './helpers/make.js';
import { refAttention } from './helpers/nn-ref.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skipGpu = webgpuSkipReason();
const hasF16 = !skipGpu && (kiln.getAccelerator('webgpu').properties(0).features as readonly string[]).includes('shader-f16');
const hasMatrices = !skipGpu && (kiln.getAccelerator('webgpu').properties(0).features as readonly string[]).includes('chromium-experimental-subgroup-matrix');
const skip = skipGpu || (hasF16 && !hasMatrices ? 'shader-f16 without subgroup matrices: neither the emulated nor the real matrix kernel runs here' : false);

interface Case {
  label: string;
  q: number[];
  k: number[];
  ev?: number;
  causal?: boolean;
  mask?: { shape: number[]; bool: boolean; hole?: boolean };
  scale?: number;
  nanAt?: number;
  /** A NaN in the keys: the rows that see that key are NaN. */
  nanKeyAt?: number;
}

const numel = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);

function check(c: Case, seed: number): string | null {
  const vShape = [...c.k.slice(0, -1), c.ev ?? c.k[c.k.length - 1]!];
  const mk = (shape: number[], s: number, lo: number, hi: number, nanAt?: number): { t: kiln.Tensor; held: number[] } => {
    const vals = randomValues(numel(shape), s, lo, hi);
    if (nanAt !== undefined) vals[nanAt] = NaN;
    const t = makeTensor(vals, shape, 'float16');
    return { t, held: (t.toFlatArray() as number[]).map(Number) };
  };
  const q = mk(c.q, seed, -1.5, 1.5, c.nanAt);
  const k = mk(c.k, seed + 1, -1.5, 1.5, c.nanKeyAt);
  const v = mk(vShape, seed + 2, -2, 2);
  let mask: { t: kiln.Tensor; held: number[] } | null = null;
  if (c.mask) {
    const s = c.mask.shape[c.mask.shape.length - 1]!;
    const vals = randomValues(numel(c.mask.shape), seed + 3, 0, 1).map((r, i) => {
      const dropped = (c.mask!.hole === true && i < s) || r < 0.3;
      return c.mask!.bool ? (dropped ? 0 : 1) : dropped ? -Infinity : r - 0.5;
    });
    const t = makeTensor(vals, c.mask.shape, c.mask.bool ? 'bool' : 'float16');
    mask = { t, held: (t.toFlatArray() as (number | boolean)[]).map(Number) };
  }
  const want = refAttention({ values: q.held, shape: c.q }, { values: k.held, shape: c.k }, { values: v.held, shape: vShape }, {
    causal: c.causal,
    scale: c.scale,
    mask: mask && c.mask ? { values: mask.held, shape: c.mask.shape, bool: c.mask.bool } : undefined,
  });
  const gqa = c.q[c.q.length - 3] !== c.k[c.k.length - 3];
  const out = kiln.scaledDotProductAttention(q.t.to('webgpu'), k.t.to('webgpu'), v.t.to('webgpu'), mask ? mask.t.to('webgpu') : null, 0, c.causal === true, c.scale ?? null, gqa);
  if (out.shape.join(',') !== want.shape.join(',')) return `shape [${out.shape}] want [${want.shape}]`;
  const got = (out.to('cpu').toFlatArray() as number[]).map(Number);
  // p is rounded to float16 before p v (2^-11 relative a term, |v| <= 2) and the output once.
  for (let i = 0; i < got.length; i++) {
    const a = got[i]!;
    const b = want.values[i]!;
    if (Number.isNaN(b) ? Number.isNaN(a) : Math.abs(a - b) <= 2e-3 + 1e-3 * Math.abs(b)) continue;
    return `element ${i}: got ${a}, want ${b}`;
  }
  return null;
}

const CASES: Case[] = [
  { label: 'causal L = S = 70, E 64', q: [2, 2, 70, 64], k: [2, 2, 70, 64], causal: true },
  { label: 'Lq 40 != Lk 100, not causal, E 32, scale 0.3', q: [1, 3, 40, 32], k: [1, 3, 100, 32], scale: 0.3 },
  { label: 'causal Lq 33 < Lk 50 (top-left), GQA 4/2, E 128', q: [1, 4, 33, 128], k: [1, 2, 50, 128], causal: true },
  { label: 'causal Lq 45 > Lk 20', q: [1, 1, 45, 32], k: [1, 1, 20, 32], causal: true },
  { label: 'E 64, Ev 16', q: [2, 1, 20, 64], k: [2, 1, 45, 64], ev: 16 },
  { label: 'bool mask [L, S] broadcast, GQA 4/1', q: [2, 4, 24, 16], k: [2, 1, 37, 16], mask: { shape: [24, 37], bool: true } },
  { label: 'additive mask with -inf, row 0 fully masked (NaN)', q: [2, 2, 17, 32], k: [2, 2, 40, 32], mask: { shape: [2, 1, 17, 40], bool: false, hole: true } },
  { label: 'NaN in one query row', q: [1, 2, 19, 16], k: [1, 2, 30, 16], causal: true, nanAt: 5 * 16 + 3 },
  // 256 heads of one 33-row tile at 4 subgroups (32 rows): the planner takes 4 subgroups.
  { label: 'causal, 256 heads of 33 rows, E 16', q: [16, 16, 33, 16], k: [16, 16, 33, 16], causal: true },
  // Causal: rows from 21 see key 21 (NaN), those before do not (under the key split only some parts of a row see it).
  { label: 'NaN in key 21 of 40, causal', q: [1, 1, 30, 16], k: [1, 1, 40, 16], causal: true, nanKeyAt: 21 * 16 + 2 },
];

/** The cases' failures under `form` (the key split capped at `splitSgs` subgroups), and the plans that ran. */
function failures(sg: number, cases: readonly Case[], form: 'matrix' | 'matrix-split' | 'online' = 'matrix', splitSgs: number | null = null): { failed: string[]; plans: string[] } {
  const failed: string[] = [];
  const before = prefillStats.matrix;
  prefillStats.matrixPlans.clear();
  setOption('KILN_WEBGPU_ATTN_PREFILL', form === 'online' ? 'matrix' : form);
  setOption('KILN_WEBGPU_ATTN_MATRIX_FORM', form === 'online' ? 'online' : undefined);
  setMatrixSplitSubgroups(splitSgs);
  if (!hasF16) emulateSubgroupMatrix({ m: 8, n: 8, k: 8, sg });
  const what = `sg ${sg}${form === 'matrix-split' ? ` split${splitSgs ?? ''}` : form === 'online' ? ' online' : ''}`;
  try {
    cases.forEach((c, i) => {
      try {
        const m = check(c, 300 + 10 * i);
        if (m) failed.push(`${what} ${c.label}: ${m}`);
      } catch (e) {
        failed.push(`${what} ${c.label}: threw ${(e as Error).message}`);
      }
    });
  } finally {
    setOption('KILN_WEBGPU_ATTN_PREFILL', undefined);
    setOption('KILN_WEBGPU_ATTN_MATRIX_FORM', undefined);
    setMatrixSplitSubgroups(null);
    if (!hasF16) emulateSubgroupMatrix(null);
  }
  assert.equal(prefillStats.matrix - before, cases.length, `every case ran the matrix kernel (plans ${[...prefillStats.matrixPlans].join(', ')})`);
  return { failed, plans: [...prefillStats.matrixPlans] };
}

// Subgroups of 8: every case (one row an invocation); of 16 (a row's keys over two invocations,
// merged) and of 4 (two rows an invocation): the cases that reach those paths' edges, since the
// emulation is slow on SwiftShader. On a GPU: every case on the real matrices.
const RUNS: [number, readonly Case[]][] = hasF16
  ? [[0, CASES]]
  : [
      [8, CASES],
      [16, CASES.slice(0, 7)],
      [4, [CASES[3]!, CASES[7]!]],
    ];
for (const [sg, cases] of RUNS) {
  test(`float16 attention prefill on ${hasF16 ? "the device's" : `emulated (subgroups of ${sg})`} subgroup matrices matches float64`, { skip }, () => {
    const { failed, plans } = failures(sg, cases);
    assert.deepEqual(failed, [], `${failed.length} cases differ:\n${failed.join('\n')}`);
    // The wide case takes more than one subgroup a workgroup where the memory allows.
    if (cases.includes(CASES[8]!)) assert.ok(plans.some((p) => !p.includes('sgs1')), `plans ${plans.join(', ')}`);
    assert.ok(plans.every((p) => !p.startsWith('split')), `plans ${plans.join(', ')}`);
  });
}

// The one-pass form (KILN_WEBGPU_ATTN_MATRIX_FORM=online): every case with subgroups of 8 (a row
// an invocation) and of 16 (a row's keys over two invocations: the running maximum, the sums and
// the NaN flags combined across them every block), and of 4 (two rows an invocation) on the
// cases that reach that path's edges.
const ONLINE_RUNS: [number, readonly Case[]][] = hasF16
  ? [[0, CASES]]
  : [
      [8, CASES],
      [16, CASES],
      [4, [CASES[3]!, CASES[6]!, CASES[7]!]],
    ];
for (const [sg, cases] of ONLINE_RUNS) {
  test(`one-pass float16 attention prefill on ${hasF16 ? "the device's" : `emulated (subgroups of ${sg})`} subgroup matrices matches float64`, { skip }, () => {
    const { failed, plans } = failures(sg, cases, 'online');
    assert.deepEqual(failed, [], `${failed.length} cases differ:\n${failed.join('\n')}`);
    assert.ok(plans.length > 0 && plans.every((p) => p.startsWith('online ')), `plans ${plans.join(', ')}`);
    if (cases.includes(CASES[8]!)) assert.ok(plans.some((p) => !p.includes('sgs1')), `plans ${plans.join(', ')}`);
  });
}

// The key split (KILN_WEBGPU_ATTN_PREFILL=matrix-split): the same cases with 4 subgroups sharing
// a tile's key blocks (2 where the workgroup memory is short: head dim 128 emulated) and with 2;
// subgroups of 16 and 4 on the cases that reach their edges, as above.
const SPLIT_RUNS: [number, number, readonly Case[]][] = hasF16
  ? [
      [0, 4, CASES],
      [0, 2, CASES],
    ]
  : [
      // (Subsets past the first run: the emulation is slow on SwiftShader and CI runs it on 2 cores.)
      [8, 4, CASES],
      [8, 2, [CASES[1]!, CASES[6]!, CASES[9]!]],
      [16, 4, [CASES[0]!, CASES[5]!, CASES[7]!]],
      [4, 2, [CASES[3]!, CASES[4]!]],
    ];
for (const [sg, sgs, cases] of SPLIT_RUNS) {
  test(`float16 attention prefill, key split over ${sgs} subgroups, on ${hasF16 ? "the device's" : `emulated (subgroups of ${sg})`} subgroup matrices matches float64`, { skip }, () => {
    const { failed, plans } = failures(sg, cases, 'matrix-split', sgs);
    assert.deepEqual(failed, [], `${failed.length} cases differ:\n${failed.join('\n')}`);
    assert.ok(plans.every((p) => p.startsWith('split ')), `plans ${plans.join(', ')}`);
    assert.ok(plans.some((p) => p.includes(`sgs${sgs}`)), `plans ${plans.join(', ')}`);
  });
}

test('matrix prefill plans: subgroups a workgroup follow the work, blocks shrink to the memory', () => {
  // A 128-token Qwen3-0.6B prefill: 16 heads of 128 rows, 16 x 16 matrices, subgroups of 32.
  assert.deepEqual(matrixPrefillPlan(16, 32, 16, 128, 128, 128, 49152, 1024), { t: 16, sg: 32, sgs: 1, bk: 32, split: false });
  // The transformer block: 128 heads of 512 rows: 4 subgroups, 32-key blocks in 48 KiB.
  assert.deepEqual(matrixPrefillPlan(16, 32, 128, 512, 64, 64, 49152, 1024), { t: 16, sg: 32, sgs: 4, bk: 32, split: false });
  const big = matrixPrefillPlan(16, 32, 1024, 512, 128, 128, 49152, 1024)!;
  assert.equal(matrixPrefillBytes(big, 128, 128, 2), 49152);
  // 16 KiB: head dim 128 takes fewer subgroups or smaller blocks, 256 none.
  const small = matrixPrefillPlan(16, 32, 1024, 512, 128, 128, 16384, 1024);
  assert.ok(small !== null && matrixPrefillBytes(small, 128, 128, 2) <= 16384, JSON.stringify(small));
  assert.equal(matrixPrefillPlan(16, 32, 1024, 512, 256, 256, 16384, 1024), null);
  // Head dims that are not whole matrices have no plan.
  assert.equal(matrixPrefillPlan(16, 32, 16, 128, 72, 64, 49152, 1024), null);
});

test('one-pass matrix prefill plans: fewer subgroups than the two-pass kernel where its output tile and second key buffer need the memory', () => {
  // The transformer block (128 heads of 512 rows, head dim 64) in 48 KiB: 2 subgroups of 32-key blocks (4 need 59 KiB).
  const block = matrixOnlinePlan(16, 32, 128, 512, 64, 64, 49152, 1024)!;
  assert.deepEqual(block, { t: 16, sg: 32, sgs: 2, bk: 32, split: false });
  assert.equal(matrixOnlineBytes(block, 64, 64, 2), 38912);
  assert.ok(matrixOnlineBytes({ ...block, sgs: 4 }, 64, 64, 2) > 49152);
  // Qwen3 heads (dim 128), 1024 rows: 2 subgroups of 16-key blocks.
  const qwen = matrixOnlinePlan(16, 32, 16, 1024, 128, 128, 49152, 1024)!;
  assert.deepEqual(qwen, { t: 16, sg: 32, sgs: 2, bk: 16, split: false });
  assert.ok(matrixOnlineBytes(qwen, 128, 128, 2) <= 49152);
  // Head dim 256 in 16 KiB: nothing fits; head dims that are not whole matrices have no plan.
  assert.equal(matrixOnlinePlan(16, 32, 1024, 512, 256, 256, 16384, 1024), null);
  assert.equal(matrixOnlinePlan(16, 32, 16, 128, 72, 64, 49152, 1024), null);
});

test('matrix prefill plans: the key split where row tiles of 4 subgroups give fewer than 256 workgroups, 4 subgroups where they fit', () => {
  const auto = { split: 'auto' } as const;
  // The 128-token Qwen3-0.6B prefill: 16 x 2 row tiles of 64 rows; split, 4 subgroups of 16-key blocks (32-key ones need 79 KiB).
  const qwen = matrixPrefillPlan(16, 32, 16, 128, 128, 128, 49152, 1024, auto)!;
  assert.deepEqual(qwen, { t: 16, sg: 32, sgs: 4, bk: 16, split: true });
  assert.equal(matrixPrefillBytes(qwen, 128, 128, 2), 47360);
  // The threshold: 16 heads x 1024 rows make 256 row tiles of 64 rows (no split), 960 rows 240.
  assert.deepEqual(matrixPrefillPlan(16, 32, 16, 1024, 128, 128, 49152, 1024, auto), matrixPrefillPlan(16, 32, 16, 1024, 128, 128, 49152, 1024));
  assert.equal(matrixPrefillPlan(16, 32, 16, 1024, 128, 128, 49152, 1024, auto)!.split, false);
  assert.equal(matrixPrefillPlan(16, 32, 16, 960, 128, 128, 49152, 1024, auto)!.split, true);
  // The transformer block (128 heads of 512 rows): row tiles, as without the rule.
  assert.deepEqual(matrixPrefillPlan(16, 32, 128, 512, 64, 64, 49152, 1024, auto), { t: 16, sg: 32, sgs: 4, bk: 32, split: false });
  // Invocations for 2 subgroups only: 2 (with 32-key blocks, which then fit).
  assert.deepEqual(matrixPrefillPlan(16, 32, 16, 128, 128, 128, 49152, 64, auto), { t: 16, sg: 32, sgs: 2, bk: 32, split: true });
  // The tests' cap on the split's subgroups.
  assert.deepEqual(matrixPrefillPlan(16, 32, 16, 128, 64, 64, 49152, 1024, { split: true, maxSplitSubgroups: 2 }), { t: 16, sg: 32, sgs: 2, bk: 32, split: true });
  // Forced on many rows: still the split.
  assert.equal(matrixPrefillPlan(16, 32, 128, 512, 64, 64, 49152, 1024, { split: true })!.split, true);
  // 16 KiB, head dim 128: no split plan fits (2 subgroups of 16 keys take 23 KiB): auto keeps the row tiles, forced has none.
  assert.deepEqual(matrixPrefillPlan(16, 32, 16, 128, 128, 128, 16384, 1024, auto), { t: 16, sg: 32, sgs: 1, bk: 16, split: false });
  assert.equal(matrixPrefillPlan(16, 32, 16, 128, 128, 128, 16384, 1024, { split: true }), null);
  // Every plan the split takes fits, scratch included (the merge's 3 floats a row part: subgroups of 64 on 8 x 8 matrices).
  for (const [t, sg] of [
    [16, 32],
    [8, 8],
    [8, 64],
    [16, 16],
  ] as const) {
    for (const e of [16, 64, 128]) {
      const p = matrixPrefillPlan(t, sg, 1, 64, e, e, 32768, 256, { split: true, tileBytes: 4 });
      if (p === null) continue;
      assert.ok(matrixPrefillBytes(p, e, e, 4) <= 32768 && p.sgs * sg <= 256 && p.bk % Math.max(1, sg / t) === 0, JSON.stringify(p));
    }
  }
});

test('KILN_WEBGPU_ATTN_PREFILL=auto takes the matrix kernel from MATRIX_MIN_ROWS rows a head (split over the keys for one head), its key split from MATRIX_SPLIT_MIN_ROWS where few heads, the tiled kernel below and where head dims are not whole matrices', { skip }, () => {
  const run = (c: Case): { matrix: number; tiled: number; failed: string | null } => {
    const m0 = prefillStats.matrix;
    const t0 = prefillStats.tiled;
    prefillStats.matrixPlans.clear();
    if (!hasF16) emulateSubgroupMatrix({ m: 8, n: 8, k: 8, sg: 8 });
    try {
      const failed = check(c, 500);
      return { matrix: prefillStats.matrix - m0, tiled: prefillStats.tiled - t0, failed };
    } finally {
      if (!hasF16) emulateSubgroupMatrix(null);
    }
  };
  const long = run({ label: 'auto, causal, MATRIX_MIN_ROWS rows', q: [1, 1, MATRIX_MIN_ROWS, 16], k: [1, 1, MATRIX_MIN_ROWS, 16], causal: true });
  assert.deepEqual(long, { matrix: 1, tiled: 0, failed: null });
  // One head: row tiles of 4 subgroups would make a handful of workgroups, so the planner splits the keys.
  assert.ok([...prefillStats.matrixPlans].every((p) => p.startsWith('split ')), [...prefillStats.matrixPlans].join(', '));
  // Short and few heads: the key split.
  const mid = run({ label: 'auto, causal, MATRIX_SPLIT_MIN_ROWS rows, 2 heads', q: [1, 2, MATRIX_SPLIT_MIN_ROWS, 16], k: [1, 2, MATRIX_SPLIT_MIN_ROWS, 16], causal: true });
  assert.deepEqual(mid, { matrix: 1, tiled: 0, failed: null });
  assert.ok([...prefillStats.matrixPlans].every((p) => p.startsWith('split ')), [...prefillStats.matrixPlans].join(', '));
  // Short and many heads (the rule does not hold: 256 heads of 2 row tiles): tiled.
  const many = run({ label: 'auto, MATRIX_SPLIT_MIN_ROWS rows, 256 heads', q: [16, 16, MATRIX_SPLIT_MIN_ROWS, 16], k: [16, 16, MATRIX_SPLIT_MIN_ROWS, 16] });
  assert.deepEqual(many, { matrix: 0, tiled: 1, failed: null });
  const short = run({ label: 'auto, causal, 40 rows', q: [1, 2, 40, 16], k: [1, 2, 40, 16], causal: true });
  assert.deepEqual(short, { matrix: 0, tiled: 1, failed: null });
  // Value head dim 20: not whole 8 x 8 (or 16 x 16) matrices, so even a long prefill stays tiled.
  const odd = run({ label: 'auto, head dim 20', q: [1, 1, MATRIX_MIN_ROWS, 24], k: [1, 1, MATRIX_MIN_ROWS, 24], ev: 20 });
  assert.deepEqual(odd, { matrix: 0, tiled: 1, failed: null });
});
