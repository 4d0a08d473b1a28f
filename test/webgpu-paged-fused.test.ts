/**
 * The webgpu llm.pagedAttention's fused form (KILN_WEBGPU_PAGED_FUSED: the split kernel and the
 * combine in one dispatch, the splits as sub-splits of one workgroup, issue #20) against a float64
 * reference written here from the rounded inputs, with the option on and off: float32 and float16;
 * Qwen3-0.6B's heads (16 over 8, head dim 128, group 2) at batch 1 and 2, and a group of 4 with head
 * dim 80 (two value dims per invocation); context lengths 0, 1, inside a block, at and past 64-key
 * blocks and split ends, the full capacity; the unrolled loads on and off. Each run also checks
 * which kernels ran: one `paged.fused` dispatch with the option on, `paged.split` + `paged.combine`
 * with it off, so the fused path cannot silently fall back. Needs a real adapter (SwiftShader in CI).
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { pagedFuses, pagedPlan } from '../src/kernels/webgpu/llm-paged.js';
import { setOption } from '../src/runtime/config.js';
import type { WebgpuAccelerator, WebgpuKernel } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { DeviceBuffer } from '../src/runtime/accelerator.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

interface Case {
  readonly dtype: DType;
  readonly lens: readonly number[];
  readonly heads: number;
  readonly kvHeads: number;
  readonly d: number;
  readonly maxBlocks: number;
}

const BS = 16;

/** out[b, h] in float64 from the (rounded) inputs' values; block b * maxBlocks + i backs sequence b's block i, reversed within the row. */
function reference(c: Case, q: number[], kc: number[], vc: number[], scale: number): Float64Array {
  const { heads: H, kvHeads: hkv, d: D } = c;
  const B = c.lens.length;
  const out = new Float64Array(B * H * D);
  for (let b = 0; b < B; b++) {
    const len = c.lens[b]!;
    const row = (t: number, kvh: number): number => ((tableEntry(c, b, Math.floor(t / BS)) * BS + (t % BS)) * hkv + kvh) * D;
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / (H / hkv));
      const s = Array.from({ length: len }, (_, t) => {
        let acc = 0;
        for (let e = 0; e < D; e++) acc += q[(b * H + h) * D + e]! * kc[row(t, kvh) + e]!;
        return acc * scale;
      });
      const mx = Math.max(...s);
      const p = s.map((v) => Math.exp(v - mx));
      const l = p.reduce((x, y) => x + y, 0);
      for (let e = 0; e < D; e++) {
        let a = 0;
        for (let t = 0; t < len; t++) a += p[t]! * vc[row(t, kvh) + e]!;
        out[(b * H + h) * D + e] = len === 0 ? 0 : a / l;
      }
    }
  }
  return out;
}

/** The block table: sequence b's blocks in reverse order, so table lookups matter. */
const tableEntry = (c: Case, b: number, i: number): number => b * c.maxBlocks + (c.maxBlocks - 1 - i);

interface Run {
  readonly out: number[];
  readonly kernels: string[];
}

function run(c: Case, q: Tensor, kc: Tensor, vc: Tensor, tab: Tensor, lens: Tensor, fused: boolean, unroll: boolean): Run {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const kernels: string[] = [];
  const orig = acc.dispatch.bind(acc);
  acc.dispatch = (k: WebgpuKernel, bufs: readonly DeviceBuffer[], meta: Uint32Array, groups: readonly [number, number, number]): void => {
    kernels.push(k.name);
    orig(k, bufs, meta, groups);
  };
  setOption('KILN_WEBGPU_PAGED_FUSED', fused);
  setOption('KILN_WEBGPU_PAGED_UNROLL', unroll);
  try {
    const got = kiln.llm.pagedAttention(q, kc, vc, tab, lens, 1 / Math.sqrt(c.d));
    assert.deepEqual([...got.shape], [c.lens.length, c.heads, c.d]);
    assert.equal(got.dtype, c.dtype);
    return { out: got.to('cpu').to('float64').toFlatArray() as number[], kernels };
  } finally {
    acc.dispatch = orig;
    setOption('KILN_WEBGPU_PAGED_FUSED', undefined);
    setOption('KILN_WEBGPU_PAGED_UNROLL', undefined);
  }
}

function worstError(got: number[], want: Float64Array, tol: number): { worst: number; at: number } {
  let worst = 0;
  let at = -1;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i]! - want[i]!) / (tol + tol * Math.abs(want[i]!));
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  return { worst, at };
}

/** Failures of one case with the option on and off (and the unrolled loads on and off). */
function check(c: Case, seed: number): string[] {
  const B = c.lens.length;
  kiln.manualSeed(seed);
  const q = kiln.randn([B, c.heads, c.d]).to(c.dtype);
  const kc = kiln.randn([B * c.maxBlocks, BS, c.kvHeads, c.d]).to(c.dtype);
  const vc = kiln.randn([B * c.maxBlocks, BS, c.kvHeads, c.d]).to(c.dtype);
  const vals = (t: Tensor): number[] => t.to('float64').toFlatArray() as number[];
  const want = reference(c, vals(q), vals(kc), vals(vc), 1 / Math.sqrt(c.d));
  const table = Array.from({ length: B }, (_, b) => Array.from({ length: c.maxBlocks }, (_, i) => tableEntry(c, b, i)));
  const [qd, kd, vd] = [q, kc, vc].map((t) => t.to('webgpu')) as [Tensor, Tensor, Tensor];
  const tab = kiln.tensor(table, { dtype: 'int32' }).to('webgpu');
  const lens = kiln.tensor([...c.lens], { dtype: 'int32' }).to('webgpu');
  const tol = c.dtype === 'float32' ? 2e-5 : 2e-3;
  const label = `${c.dtype} lens [${c.lens.join(', ')}] H ${c.heads}/${c.kvHeads} D ${c.d} capacity ${c.maxBlocks * BS}`;
  const failures: string[] = [];
  const outs: number[][] = [];
  for (const fused of [true, false]) {
    for (const unroll of [true, false]) {
      const r = run(c, qd, kd, vd, tab, lens, fused, unroll);
      const fusedRan = r.kernels.filter((k) => k.includes('paged.fused')).length;
      const splitRan = r.kernels.filter((k) => k.includes('paged.split') || k.includes('paged.combine')).length;
      if (fused ? fusedRan !== 1 || splitRan !== 0 : fusedRan !== 0 || splitRan !== 2) failures.push(`${label} fused ${fused}: kernels ${r.kernels.join(', ')}`);
      const { worst, at } = worstError(r.out, want, tol);
      if (!(worst <= 1)) failures.push(`${label} fused ${fused} unroll ${unroll}: element ${at} got ${r.out[at]}, want ${want[at]}`);
      outs.push(r.out);
    }
  }
  // Same arithmetic in the same order: on and off agree far more closely than either with float64.
  const close = worstError(outs[0]!, Float64Array.from(outs[2]!), tol / 64);
  if (!(close.worst <= 1)) failures.push(`${label}: fused and split differ at element ${close.at}: ${outs[0]![close.at]} against ${outs[2]![close.at]}`);
  return failures;
}

test('the fused paged-attention form applies only with several splits that fit one workgroup, and with the option', { skip }, () => {
  const limits = (kiln.getAccelerator('webgpu') as WebgpuAccelerator).bridge.adapter.limits;
  const most = Math.floor((limits.maxComputeInvocationsPerWorkgroup ?? 256) / 64);
  assert.ok(most >= 4, `the device runs ${most * 64} invocations per workgroup: the cases below need 4 sub-splits`);
  assert.equal(pagedFuses(1, 2, 128, false), false); // one split: already one dispatch
  assert.equal(pagedFuses(4, 2, 128, false), true);
  assert.equal(pagedFuses(4, 2, 128, true), false); // the vector value pass keeps two dispatches
  assert.equal(pagedFuses(most + 1, 2, 128, false), false); // more sub-splits than a workgroup holds
  setOption('KILN_WEBGPU_PAGED_FUSED', false);
  try {
    assert.equal(pagedFuses(4, 2, 128, false), false);
  } finally {
    setOption('KILN_WEBGPU_PAGED_FUSED', undefined);
  }
});

test('webgpu llm.pagedAttention fused (one dispatch) matches a float64 reference and the two-dispatch form', { skip }, () => {
  const failures: string[] = [];
  let seed = 71;
  for (const dtype of ['float16', 'float32'] as const) {
    // Qwen3-0.6B's heads at batch 1: 8 items, capacity 256 -> 4 splits of 64 keys.
    assert.equal(pagedPlan(8, 256).splits, 4);
    for (const lens of [[0], [1], [63], [64], [65], [100], [191], [200], [256]]) failures.push(...check({ dtype, lens, heads: 16, kvHeads: 8, d: 128, maxBlocks: 16 }, seed++));
    // Batch 2 (16 items, still 4 splits): a long and a short row, and a row of length 0 beside one past a split's end.
    failures.push(...check({ dtype, lens: [250, 3], heads: 16, kvHeads: 8, d: 128, maxBlocks: 16 }, seed++));
    failures.push(...check({ dtype, lens: [0, 129], heads: 16, kvHeads: 8, d: 128, maxBlocks: 16 }, seed++));
    // Capacity 192 -> 3 splits (a workgroup of 192), group 4 (a head group of 4) with head dim 80: two value dims per invocation.
    assert.equal(pagedPlan(3, 192).splits, 3);
    failures.push(...check({ dtype, lens: [17, 190, 64], heads: 4, kvHeads: 1, d: 80, maxBlocks: 12 }, seed++));
  }
  assert.deepEqual(failures, [], failures.join('\n'));
});
