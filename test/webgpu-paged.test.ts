/**
 * Values of the webgpu llm.pagedAttention (the split-over-keys decode kernel of
 * paged-attention-source.ts) against a float64 reference written here from the rounded inputs, and
 * the CPU kernel against the same reference: float32, float16 and bfloat16; many context lengths
 * (1, ends mid-block, whole blocks, past a 64-key block and a split, zero) for several sequences of
 * different lengths in one batch; grouped-query heads (group sizes 1, 3, 4), head dims 32 and 80
 * (value dims past one 64-wide pass), 36 (16-bit keys read one element at a time, not as 16-byte
 * words); one split (many work items) and several (few items: each
 * sequence's keys spread over them by its length);
 * int32 and int64 block tables; shuffled block ids. Needs a real adapter (SwiftShader in CI);
 * webgpu-validate-attention.test.ts compiles every variant on Dawn's null backend.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { pagedPlan } from '../src/kernels/webgpu/llm-paged.js';
import { setOption } from '../src/runtime/config.js';
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
  readonly blockSize: number;
  readonly maxBlocks: number;
  readonly index: 'int32' | 'int64';
}

/** Deterministic shuffled block ids: sequence b owns maxBlocks distinct blocks. */
function blockTable(b: number, maxBlocks: number, seed: number): number[][] {
  const n = b * maxBlocks;
  const ids = Array.from({ length: n }, (_, i) => i);
  let s = seed;
  for (let i = n - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const j = s % (i + 1);
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  return Array.from({ length: b }, (_, r) => ids.slice(r * maxBlocks, (r + 1) * maxBlocks));
}

/** out[b, h] in float64 from the (rounded) inputs' values. */
function reference(c: Case, q: number[], kc: number[], vc: number[], table: number[][], scale: number): Float64Array {
  const { heads: H, kvHeads: hkv, d: D, blockSize: bs } = c;
  const B = c.lens.length;
  const out = new Float64Array(B * H * D);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / (H / hkv));
      const len = c.lens[b]!;
      const s = new Float64Array(len);
      let mx = -Infinity;
      const row = (t: number): number => ((table[b]![Math.floor(t / bs)]! * bs + (t % bs)) * hkv + kvh) * D;
      for (let t = 0; t < len; t++) {
        let acc = 0;
        for (let e = 0; e < D; e++) acc += q[(b * H + h) * D + e]! * kc[row(t) + e]!;
        s[t] = acc * scale;
        mx = Math.max(mx, s[t]!);
      }
      let l = 0;
      for (let t = 0; t < len; t++) l += Math.exp(s[t]! - mx);
      for (let e = 0; e < D; e++) {
        let a = 0;
        for (let t = 0; t < len; t++) a += Math.exp(s[t]! - mx) * vc[row(t) + e]!;
        out[(b * H + h) * D + e] = len === 0 ? 0 : a / l;
      }
    }
  }
  return out;
}

function tolerance(dtype: DType): number {
  return dtype === 'float32' ? 2e-5 : dtype === 'float16' ? 2e-3 : 1e-2;
}

function check(c: Case, seed: number): string[] {
  const B = c.lens.length;
  const numBlocks = B * c.maxBlocks;
  kiln.manualSeed(seed);
  const q = kiln.randn([B, c.heads, c.d]).to(c.dtype);
  const kc = kiln.randn([numBlocks, c.blockSize, c.kvHeads, c.d]).to(c.dtype);
  const vc = kiln.randn([numBlocks, c.blockSize, c.kvHeads, c.d]).to(c.dtype);
  const table = blockTable(B, c.maxBlocks, seed);
  const scale = 1 / Math.sqrt(c.d);
  const vals = (t: Tensor): number[] => t.to('float64').toFlatArray() as number[];
  const want = reference(c, vals(q), vals(kc), vals(vc), table, scale);
  const tab = kiln.tensor(table, { dtype: c.index });
  const lens = kiln.tensor([...c.lens], { dtype: c.index });
  const label = `${c.dtype} lens [${c.lens.join(', ')}] H ${c.heads}/${c.kvHeads} D ${c.d} capacity ${c.maxBlocks * c.blockSize} ${c.index}`;
  const failures: string[] = [];
  const tol = tolerance(c.dtype);
  for (const device of ['webgpu', 'cpu'] as const) {
    const got = kiln.llm.pagedAttention(q.to(device), kc.to(device), vc.to(device), tab.to(device), lens.to(device), scale);
    assert.deepEqual([...got.shape], [B, c.heads, c.d]);
    assert.equal(got.dtype, c.dtype);
    const g = vals(got.to('cpu'));
    let worst = 0;
    let at = -1;
    for (let i = 0; i < want.length; i++) {
      const err = Math.abs(g[i]! - want[i]!) / (tol + tol * Math.abs(want[i]!));
      if (!(err <= worst)) {
        worst = err;
        at = i;
      }
    }
    if (!(worst <= 1)) failures.push(`${device} ${label}: element ${at} got ${g[at]}, want ${want[at]}`);
  }
  return failures;
}

test('the paged plan splits while the work items leave the device idle, at most one split per 64-key block', () => {
  assert.deepEqual(pagedPlan(2, 256), { splits: 4, splitLen: 64 });
  assert.deepEqual(pagedPlan(2, 640), { splits: 10, splitLen: 64 });
  assert.deepEqual(pagedPlan(4, 1024), { splits: 16, splitLen: 64 });
  assert.deepEqual(pagedPlan(8, 40960), { splits: 32, splitLen: 1280 });
  assert.deepEqual(pagedPlan(256, 4096), { splits: 1, splitLen: 4096 });
  assert.deepEqual(pagedPlan(1000, 4096), { splits: 1, splitLen: 4096 });
  assert.deepEqual(pagedPlan(8, 40), { splits: 1, splitLen: 64 });
});

test('webgpu llm.pagedAttention matches a float64 reference (splits, GQA, mid-block lengths), with the vector value pass off and on', { skip }, () => {
  const failures: string[] = [];
  // KILN_WEBGPU_PAGED_VECV: the per-dim value pass (the default until an H200 A/B) and the vector one.
  for (const vecV of [false, true]) {
    setOption('KILN_WEBGPU_PAGED_VECV', vecV);
    try {
      failures.push(...pagedCases().map((f) => `vecV ${vecV}: ${f}`));
    } finally {
      setOption('KILN_WEBGPU_PAGED_VECV', undefined);
    }
  }
  assert.deepEqual(failures, [], failures.join('\n'));
});

function pagedCases(): string[] {
  const failures: string[] = [];
  let seed = 7;
  for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
    // Four splits (capacity 256): lengths inside a block, at and past block ends, zero.
    failures.push(...check({ dtype, lens: [1, 15, 16, 17, 0, 256], heads: 8, kvHeads: 2, d: 32, blockSize: 16, maxBlocks: 16, index: 'int32' }, seed++));
    // Ten splits (capacity 640): lengths around the 64-key block boundaries; the longest rows
    // take two blocks per split, the shortest leave most splits empty.
    failures.push(...check({ dtype, lens: [63, 65, 319, 321, 640], heads: 6, kvHeads: 2, d: 80, blockSize: 16, maxBlocks: 40, index: 'int64' }, seed++));
    // Sixteen splits (capacity 1024), multi-head (group 1) and one long, one short sequence.
    failures.push(...check({ dtype, lens: [1000, 3], heads: 2, kvHeads: 2, d: 32, blockSize: 32, maxBlocks: 32, index: 'int32' }, seed++));
  }
  // One split (256 work items: 16 sequences x 16 kv heads): the kernel that writes the output itself.
  failures.push(...check({ dtype: 'float16', lens: [1, 15, 16, 17, 0, 256, 63, 64, 65, 100, 128, 129, 200, 255, 2, 190], heads: 16, kvHeads: 16, d: 32, blockSize: 16, maxBlocks: 16, index: 'int32' }, seed++));
  // Head dim 36: 16-bit key rows are not whole 16-byte words (scalar key loads); float32 rows are (4 per word).
  for (const dtype of ['float16', 'float32'] as const) failures.push(...check({ dtype, lens: [5, 70, 129], heads: 4, kvHeads: 2, d: 36, blockSize: 16, maxBlocks: 12, index: 'int32' }, seed++));
  // Group 4 over splits, head dim 80, lengths ending mid-block everywhere.
  failures.push(...check({ dtype: 'float32', lens: [257, 511, 700, 1023], heads: 8, kvHeads: 2, d: 80, blockSize: 16, maxBlocks: 64, index: 'int64' }, seed++));
  // Qwen3-0.6B's shape (16 query heads over 8 kv heads of 128, group 2): the vector value pass
  // (4 key groups x 16 lanes of 8 dims for 16-bit, 2 x 32 of 4 for float32) over 8 splits.
  for (const dtype of ['float16', 'bfloat16', 'float32'] as const) failures.push(...check({ dtype, lens: [300, 1, 64, 129], heads: 16, kvHeads: 8, d: 128, blockSize: 16, maxBlocks: 32, index: 'int32' }, seed++));
  return failures;
}

test('webgpu llm.pagedAttention with unrolled loads (KILN_WEBGPU_PAGED_UNROLL) equals one load per step, bit for bit', { skip }, () => {
  // Same products accumulated in the same order: the outputs must not differ in a bit. Head dims
  // 128 (16 key words: 8 per step), 80 (10: 2 per step), 32 (4: 4 per step), 36 float32 (9: one);
  // lengths leaving a partial last block (the scalar value pass's one-key tail) and several splits
  // (the combine's 4-split steps and its one-split tail: 16 splits used by length 1000, 5 by 300).
  const shapes = [
    { dtype: 'float16', lens: [300, 1, 64, 129], heads: 16, kvHeads: 8, d: 128, maxBlocks: 32 },
    { dtype: 'bfloat16', lens: [63, 65, 319], heads: 6, kvHeads: 2, d: 80, maxBlocks: 40 },
    { dtype: 'float32', lens: [1000, 3], heads: 2, kvHeads: 2, d: 32, maxBlocks: 64 },
    { dtype: 'float32', lens: [5, 70, 129], heads: 4, kvHeads: 2, d: 36, maxBlocks: 12 },
  ] as const;
  let seed = 40;
  for (const s of shapes) {
    kiln.manualSeed(seed++);
    const B = s.lens.length;
    const numBlocks = B * s.maxBlocks;
    const q = kiln.randn([B, s.heads, s.d]).to(s.dtype).to('webgpu');
    const kc = kiln.randn([numBlocks, 16, s.kvHeads, s.d]).to(s.dtype).to('webgpu');
    const vc = kiln.randn([numBlocks, 16, s.kvHeads, s.d]).to(s.dtype).to('webgpu');
    const tab = kiln.tensor(blockTable(B, s.maxBlocks, seed), { dtype: 'int32' }).to('webgpu');
    const lens = kiln.tensor([...s.lens], { dtype: 'int32' }).to('webgpu');
    for (const vecV of [false, true]) {
      const run = (unroll: boolean): number[] => {
        setOption('KILN_WEBGPU_PAGED_VECV', vecV);
        setOption('KILN_WEBGPU_PAGED_UNROLL', unroll);
        try {
          return kiln.llm.pagedAttention(q, kc, vc, tab, lens, 1 / Math.sqrt(s.d)).to('float32').toFlatArray() as number[];
        } finally {
          setOption('KILN_WEBGPU_PAGED_VECV', undefined);
          setOption('KILN_WEBGPU_PAGED_UNROLL', undefined);
        }
      };
      const a = run(true);
      const b = run(false);
      const at = a.findIndex((v, i) => !Object.is(v, b[i]));
      assert.equal(at, -1, `${s.dtype} D ${s.d} lens [${s.lens.join(', ')}] vecV ${vecV}: element ${at} is ${a[at]} unrolled, ${b[at]} not`);
    }
  }
});
