/**
 * The cuda llm.pagedAttention kernels (kernels/cuda/codegen/paged-attention.ts (v2),
 * paged-attention-v3.ts (v3), and the v1 baseline; KILN_CUDA_PAGED_ATTN selects) against a float64
 * loop over the same dtype-rounded inputs:
 *   - batch 1 with Qwen3-0.6B's heads (16 query heads over 8 kv heads, head dim 128, blocks of 16)
 *     and a wide table (64 splits): contexts from 1 to 4100 tokens, crossing block (16), chunk
 *     (32 bf16/f16, 16 f32 tokens) and split boundaries (one chunk per split up to 2048 tokens,
 *     several beyond), in float32, float16 and bfloat16 (float64 at a few);
 *   - GQA ratios 1, 4, 8 and 16, head dims 64, 80, 256 and 7, blocks of 1, 5 and 16;
 *   - batches 8 and 64 with ragged lengths (0, 1, block and chunk edges), int64 tables and lengths;
 *   - table entries past a row's length that are not block ids (the kernel must not read them);
 *   - the same step captured in a CUDA graph and replayed with other lengths (lengths are device
 *     values; the split counters must come back to zero after every launch). The tables cover the
 *     longest length each row is replayed with: an entry inside a row's length that is not a block
 *     id is an error the kernels must report (the H200 run of the first version of this test
 *     replayed length 2049 over a row built for 40 tokens and got `index 209 ... of size 162`,
 *     rightly), which the last test checks on purpose.
 *   - v3's plans (issue #17): batches 1, 7 and 64, contexts 1, 15, 16, 17, 128..384 mixed and
 *     1000+, GQA 2 and 1, bfloat16 / float16 / float32, with its own split rule and with the split
 *     count pinned (KILN_CUDA_PAGED_SPLITS 1, 2, 3: one split walking many chunks through the
 *     load pipeline, and folds of 2 and 3 partials).
 * Skips without a CUDA device.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { llm } from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import type { DType } from '../src/tensor/dtype.js';
import { makeTensor, randomInts, randomValues } from './helpers/make.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
type T = kiln.Tensor;

interface Case {
  B: number;
  Hkv: number;
  G: number;
  D: number;
  BS: number;
  /** Table width (blocks per row): the capacity sets the split count, never the lengths. */
  M: number;
  lens: number[];
  tableDtype?: 'int32' | 'int64';
  lenDtype?: 'int32' | 'int64';
}

interface Inputs {
  q: T;
  kc: T;
  vc: T;
  tables: T;
  lens: T;
  want: number[];
}

/**
 * Random inputs for `c` in `dtype` on cuda and the float64 result over the stored values.
 * Each row's blocks are distinct and shuffled; table entries past its length are -3 or past
 * the cache (never block ids).
 */
function inputs(c: Case, dtype: DType, seed: number, scale: number): Inputs {
  const { B, Hkv, G, D, BS, M } = c;
  const H = Hkv * G;
  const used = c.lens.map((l) => Math.ceil(l / BS));
  const NB = used.reduce((a, u) => a + u, 0) + 2;
  const order = randomInts(NB, seed, 0, 1 << 30)
    .map((r, i) => [r, i] as const)
    .sort((x, y) => x[0] - y[0])
    .map(([, i]) => i);
  const tables: number[] = [];
  let next = 0;
  for (let b = 0; b < B; b++) for (let j = 0; j < M; j++) tables.push(j < used[b]! ? order[next++]! : j % 2 ? -3 : NB + 5 + j);
  const q = makeTensor(randomValues(B * H * D, seed + 1, -1, 1), [B, H, D], dtype);
  const kc = makeTensor(randomValues(NB * BS * Hkv * D, seed + 2, -1, 1), [NB, BS, Hkv, D], dtype);
  const vc = makeTensor(randomValues(NB * BS * Hkv * D, seed + 3, -1, 1), [NB, BS, Hkv, D], dtype);
  const qf = q.toFlatArray();
  const kf = kc.toFlatArray();
  const vf = vc.toFlatArray();
  const want = reference(qf, kf, vf, tables, c.lens, c, scale);
  return {
    q: q.to('cuda'),
    kc: kc.to('cuda'),
    vc: vc.to('cuda'),
    tables: makeTensor(tables, [B, M], c.tableDtype ?? 'int32').to('cuda'),
    lens: makeTensor(c.lens, [B], c.lenDtype ?? 'int32').to('cuda'),
    want,
  };
}

function reference(q: ArrayLike<number>, k: ArrayLike<number>, v: ArrayLike<number>, tables: number[], lens: number[], c: Case, scale: number): number[] {
  const { B, Hkv, G, D, BS, M } = c;
  const H = Hkv * G;
  const out: number[] = [];
  for (let b = 0; b < B; b++) {
    const rows: number[] = [];
    for (let t = 0; t < lens[b]!; t++) rows.push(tables[b * M + Math.floor(t / BS)]! * BS + (t % BS));
    for (let h = 0; h < H; h++) {
      const kh = Math.floor(h / G);
      const s = rows.map((row) => {
        let dot = 0;
        for (let d = 0; d < D; d++) dot += q[(b * H + h) * D + d]! * k[(row * Hkv + kh) * D + d]!;
        return dot * scale;
      });
      let mx = -Infinity;
      for (const x of s) mx = Math.max(mx, x);
      const w = s.map((x) => Math.exp(x - mx));
      const z = w.reduce((a, x) => a + x, 0);
      for (let d = 0; d < D; d++) {
        let o = 0;
        for (let t = 0; t < w.length; t++) o += w[t]! * v[(rows[t]! * Hkv + kh) * D + d]!;
        out.push(w.length ? o / z : 0);
      }
    }
  }
  return out;
}

/** The rounding of the output to the dtype plus fp32 accumulation (float64: double, but v1 takes the scale as a float). */
function tolerance(dtype: DType): { atol: number; rtol: number } {
  return dtype === 'bfloat16' ? { atol: 4e-3, rtol: 8e-3 } : dtype === 'float16' ? { atol: 5e-4, rtol: 1e-3 } : dtype === 'float32' ? { atol: 4e-6, rtol: 4e-6 } : { atol: 1e-7, rtol: 1e-7 };
}

function check(label: string, got: T, want: number[], dtype: DType): void {
  assert.equal(got.dtype, dtype, `${label}: dtype`);
  const g = got.toFlatArray();
  assert.equal(g.length, want.length, `${label}: size`);
  const { atol, rtol } = tolerance(dtype);
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(g[i]! - want[i]!);
    if (!(err <= atol + rtol * Math.abs(want[i]!))) assert.fail(`${label}: element ${i}: cuda ${g[i]}, float64 ${want[i]} (atol ${atol}, rtol ${rtol})`);
  }
}

type Kernel = 'v1' | 'v2' | 'v3';
/** v3 alone with each pinned split count (0: its own rule). */
type Pinned = { kernels: Kernel[]; splits: number[] };

/**
 * The kernels (v2, v1, v3 unless `only` says), each called twice, on inputs made for `c` and, for
 * each entry of `lensList` (default: c.lens alone), with those lengths (at most c.lens: the
 * tables cover c.lens).
 */
function run(c: Case, dtype: DType, seed: number, label: string, lensList: number[][] = [c.lens], only?: Pinned): void {
  const scale = 1 / Math.sqrt(c.D);
  const x = inputs(c, dtype, seed, scale);
  const qf = x.q.to('cpu').toFlatArray();
  const kf = x.kc.to('cpu').toFlatArray();
  const vf = x.vc.to('cpu').toFlatArray();
  const tables = x.tables.to('cpu').toFlatArray().map(Number);
  try {
    for (const lens of lensList) {
      const want = lens === c.lens ? x.want : reference(qf, kf, vf, tables, lens, c, scale);
      const lt = makeTensor(lens, [c.B], c.lenDtype ?? 'int32').to('cuda');
      for (const kernel of only?.kernels ?? (['v2', 'v1', 'v3'] as const)) {
        setOption('KILN_CUDA_PAGED_ATTN', kernel);
        for (const splits of only?.splits ?? [0]) {
          setOption('KILN_CUDA_PAGED_SPLITS', splits);
          // Twice: the second launch finds the split counters the first left (back at zero).
          for (let rep = 0; rep < 2; rep++) {
            const out = llm.pagedAttention(x.q, x.kc, x.vc, x.tables, lt, scale);
            check(`${label} lengths [${lens.length > 8 ? `${lens.slice(0, 8).join(', ')}, ...` : lens.join(', ')}] ${dtype} (${kernel}${splits ? `, ${splits} splits` : ''}, call ${rep + 1})`, out, want, dtype);
            out.dispose();
          }
        }
      }
      lt.dispose();
    }
  } finally {
    setOption('KILN_CUDA_PAGED_ATTN', undefined);
    setOption('KILN_CUDA_PAGED_SPLITS', undefined);
    for (const t of [x.q, x.kc, x.vc, x.tables, x.lens]) t.dispose();
  }
}

const QWEN = { Hkv: 8, G: 2, D: 128, BS: 16 };
const CONTEXTS = [1, 15, 16, 17, 31, 32, 33, 129, 257, 384, 1000, 2048, 2049, 4100];

test('pagedAttention on cuda, batch 1, Qwen3-0.6B heads: contexts 1-4100 across block, chunk and split boundaries (f32, f16, bf16)', { skip }, () => {
  // One cache per dtype, made for the longest context; each context is a length over its table.
  const lensList = CONTEXTS.map((len) => [len]);
  (['float32', 'float16', 'bfloat16'] as const).forEach((dtype, i) => run({ B: 1, ...QWEN, M: 512, lens: [Math.max(...CONTEXTS)] }, dtype, 10 + i, 'b1', lensList));
  run({ B: 1, ...QWEN, M: 64, lens: [700] }, 'float64', 40, 'b1', [[33], [700]]);
});

test('pagedAttention on cuda: GQA ratios 1, 4, 8, 16; head dims 64, 80, 256, 7; blocks of 1 and 5', { skip }, () => {
  const shapes: [string, Omit<Case, 'B' | 'M' | 'lens'>][] = [
    ['G1 D128', { Hkv: 4, G: 1, D: 128, BS: 16 }],
    ['G4 D128', { Hkv: 2, G: 4, D: 128, BS: 16 }],
    ['G8 D128', { Hkv: 1, G: 8, D: 128, BS: 16 }],
    ['G16 D128', { Hkv: 2, G: 16, D: 128, BS: 16 }],
    ['G2 D64', { Hkv: 4, G: 2, D: 64, BS: 16 }],
    ['G3 D80 BS5', { Hkv: 2, G: 3, D: 80, BS: 5 }],
    ['G2 D256', { Hkv: 2, G: 2, D: 256, BS: 16 }],
    ['G2 D7 BS1', { Hkv: 2, G: 2, D: 7, BS: 1 }],
  ];
  shapes.forEach(([name, s], i) => {
    for (const dtype of ['float32', 'bfloat16'] as const) run({ B: 2, ...s, M: Math.ceil(600 / s.BS), lens: [599, 45] }, dtype, 100 + i, name);
  });
  run({ B: 2, Hkv: 2, G: 8, D: 64, BS: 16, M: 40, lens: [300, 17] }, 'float16', 120, 'G8 D64');
});

test('pagedAttention on cuda: batches 8 and 64 with ragged lengths (0, 1, block and chunk edges), int64 tables and lengths', { skip }, () => {
  const ragged8 = [0, 1, 16, 31, 33, 128, 257, 512];
  run({ B: 8, ...QWEN, M: 40, lens: ragged8 }, 'bfloat16', 200, 'b8');
  run({ B: 8, ...QWEN, M: 40, lens: ragged8, tableDtype: 'int64', lenDtype: 'int64' }, 'float32', 201, 'b8 int64');
  const lens64 = randomInts(64, 202, 0, 300);
  lens64[0] = 0;
  lens64[1] = 300;
  run({ B: 64, ...QWEN, M: 20, lens: lens64 }, 'bfloat16', 203, 'b64');
  run({ B: 64, ...QWEN, M: 20, lens: lens64 }, 'float16', 204, 'b64');
});

test('pagedAttention v3 on cuda: batches 1, 7, 64; contexts 1, 15, 16, 17, 128..384 mixed, 1000+; GQA 2 and 1; its split rule and pinned splits 1, 2, 3', { skip }, () => {
  const v3: Pinned = { kernels: ['v3'], splits: [0, 1, 2, 3] };
  const mixed = (n: number, seed: number): number[] => randomInts(n, seed, 128, 385);
  const edges = [1, 15, 16, 17, 1000, 1100, 384];
  let seed = 400;
  for (const G of [2, 1]) {
    const heads = { Hkv: 8, G, D: 128, BS: 16 };
    for (const dtype of ['bfloat16', 'float16', 'float32'] as const) {
      // Batch 1: each context over one table (64 splits by the rule; 1-3 pinned walk many chunks).
      run({ B: 1, ...heads, M: 80, lens: [1100] }, dtype, seed++, `v3 b1 G${G}`, [[1], [15], [16], [17], [128], [257], [384], [1000], [1100]], v3);
      // Batch 7: block edges, mixed and long contexts in one launch (the tables cover both lists).
      const mix7 = mixed(7, seed);
      run({ B: 7, ...heads, M: 80, lens: edges.map((e, i) => Math.max(e, mix7[i]!)) }, dtype, seed++, `v3 b7 G${G}`, [edges, mix7], v3);
      // Batch 64: the issue's decode shape, contexts 128..384 mixed (one split by the rule on an H200).
      const lens64 = mixed(64, seed++);
      lens64[0] = 384;
      lens64[1] = 128;
      run({ B: 64, ...heads, M: 24, lens: lens64 }, dtype, seed++, `v3 b64 G${G}`, [lens64], v3);
    }
  }
});

test('pagedAttention on cuda in a CUDA graph: replays with other lengths (device values) give each length its own result', { skip }, () => {
  // c.lens: each row's longest replayed length (the tables are built for them; see the header).
  const replays = [[2500, 40], [1, 33], [0, 1], [2048, 2049], [129, 17], [2500, 40]];
  const c: Case = { B: 2, ...QWEN, M: 160, lens: [0, 1].map((b) => Math.max(...replays.map((l) => l[b]!))) };
  const scale = 1 / Math.sqrt(c.D);
  const x = inputs(c, 'bfloat16', 300, scale);
  const qf = x.q.to('cpu').toFlatArray();
  const kf = x.kc.to('cpu').toFlatArray();
  const vf = x.vc.to('cpu').toFlatArray();
  const tables = x.tables.to('cpu').toFlatArray().map(Number);
  try {
    for (const kernel of ['v1', 'v3'] as const) {
      setOption('KILN_CUDA_PAGED_ATTN', kernel);
      const f = kiln.compile((q: T, kc: T, vc: T, t: T, l: T) => llm.pagedAttention(q, kc, vc, t, l, scale).mul(2), { mode: 'reduce-overhead' });
      for (const lens of replays) {
        x.lens.copy_(makeTensor(lens, [2], 'int32').to('cuda'));
        const out = f(x.q, x.kc, x.vc, x.tables, x.lens) as T;
        const want = reference(qf, kf, vf, tables, lens, c, scale).map((v) => 2 * v);
        // Doubling is exact in bfloat16: the tolerance of the kernel's own result, doubled.
        const { atol, rtol } = tolerance('bfloat16');
        const g = out.toFlatArray();
        for (let i = 0; i < want.length; i++) {
          const err = Math.abs(g[i]! - want[i]!);
          if (!(err <= 2 * atol + rtol * Math.abs(want[i]!))) assert.fail(`${kernel} lengths [${lens}]: element ${i}: ${g[i]} vs float64 ${want[i]}`);
        }
      }
      const prog = f.programs().inference[0];
      assert.ok(prog instanceof CudaGraphProgram, `${kernel}: compiled to a cuda graph program`);
      assert.ok(prog.stats.replays >= 4, `${kernel}: the graph replayed (${prog.stats.replays} replays, ${prog.stats.captures} captures)`);
    }
  } finally {
    setOption('KILN_CUDA_PAGED_ATTN', undefined);
    for (const t of [x.q, x.kc, x.vc, x.tables, x.lens]) t.dispose();
  }
});

test('pagedAttention on cuda: a length that reaches a table entry which is not a block id is reported (device-side check), and the next call is clean', { skip }, () => {
  // Row 1's table is built for 40 tokens (3 blocks); its entries past them are -3 or 162 + 5 + j.
  const c: Case = { B: 2, ...QWEN, M: 160, lens: [2500, 40] };
  const scale = 1 / Math.sqrt(c.D);
  const x = inputs(c, 'bfloat16', 301, scale);
  const garbage = x.tables.to('cpu').toFlatArray().slice(c.M + 3).map(Number);
  try {
    for (const kernel of ['v2', 'v1', 'v3'] as const) {
      setOption('KILN_CUDA_PAGED_ATTN', kernel);
      // 2049 tokens in row 1: entries 3..128 are inside the length. Which one is reported first
      // depends on block order; the message must name the op, one of those values and the cache's
      // block count.
      const bad = makeTensor([2048, 2049], [2], 'int32').to('cuda');
      assert.throws(
        () => llm.pagedAttention(x.q, x.kc, x.vc, x.tables, bad, scale).toFlatArray(),
        (e: unknown) => {
          const m = /pagedAttention: index (-?\d+) is out of range for the cache's blocks \(a blockTables entry\) of size 162/.exec(String((e as Error).message));
          assert.ok(m, `${kernel}: message ${String((e as Error).message)}`);
          assert.ok(garbage.includes(Number(m[1])), `${kernel}: reported ${m[1]}, not one of row 1's entries past its blocks`);
          return true;
        },
      );
      bad.dispose();
      // The lengths the tables were built for: no report, float64 numbers.
      const out = llm.pagedAttention(x.q, x.kc, x.vc, x.tables, x.lens, scale);
      check(`after the report (${kernel})`, out, x.want, 'bfloat16');
      out.dispose();
    }
  } finally {
    setOption('KILN_CUDA_PAGED_ATTN', undefined);
    for (const t of [x.q, x.kc, x.vc, x.tables, x.lens]) t.dispose();
  }
});
