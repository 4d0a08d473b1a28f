/**
 * llm.qkNormRotaryPagedAttention on webgpu (KILN_WEBGPU_QK_ATTN, issue #20): the fused
 * paged-attention workgroup normalising and rotating its query heads and its kv head's new key
 * row, writing the key and value rows into the cache slot, then attending, in one dispatch, against
 * a float64 reference (the q/k norm + rotary with the dtype's roundings, the cache write, then
 * attention over the written cache) and against the two-dispatch path it replaces
 * (llm.qkNormRotaryCache then llm.pagedAttention): caches equal bit for bit, outputs too (same
 * arithmetic, same roundings). float16 and float32; q, k and v column slices of one qkv output;
 * Qwen3-0.6B's heads (16 over 8, head dim 128) at batch 1 with contexts 1, 63, 64, 65, 200 and at
 * batch 2 with a padding slot (-1: no cache write), and a group of 4 (8 over 2, head dim 64), a
 * padding slot at batch 1, each in the lanes attention form (the default) and the fused one
 * (KILN_WEBGPU_PAGED_LANES=0). Each run checks the kernels that ran: one `paged.lanes.qk` or `paged.fused.qk` dispatch
 * against two at batch 1; at batch 2 the two ops (a row may read a slot another row writes). Then a compiled
 * tiny Qwen3 decode step with the option against the step without: the fused op in the program,
 * logits and caches equal, one dispatch a layer fewer. Needs an adapter that computes (SwiftShader).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DeviceBuffer } from '../src/runtime/accelerator.js';
import type { WebgpuAccelerator, WebgpuKernel } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, rand } from './helpers/make.js';
import { refNormRotary } from './helpers/qk-norm-rotary-ref.js';
import { toF16, hostF64 } from './helpers/rounding-ref.js';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { withEnv } from './helpers/env.js';
import { DECODE_COMPILE_OPTIONS, maxAbsDiff } from './helpers/decode-pair.js';
import { tinyQwen3Config } from '../src/bench/workloads.js';

const skip = webgpuSkipReason();
const BS = 16;
const EPS = 1e-6;

interface Case {
  readonly dtype: DType;
  readonly heads: number;
  readonly kvHeads: number;
  readonly d: number;
  readonly maxBlocks: number;
  /** Context per sequence, the new token included (its position lens[b] - 1). */
  readonly lens: readonly number[];
  /** Sequences whose slot is -1 (padding: nothing written). */
  readonly pad?: readonly number[];
}

/** Sequence b's block i: blocks reversed within the row, so the table matters. */
const tableEntry = (c: Case, b: number, i: number): number => b * c.maxBlocks + (c.maxBlocks - 1 - i);

/** Attention in float64 over the cache values `kc` / `vc` (flat [NB, BS, hkv, D]). */
function attention(c: Case, q: readonly number[], kc: readonly number[], vc: readonly number[], scale: number): number[] {
  const { heads: H, kvHeads: hkv, d: D } = c;
  const out: number[] = [];
  c.lens.forEach((len, b) => {
    const row = (t: number, kvh: number): number => ((tableEntry(c, b, Math.floor(t / BS)) * BS + (t % BS)) * hkv + kvh) * D;
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / (H / hkv));
      const s = Array.from({ length: len }, (_, t) => {
        let a = 0;
        for (let e = 0; e < D; e++) a += q[(b * H + h) * D + e]! * kc[row(t, kvh) + e]!;
        return a * scale;
      });
      const mx = Math.max(...s);
      const p = s.map((v) => Math.exp(v - mx));
      const l = p.reduce((x, y) => x + y, 0);
      for (let e = 0; e < D; e++) {
        let a = 0;
        for (let t = 0; t < len; t++) a += p[t]! * vc[row(t, kvh) + e]!;
        out.push(a / l);
      }
    }
  });
  return out;
}

interface Run {
  readonly out: number[];
  readonly kc: number[];
  readonly vc: number[];
  readonly kernels: string[];
}

/** Runs `fn` recording the kernels dispatched. */
function recording<T>(fn: () => T): { value: T; kernels: string[] } {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const kernels: string[] = [];
  const orig = acc.dispatch.bind(acc);
  acc.dispatch = (k: WebgpuKernel, bufs: readonly DeviceBuffer[], meta: Uint32Array, groups: readonly [number, number, number]): void => {
    kernels.push(k.name);
    orig(k, bufs, meta, groups);
  };
  try {
    return { value: fn(), kernels };
  } finally {
    acc.dispatch = orig;
  }
}

function relErr(got: readonly number[], want: readonly number[], tol: number): { worst: number; at: number } {
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

/** Failures of one case; `lanes`: the lanes attention form (KILN_WEBGPU_PAGED_LANES default), else the fused one; `lanesHg`: KILN_WEBGPU_PAGED_LANES_HG. */
function check(c: Case, seed: number, lanes: boolean, lanesHg?: string): string[] {
  const { dtype, heads: H, kvHeads: hkv, d: D } = c;
  const B = c.lens.length;
  const NB = B * c.maxBlocks;
  const label = `${dtype} B ${B} H ${H}/${hkv} D ${D} lens [${c.lens.join(', ')}] pad [${(c.pad ?? []).join(', ')}]${lanes ? ' lanes' : ''}`;
  const kernelName = lanes ? 'paged.lanes.qk' : 'paged.fused.qk';
  const qkv = rand([B, (H + 2 * hkv) * D], seed, 'contiguous', dtype).to('webgpu');
  const q = qkv.narrow(-1, 0, H * D).view([B, H, D]);
  const k = qkv.narrow(-1, H * D, hkv * D).view([B, hkv, D]);
  const v = qkv.narrow(-1, (H + hkv) * D, hkv * D).view([B, hkv, D]);
  const qw = rand([D], seed + 1, 'contiguous', dtype, 0.5, 1.5).to('webgpu');
  const kw = rand([D], seed + 2, 'contiguous', dtype, 0.5, 1.5).to('webgpu');
  const cos = rand([B, 1, D], seed + 3, 'contiguous', dtype, -1, 1).to('webgpu');
  const sin = rand([B, 1, D], seed + 4, 'contiguous', dtype, -1, 1).to('webgpu');
  const kc0 = rand([NB, BS, hkv, D], seed + 5, 'contiguous', dtype);
  const vc0 = rand([NB, BS, hkv, D], seed + 6, 'contiguous', dtype);
  const slotList = c.lens.map((len, b) => ((c.pad ?? []).includes(b) ? -1 : tableEntry(c, b, Math.floor((len - 1) / BS)) * BS + ((len - 1) % BS)));
  const slots = makeTensor(slotList, [B], 'int64').to('webgpu');
  const tables = makeTensor(Array.from({ length: B }, (_, b) => Array.from({ length: c.maxBlocks }, (_, i) => tableEntry(c, b, i))).flat(), [B, c.maxBlocks], 'int32').to('webgpu');
  const lens = makeTensor([...c.lens], [B], 'int32').to('webgpu');
  const scale = 1 / Math.sqrt(D);
  const run = (fused: boolean): Run => {
    const [kc, vc] = [kc0.to('webgpu'), vc0.to('webgpu')] as [Tensor, Tensor];
    const { value: out, kernels } = recording(() => withEnv('KILN_WEBGPU_PAGED_LANES_HG', lanesHg, () => withEnv('KILN_WEBGPU_PAGED_LANES', lanes ? undefined : '0', () => {
      if (fused) {
        const r = kiln.llm.qkNormRotaryPagedAttention(q, k, v, qw, kw, EPS, cos, sin, true, kc, vc, slots, tables, lens, scale);
        assert.equal(r.keyCache, kc, `${label}: the key cache is written in place`);
        return r.out;
      }
      const r = kiln.llm.qkNormRotaryCache(q, k, v, qw, kw, EPS, cos, sin, true, kc, vc, slots);
      return kiln.llm.pagedAttention(r.q, r.keyCache, r.valueCache, tables, lens, scale);
    })));
    return { out: hostF64(out), kc: hostF64(kc), vc: hostF64(vc), kernels };
  };
  const failures: string[] = [];
  const one = run(true);
  const two = run(false);
  // Batch 1: one dispatch. Several sequences: the two ops (a row may read a slot another row writes).
  if (B === 1 ? one.kernels.length !== 1 || !one.kernels[0]!.includes(kernelName) : one.kernels.length !== 2 || one.kernels.some((k) => k.includes('.qk.'))) failures.push(`${label}: fused kernels ${one.kernels.join(', ')}`);
  if (two.kernels.length !== 2) failures.push(`${label}: two-dispatch kernels ${two.kernels.join(', ')}`);
  // float64 reference: the rounded rotated rows, the cache write, attention over the written cache.
  const round = dtype === 'float16' ? toF16 : Math.fround;
  const qr = refNormRotary(q, qw, EPS, cos, sin, true, round).map(round);
  const kr = refNormRotary(k, kw, EPS, cos, sin, true, round).map(round);
  const vv = hostF64(v);
  const kc = hostF64(kc0);
  const vc = hostF64(vc0);
  const row = hkv * D;
  slotList.forEach((s, b) => {
    if (s < 0) return;
    for (let i = 0; i < row; i++) {
      kc[s * row + i] = kr[b * row + i]!;
      vc[s * row + i] = vv[b * row + i]!;
    }
  });
  const want = attention(c, qr, kc, vc, scale);
  const tol = dtype === 'float32' ? 2e-5 : 2e-3;
  const e = relErr(one.out, want, tol);
  if (!(e.worst <= 1)) failures.push(`${label}: out[${e.at}] ${one.out[e.at]} against float64 ${want[e.at]}`);
  const ek = relErr(one.kc, kc, dtype === 'float32' ? 2e-6 : 2 ** -9);
  if (!(ek.worst <= 1)) failures.push(`${label}: key cache [${ek.at}] ${one.kc[ek.at]} against float64 ${kc[ek.at]}`);
  if (one.vc.some((x, i) => x !== vc[i])) failures.push(`${label}: value cache differs from the float64 copy`);
  if (!(Math.max(...one.out.map(Math.abs)) > 1e-2)) failures.push(`${label}: an all-zero output`);
  // Against the two dispatches: the same bits.
  const diff = (a: readonly number[], b: readonly number[]): number => a.findIndex((x, i) => !Object.is(x, b[i]));
  for (const [name, a, b] of [['out', one.out, two.out], ['key cache', one.kc, two.kc], ['value cache', one.vc, two.vc]] as const) {
    const at = diff(a, b);
    if (at >= 0) failures.push(`${label}: ${name}[${at}] ${a[at]} against the two-dispatch path's ${b[at]}`);
  }
  return failures;
}

test('webgpu llm.qkNormRotaryPagedAttention (one dispatch) matches a float64 reference and the two-dispatch path bit for bit', { skip }, () => {
  const failures: string[] = [];
  let seed = 301;
  for (const lanes of [true, false]) {
    for (const dtype of ['float16', 'float32'] as const) {
      for (const lens of [[1], [63], [64], [65], [200]]) failures.push(...check({ dtype, heads: 16, kvHeads: 8, d: 128, maxBlocks: 16, lens }, seed++, lanes));
      failures.push(...check({ dtype, heads: 16, kvHeads: 8, d: 128, maxBlocks: 16, lens: [200, 1] }, seed++, lanes));
      failures.push(...check({ dtype, heads: 16, kvHeads: 8, d: 128, maxBlocks: 16, lens: [65, 30], pad: [1] }, seed++, lanes));
      // Group 4 (a head group of 4 query heads on one kv head), head dim 64.
      failures.push(...check({ dtype, heads: 8, kvHeads: 2, d: 64, maxBlocks: 16, lens: [1, 130] }, seed++, lanes));
      failures.push(...check({ dtype, heads: 8, kvHeads: 2, d: 64, maxBlocks: 16, lens: [63], pad: [0] }, seed++, lanes));
      failures.push(...check({ dtype, heads: 8, kvHeads: 2, d: 64, maxBlocks: 16, lens: [130] }, seed++, lanes));
      failures.push(...check({ dtype, heads: 16, kvHeads: 8, d: 128, maxBlocks: 16, lens: [65], pad: [0] }, seed++, lanes));
    }
  }
  // The default lanes runs above take one query head per workgroup (two or four workgroups per kv head write the
  // same key row: a benign race of equal bits); with KILN_WEBGPU_PAGED_LANES_HG=0 the plan's head groups.
  for (const dtype of ['float16', 'float32'] as const) {
    for (const lens of [[1], [200]]) failures.push(...check({ dtype, heads: 16, kvHeads: 8, d: 128, maxBlocks: 16, lens }, seed++, true, '0'));
    failures.push(...check({ dtype, heads: 8, kvHeads: 2, d: 64, maxBlocks: 16, lens: [130] }, seed++, true, '0'));
  }
  assert.deepEqual(failures, [], failures.join('\n'));
});

/** Cache blocks, tokens per block, block-table width: a capacity of 128 keys, so the attention plan has 2 splits (the fused form). */
const [NB2, BS2, M2] = [8, 16, 8];

/** A tiny 2-layer Qwen3 (4 q heads over 2 kv heads, head dim 64, as test/helpers/decode-pair.ts) and its decode step over caches `c`. */
function decodeModel(dtype: DType): { caches: () => { keys: Tensor[]; values: Tensor[] }; step: (c: { keys: Tensor[]; values: Tensor[] }) => (...a: Tensor[]) => Tensor } {
  const config = tinyQwen3Config().with({ numHiddenLayers: 2, hiddenSize: 128, numAttentionHeads: 4, numKeyValueHeads: 2, headDim: 64 });
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 3, dtype, device: 'webgpu' });
  model.eval();
  model.prepareDecode();
  const start = [0, 1].flatMap((l) => [rand([NB2, BS2, 2, 64], 10 + l, 'contiguous', dtype), rand([NB2, BS2, 2, 64], 20 + l, 'contiguous', dtype)]);
  return {
    caches: () => {
      const t = start.map((x) => x.to('webgpu'));
      return { keys: [t[0]!, t[2]!], values: [t[1]!, t[3]!] };
    },
    step: (c) => (ids, positions, slotMapping, blockTables, contextLens) => model.decodeStep({ inputIds: ids!, positions: positions!, slotMapping: slotMapping!, blockTables: blockTables!, contextLens: contextLens! }, c),
  };
}

/**
 * Step s: sequence 0 in blocks 1, 2 at position 19 + s, sequence 1 in blocks 3..7 at position 69 + s, a padding row (slot -1, length 0);
 * `rows` 1: sequence 1 alone.
 */
function stepArgs(s: number, rows: 1 | 3): Tensor[] {
  if (rows === 1) {
    return [
      makeTensor([9], [1], 'int64'),
      makeTensor([69 + s], [1], 'int64'),
      makeTensor([7 * BS2 + ((69 + s) % BS2)], [1], 'int64'),
      makeTensor([3, 4, 5, 6, 7, 0, 0, 0], [1, M2], 'int32'),
      makeTensor([70 + s], [1], 'int32'),
    ].map((x) => x.to('webgpu'));
  }
  return [
    makeTensor([5 + s, 9, 0], [3], 'int64'),
    makeTensor([19 + s, 69 + s, 0], [3], 'int64'),
    makeTensor([2 * BS2 + ((19 + s) % BS2), 7 * BS2 + ((69 + s) % BS2), -1], [3], 'int64'),
    makeTensor([1, 2, 0, 0, 0, 0, 0, 0, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [3, M2], 'int32'),
    makeTensor([20 + s, 70 + s, 0], [3], 'int32'),
  ].map((x) => x.to('webgpu'));
}

test('a compiled Qwen3 decode step on webgpu with KILN_WEBGPU_QK_ATTN=1: logits and caches equal the step without it bit for bit; at batch 1 the fused kernel runs, one dispatch a layer fewer', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  for (const [dtype, rows] of [['float32', 1], ['float16', 1], ['float32', 3]] as const) {
    const m = decodeModel(dtype);
    const caches = [m.caches(), m.caches()] as const;
    // The pass reads the option when the step is traced (its first call).
    const compiled = (c: { keys: Tensor[]; values: Tensor[] }, flag: string): ((...a: Tensor[]) => Tensor) => {
      const f = kiln.compile(m.step(c), DECODE_COMPILE_OPTIONS);
      let first = true;
      return (...a) => (first ? ((first = false), withEnv('KILN_WEBGPU_QK_ATTN', flag, () => f(...a))) : f(...a));
    };
    const on = compiled(caches[0], '1');
    const off = compiled(caches[1], '0');
    const dispatches: number[][] = [[], []];
    const kernels: string[][] = [];
    // Three steps, so the recording replays.
    for (let s = 0; s < 3; s++) {
      const args = stepArgs(s, rows);
      let d0 = acc.dispatchCount;
      const r = recording(() => kiln.noGrad(() => on(...args)));
      kernels.push(r.kernels);
      const a = r.value.to('cpu').to('float32').toFlatArray() as number[];
      dispatches[0]!.push(acc.dispatchCount - d0);
      d0 = acc.dispatchCount;
      const b = kiln.noGrad(() => off(...args)).to('cpu').to('float32').toFlatArray() as number[];
      dispatches[1]!.push(acc.dispatchCount - d0);
      assert.ok(maxAbsDiff(a, b) === 0 && Math.max(...b.map(Math.abs)) > 0, `${dtype} step ${s}: logits differ by up to ${maxAbsDiff(a, b)}`);
    }
    for (const kind of ['keys', 'values'] as const) {
      for (let l = 0; l < 2; l++) {
        const x = caches[0][kind][l]!.to('cpu').to('float32').toFlatArray() as number[];
        const y = caches[1][kind][l]!.to('cpu').to('float32').toFlatArray() as number[];
        assert.ok(maxAbsDiff(x, y) === 0, `${dtype} ${kind}[${l}]: differ by up to ${maxAbsDiff(x, y)}`);
      }
    }
    const fusedRan = kernels[2]!.filter((k) => k.includes('paged.fused.qk') || k.includes('paged.lanes.qk')).length;
    // One sequence: the fused kernel once a layer, a dispatch a layer fewer; three rows: the two ops.
    assert.equal(fusedRan, rows === 1 ? 2 : 0, `${dtype} rows ${rows}: fused kernels (${[...new Set(kernels.flat())].join(', ')})`);
    assert.equal(dispatches[1]![2]! - dispatches[0]![2]!, rows === 1 ? 2 : 0, `${dtype} rows ${rows}: dispatches per replayed step on ${dispatches[0]!.join(',')}, off ${dispatches[1]!.join(',')}`);
  }
});
