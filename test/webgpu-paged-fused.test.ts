/**
 * The webgpu llm.pagedAttention's fused form (KILN_WEBGPU_PAGED_FUSED: the split kernel and the
 * combine in one dispatch, the splits as sub-splits of one workgroup, issue #20) against a float64
 * reference written here from the rounded inputs, with the option on and off: float32 and float16;
 * Qwen3-0.6B's heads (16 over 8, head dim 128, group 2) at batch 1 and 2, and a group of 4 with head
 * dim 80 (two value dims per invocation); context lengths 0, 1, inside a block, at and past 64-key
 * blocks and split ends, the full capacity; the unrolled loads on and off. Each run also checks
 * which kernels ran: one `paged.fused` dispatch with the option on, `paged.split` + `paged.combine`
 * with it off, so the fused path cannot silently fall back. The lanes form (paged-attention-lanes.ts,
 * KILN_WEBGPU_PAGED_LANES, the default up to 4096 tokens of capacity) against the same reference at
 * chunk ends and over several chunks, 128 invocations, group 4; a NaN key, a block id outside the
 * cache and the capacity limit. Needs a real adapter (SwiftShader in CI).
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

/** The forms: lanes (paged-attention-lanes.ts), fused (split + combine in one dispatch), split (two dispatches). */
type Form = 'lanes' | 'fused' | 'split';

/** Runs `fn`, pushing the name of every kernel it dispatches to `kernels`. */
function recordKernels<T>(kernels: string[], fn: () => T): T {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const orig = acc.dispatch.bind(acc);
  acc.dispatch = (k: WebgpuKernel, bufs: readonly DeviceBuffer[], meta: Uint32Array, groups: readonly [number, number, number]): void => {
    kernels.push(k.name);
    orig(k, bufs, meta, groups);
  };
  try {
    return fn();
  } finally {
    acc.dispatch = orig;
  }
}

function run(c: Case, q: Tensor, kc: Tensor, vc: Tensor, tab: Tensor, lens: Tensor, form: Form, unroll: boolean, lanesWg?: number): Run {
  const kernels: string[] = [];
  setOption('KILN_WEBGPU_PAGED_LANES', form === 'lanes' ? 1 << 20 : 0);
  if (lanesWg !== undefined) setOption('KILN_WEBGPU_PAGED_LANES_WG', lanesWg);
  setOption('KILN_WEBGPU_PAGED_FUSED', form === 'fused');
  setOption('KILN_WEBGPU_PAGED_UNROLL', unroll);
  try {
    const got = recordKernels(kernels, () => kiln.llm.pagedAttention(q, kc, vc, tab, lens, 1 / Math.sqrt(c.d)));
    assert.deepEqual([...got.shape], [c.lens.length, c.heads, c.d]);
    assert.equal(got.dtype, c.dtype);
    return { out: got.to('cpu').to('float64').toFlatArray() as number[], kernels };
  } finally {
    setOption('KILN_WEBGPU_PAGED_LANES', undefined);
    setOption('KILN_WEBGPU_PAGED_LANES_WG', undefined);
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

/** Failures of one case in each of `forms` (fused and split also with the unrolled loads on and off). */
function check(c: Case, seed: number, forms: readonly Form[] = ['fused', 'split'], lanesWg?: number): string[] {
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
  const outs = new Map<Form, number[]>();
  for (const form of forms) {
    for (const unroll of form === 'lanes' ? [true] : [true, false]) {
      const r = run(c, qd, kd, vd, tab, lens, form, unroll, lanesWg);
      const ran = (name: string): number => r.kernels.filter((k) => k.includes(name)).length;
      const splitRan = ran('paged.split') + ran('paged.combine');
      const want1 = form === 'lanes' ? ran('paged.lanes') === 1 && r.kernels.length === 1 : form === 'fused' ? ran('paged.fused') === 1 && r.kernels.length === 1 : splitRan === 2 && r.kernels.length === 2;
      if (!want1) failures.push(`${label} ${form}: kernels ${r.kernels.join(', ')}`);
      const { worst, at } = worstError(r.out, want, tol);
      if (!(worst <= 1)) failures.push(`${label} ${form} unroll ${unroll}: element ${at} got ${r.out[at]}, want ${want[at]}`);
      if (!outs.has(form)) outs.set(form, r.out);
    }
  }
  // Same arithmetic in the same order: fused and split agree far more closely than either with float64.
  const [fu, sp] = [outs.get('fused'), outs.get('split')];
  if (fu && sp) {
    const close = worstError(fu, Float64Array.from(sp), tol / 64);
    if (!(close.worst <= 1)) failures.push(`${label}: fused and split differ at element ${close.at}: ${fu[close.at]} against ${sp[close.at]}`);
  }
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

test('webgpu llm.pagedAttention lanes form (one workgroup per kv head, keys in chunks) matches a float64 reference', { skip }, () => {
  const failures: string[] = [];
  let seed = 171;
  const limits = (kiln.getAccelerator('webgpu') as WebgpuAccelerator).bridge.adapter.limits;
  const ni = Math.min(512, limits.maxComputeInvocationsPerWorkgroup ?? 256);
  for (const dtype of ['float16', 'float32'] as const) {
    // One chunk, chunk ends (the workgroup's invocations are a chunk), several chunks; batch 1 and 2.
    // A table wide enough for the longest (a context past the table's capacity is clamped, which the reference does not model).
    const maxBlocks = Math.ceil((2 * ni + 37) / BS);
    for (const lens of [[0], [1], [63], [ni - 1], [ni], [ni + 1], [2 * ni + 37]]) failures.push(...check({ dtype, lens, heads: 16, kvHeads: 8, d: 128, maxBlocks }, seed++, ['lanes', 'split']));
    failures.push(...check({ dtype, lens: [300, 0], heads: 16, kvHeads: 8, d: 128, maxBlocks: 24 }, seed++, ['lanes']));
    // Group 4 with head dim 64 (a head group of 4; 8 or 16 lanes a row); and 128 invocations (more chunks, a q/k-free merge of 8 or 4 slots).
    failures.push(...check({ dtype, lens: [17, 190, 64], heads: 4, kvHeads: 1, d: 64, maxBlocks: 12 }, seed++, ['lanes']));
    failures.push(...check({ dtype, lens: [333], heads: 16, kvHeads: 8, d: 128, maxBlocks: 24 }, seed++, ['lanes'], 128));
    // The plan's head groups (KILN_WEBGPU_PAGED_LANES_HG=0: 2 and 4 query heads a workgroup; the default takes one at these batch sizes).
    setOption('KILN_WEBGPU_PAGED_LANES_HG', 0);
    try {
      failures.push(...check({ dtype, lens: [300, 17], heads: 16, kvHeads: 8, d: 128, maxBlocks: 24 }, seed++, ['lanes']));
      failures.push(...check({ dtype, lens: [190], heads: 4, kvHeads: 1, d: 64, maxBlocks: 12 }, seed++, ['lanes']));
    } finally {
      setOption('KILN_WEBGPU_PAGED_LANES_HG', undefined);
    }
  }
  assert.deepEqual(failures, [], failures.join('\n'));
});

test('the lanes form: a NaN key makes its heads NaN, a block id outside the cache skips its tokens, a capacity past KILN_WEBGPU_PAGED_LANES falls back', { skip }, () => {
  const c: Case = { dtype: 'float32', lens: [40], heads: 4, kvHeads: 2, d: 64, maxBlocks: 4 };
  kiln.manualSeed(5);
  const q = kiln.randn([1, 4, 64]);
  const kcHost = kiln.randn([4, BS, 2, 64]);
  const vc = kiln.randn([4, BS, 2, 64]).to('webgpu');
  const flat = kcHost.toFlatArray() as number[];
  // Token 5 of sequence 0 lives in block tableEntry(c, 0, 0) = 3, slot 5; kv head 1.
  flat[((3 * BS + 5) * 2 + 1) * 64 + 7] = Number.NaN;
  const kc = kiln.tensor(flat).reshape([4, BS, 2, 64]).to('webgpu');
  const tab = kiln.tensor([[3, 2, 1, 0]], { dtype: 'int32' }).to('webgpu');
  const lens = kiln.tensor([40], { dtype: 'int32' }).to('webgpu');
  const r = run(c, q.to('webgpu'), kc, vc, tab, lens, 'lanes', true);
  assert.ok(r.kernels.length === 1 && r.kernels[0]!.includes('paged.lanes'), r.kernels.join(', '));
  // Heads 2 and 3 read kv head 1: NaN; heads 0 and 1 finite.
  for (let h = 0; h < 4; h++) for (let e = 0; e < 64; e++) assert.equal(Number.isNaN(r.out[h * 64 + e]!), h >= 2, `head ${h} dim ${e}: ${r.out[h * 64 + e]}`);
  // A block id past the cache (99) in the second block: tokens 16..31 are skipped, as a float64 reference without them says.
  const tab2 = kiln.tensor([[3, 99, 1, 0]], { dtype: 'int32' }).to('webgpu');
  const kcOk = kcHost.to('webgpu');
  const got = run(c, q.to('webgpu'), kcOk, vc, tab2, lens, 'lanes', true).out;
  const kv = kcHost.toFlatArray() as number[];
  const vv = vc.to('cpu').toFlatArray() as number[];
  const qv = q.toFlatArray() as number[];
  const blocks = [3, 99, 1, 0];
  for (let h = 0; h < 4; h++) {
    const kvh = h >> 1;
    const toks = Array.from({ length: 40 }, (_, t) => t).filter((t) => blocks[Math.floor(t / BS)]! < 4);
    const row = (t: number): number => ((blocks[Math.floor(t / BS)]! * BS + (t % BS)) * 2 + kvh) * 64;
    const sc = toks.map((t) => qv.slice(h * 64, h * 64 + 64).reduce((a, x, e) => a + x * kv[row(t) + e]!, 0) / 8);
    const mx = Math.max(...sc);
    const p = sc.map((x) => Math.exp(x - mx));
    const l = p.reduce((a, x) => a + x, 0);
    for (let e = 0; e < 64; e++) {
      const want = toks.reduce((a, t, i) => a + p[i]! * vv[row(t) + e]!, 0) / l;
      assert.ok(Math.abs(got[h * 64 + e]! - want) <= 2e-5 * (1 + Math.abs(want)), `head ${h} dim ${e}: ${got[h * 64 + e]} against ${want}`);
    }
  }
  // Capacity 64 tokens past a limit of 32: the fused / split forms run.
  setOption('KILN_WEBGPU_PAGED_LANES', 32);
  try {
    const names: string[] = [];
    recordKernels(names, () => kiln.llm.pagedAttention(q.to('webgpu'), kcOk, vc, tab, lens, 0.125)).to('cpu');
    assert.ok(names.length > 0 && names.every((n) => !n.includes('paged.lanes')), names.join(', '));
  } finally {
    setOption('KILN_WEBGPU_PAGED_LANES', undefined);
  }
});
