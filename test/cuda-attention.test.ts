/**
 * The fused cuda attention kernels (src/kernels/cuda/flash-run.ts) against a float64 reference
 * written here (naive loops: scores, max-subtracted softmax, weighted sum of values): causal and
 * full, bool and additive masks (with fully masked rows), grouped-query heads (16 query heads over 8
 * and 4 kv heads), T = 1, 17, 128, 513, head dims 64/128/80 (and 256, 40), float32/float16/bfloat16,
 * strided [B, T, H, D] views, a transposed operand (copied), the math fallback (odd head dim), the
 * backward through the op, kiln.compile on cuda (extern kernel, CUDA graph replay), and T = 4096
 * without a T x T allocation. Inputs are rounded to the dtype first and the reference reads the
 * rounded values, so the tolerances measure only the kernel's arithmetic:
 * - float32: atol/rtol 1e-4 (fp32 FMA and exp2 against float64);
 * - float16: atol 4e-3, rtol 4e-3 (P and the output rounded to fp16, 2^-11 relative each);
 * - bfloat16: atol 2e-2, rtol 2e-2 (P and the output rounded to bf16, 2^-8 relative each).
 * Skips where no CUDA device exists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { flashStats, setCudaAttentionPath, setFlashF32Rows, setFlashF32Tile, setFlashTcConfig } from '../src/kernels/cuda/flash-run.js';
import type { F32AsyncTile } from '../src/kernels/cuda/codegen/flash-f32-async.js';

/** cp.async float32 tiles forced in turn (the rule's picks and the sweep's). */
const F32_ASYNC_TILES: F32AsyncTile[] = [
  { rm: 1, tx: 16, bn: 64 },
  { rm: 1, tx: 8, bn: 64 },
  { rm: 2, tx: 8, bn: 32 },
  { rm: 4, tx: 8, bn: 32 },
  { rm: 2, tx: 16, bn: 32 },
  { rg: 4, rm: 4, tx: 16, bn: 64 },
  { rg: 8, rm: 2, tx: 16, bn: 64 },
  { rg: 8, rm: 2, tx: 8, bn: 32 },
  { rg: 4, rm: 4, tx: 16, bn: 32, ks: 2 },
  { rg: 8, rm: 2, tx: 16, bn: 32, ks: 2 },
];
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
const TOL: Record<string, { atol: number; rtol: number }> = {
  float32: { atol: 1e-4, rtol: 1e-4 },
  float16: { atol: 4e-3, rtol: 4e-3 },
  bfloat16: { atol: 2e-2, rtol: 2e-2 },
};

/** Standard normal values on the cpu, rounded to `dtype` (the reference reads the rounded values). */
function randn(shape: number[], seed: number, dtype: DType): Tensor {
  return kiln.randn(shape, { generator: new kiln.Generator(seed) }).to(dtype);
}

interface RefCase {
  q: number[];
  k: number[];
  v: number[];
  /** [B, H, L, S] logical mask values (bool as 0/1), already broadcast; or null. */
  mask: number[] | null;
  maskBool: boolean;
  b: number;
  h: number;
  hk: number;
  l: number;
  s: number;
  d: number;
  causal: boolean;
  scale: number;
  /** Reference rows to compute (all when omitted). */
  rows?: number[];
}

/** float64 SDPA over contiguous [B, H, L, D] / [B, Hk, S, D] arrays; out [B, H, L, D] (NaN rows where all keys are masked). */
function reference(c: RefCase): Float64Array {
  const out = new Float64Array(c.b * c.h * c.l * c.d).fill(Number.NaN);
  const rows = c.rows ?? Array.from({ length: c.l }, (_, i) => i);
  const sc = new Float64Array(c.s);
  for (let b = 0; b < c.b; b++) {
    for (let h = 0; h < c.h; h++) {
      const hk = Math.floor(h / (c.h / c.hk));
      const qb = (b * c.h + h) * c.l * c.d;
      const kb = (b * c.hk + hk) * c.s * c.d;
      for (const i of rows) {
        let mx = -Infinity;
        for (let j = 0; j < c.s; j++) {
          let x = 0;
          for (let t = 0; t < c.d; t++) x += c.q[qb + i * c.d + t]! * c.k[kb + j * c.d + t]!;
          x *= c.scale;
          if (c.causal && j > i) x = -Infinity;
          if (c.mask) {
            const m = c.mask[((b * c.h + h) * c.l + i) * c.s + j]!;
            if (c.maskBool) {
              if (m === 0) x = -Infinity;
            } else x += m;
          }
          sc[j] = x;
          mx = Math.max(mx, x);
        }
        if (mx === -Infinity) continue; // every key masked: NaN, as softmax of all -inf
        let den = 0;
        for (let j = 0; j < c.s; j++) den += sc[j] = Math.exp(sc[j]! - mx);
        for (let t = 0; t < c.d; t++) {
          let acc = 0;
          for (let j = 0; j < c.s; j++) acc += sc[j]! * c.v[kb + j * c.d + t]!;
          out[qb + i * c.d + t] = acc / den;
        }
      }
    }
  }
  return out;
}

function assertNear(label: string, got: number[], want: Float64Array, dtype: DType, rowsOnly?: { l: number; d: number; rows: number[] }): void {
  const { atol, rtol } = TOL[dtype]!;
  assert.equal(got.length, want.length, `${label}: element count`);
  const rowSet = rowsOnly ? new Set(rowsOnly.rows) : null;
  for (let i = 0; i < want.length; i++) {
    if (rowSet && !rowSet.has(Math.floor(i / rowsOnly!.d) % rowsOnly!.l)) continue;
    const w = want[i]!;
    const g = got[i]!;
    if (Number.isNaN(w)) {
      assert.ok(Number.isNaN(g), `${label}: element ${i}: expected NaN (every key masked), got ${g}`);
      continue;
    }
    if (!(Math.abs(g - w) <= atol + rtol * Math.abs(w))) assert.fail(`${label}: element ${i}: cuda ${g}, float64 reference ${w} (atol ${atol}, rtol ${rtol})`);
  }
}

interface RunOpts {
  b: number;
  h: number;
  hk: number;
  l: number;
  s?: number;
  d: number;
  dtype: DType;
  causal: boolean;
  mask?: 'bool' | 'add';
  scale?: number;
  /** Lay q/k/v out as [B, T, H, D] storage viewed as [B, H, T, D] (the usual projection layout). */
  btHd?: boolean;
  seed?: number;
  /** Expect the fused kernel (default) or the math fallback. */
  fused?: boolean;
}

/** Builds inputs, runs sdpa on cuda, compares with the float64 reference; returns the cuda output. */
function check(o: RunOpts): void {
  const s = o.s ?? o.l;
  const seed = o.seed ?? 1;
  const mk = (heads: number, t: number, sd: number): Tensor => {
    if (!o.btHd) return randn([o.b, heads, t, o.d], sd, o.dtype);
    return randn([o.b, t, heads, o.d], sd, o.dtype).transpose(1, 2);
  };
  const q = mk(o.h, o.l, seed);
  const k = mk(o.hk, s, seed + 1);
  const v = mk(o.hk, s, seed + 2);
  let mask: Tensor | null = null;
  let maskFull: number[] | null = null;
  if (o.mask) {
    // [B, 1, L, S] broadcast over heads; row 0 of batch 0 fully masked (NaN in both).
    const vals = kiln.rand([o.b, 1, o.l, s], { generator: new kiln.Generator(seed + 3) }).toFlatArray();
    const m = vals.map((x, i) => {
      const row0 = i < s;
      if (o.mask === 'bool') return row0 ? 0 : x < 0.7 ? 1 : 0;
      return row0 ? -Infinity : x < 0.2 ? -Infinity : (x - 0.5) * 4;
    });
    mask = o.mask === 'bool' ? kiln.tensor(m.map((x) => x !== 0), { dtype: 'bool' }).reshape([o.b, 1, o.l, s]) : kiln.tensor(m).reshape([o.b, 1, o.l, s]).to(o.dtype);
    const mv = mask.toFlatArray();
    maskFull = [];
    for (let b = 0; b < o.b; b++) for (let h = 0; h < o.h; h++) for (let i = 0; i < o.l * s; i++) maskFull.push(mv[b * o.l * s + i]!);
  }
  const scale = o.scale ?? 1 / Math.sqrt(o.d);
  const want = reference({
    q: q.contiguous().toFlatArray(),
    k: k.contiguous().toFlatArray(),
    v: v.contiguous().toFlatArray(),
    mask: maskFull,
    maskBool: o.mask === 'bool',
    b: o.b,
    h: o.h,
    hk: o.hk,
    l: o.l,
    s,
    d: o.d,
    causal: o.causal,
    scale,
  });
  const before = flashStats.runs;
  const got = kiln.scaledDotProductAttention(q.to('cuda'), k.to('cuda'), v.to('cuda'), mask ? mask.to('cuda') : null, 0, o.causal, o.scale ?? null, o.hk !== o.h);
  const label = `sdpa ${o.dtype} [${o.b},${o.h}(kv ${o.hk}),${o.l}x${s},${o.d}] ${o.causal ? 'causal' : 'full'}${o.mask ? ` ${o.mask} mask` : ''}${o.btHd ? ' [B,T,H,D] view' : ''}`;
  assert.deepEqual([...got.shape], [o.b, o.h, o.l, o.d], `${label}: shape`);
  assert.equal(flashStats.runs - before, o.fused === false ? 0 : 1, `${label}: ${o.fused === false ? 'math fallback' : 'fused kernel'} expected`);
  assertNear(label, got.toFlatArray(), want, o.dtype);
}

const DTYPES: DType[] = ['float32', 'float16', 'bfloat16'];

test('fused sdpa: causal and full, T = 1/17/128/513, head dims 64/128/80, fp32/fp16/bf16 match the float64 reference', { skip }, () => {
  for (const dtype of DTYPES) {
    for (const d of [64, 128, 80]) {
      for (const l of [1, 17, 128, 513]) {
        for (const causal of [true, false]) check({ b: 1, h: 2, hk: 2, l, d, dtype, causal, seed: l + d });
      }
    }
  }
});

test('fused sdpa: every tile the grid-fill rule can pick (f32 register-staged rows per thread 1/2/4, f32 cp.async rows x lanes x keys; tensor-core 1/2/4/8 warps x 64 keys, 4 x 32) matches the reference', { skip }, () => {
  // The rule picks small tiles for small grids (every other test here has a few heads), so each
  // tile is forced in turn on causal/full, odd lengths, grouped heads and a mask.
  const cases = (dtype: DType): RunOpts[] => [
    { b: 1, h: 4, hk: 2, l: 129, d: 128, dtype, causal: true, seed: 7 },
    { b: 1, h: 2, hk: 2, l: 17, s: 70, d: 64, dtype, causal: false, seed: 8 },
    { b: 2, h: 2, hk: 2, l: 40, d: 64, dtype, causal: false, mask: 'bool', seed: 9 },
  ];
  try {
    for (const rm of [1, 2, 4]) {
      setFlashF32Rows(rm);
      for (const c of cases('float32')) check(c);
    }
    setFlashF32Rows(null);
    for (const tile of F32_ASYNC_TILES) {
      setFlashF32Tile(tile);
      for (const c of cases('float32')) check(c);
    }
    setFlashF32Tile(null);
    for (const cfg of [1, 2, 4, 8].map((nw) => ({ nw, mi: 1, bn: 64 })).concat([{ nw: 4, mi: 1, bn: 32 }])) {
      setFlashTcConfig(cfg);
      for (const dtype of ['float16', 'bfloat16'] as DType[]) for (const c of cases(dtype)) check(c);
    }
  } finally {
    setFlashF32Rows(null);
    setFlashF32Tile(null);
    setFlashTcConfig(null);
  }
});

test('fused sdpa: grouped-query heads (16 q heads over 8 and 4 kv heads), batch 2, no K/V copies', { skip }, () => {
  const copies = flashStats.copies;
  for (const dtype of DTYPES) {
    for (const hk of [8, 4]) {
      check({ b: 2, h: 16, hk, l: 33, d: 64, dtype, causal: true, seed: hk });
      check({ b: 1, h: 16, hk, l: 128, d: 128, dtype, causal: true, seed: hk + 1 });
      check({ b: 1, h: 16, hk, l: 20, s: 45, d: 64, dtype, causal: false, seed: hk + 2 });
    }
  }
  assert.equal(flashStats.copies, copies, 'grouped heads are indexed, never copied');
});

test('fused sdpa: bool and additive masks (broadcast over heads, with -inf and a fully masked row -> NaN)', { skip }, () => {
  for (const dtype of DTYPES) {
    for (const mask of ['bool', 'add'] as const) {
      check({ b: 2, h: 2, hk: 2, l: 70, s: 90, d: 64, dtype, causal: false, mask, seed: 5 });
      check({ b: 1, h: 4, hk: 2, l: 129, d: 128, dtype, causal: false, mask, seed: 6 });
    }
  }
});

test('fused sdpa: L != S causal (top-left), explicit scale, head dims 256 and 40, [B,T,H,D] views without copies', { skip }, () => {
  for (const dtype of DTYPES) {
    check({ b: 1, h: 2, hk: 2, l: 40, s: 100, d: 64, dtype, causal: true, scale: 0.3 });
    check({ b: 1, h: 2, hk: 2, l: 100, s: 40, d: 64, dtype, causal: true });
    check({ b: 1, h: 2, hk: 1, l: 65, d: 256, dtype, causal: true });
    check({ b: 1, h: 2, hk: 2, l: 65, d: 40, dtype, causal: false });
    const copies = flashStats.copies;
    check({ b: 2, h: 4, hk: 2, l: 77, d: 64, dtype, causal: true, btHd: true });
    assert.equal(flashStats.copies, copies, `${dtype}: [B,T,H,D] views are read in place`);
  }
});

test('sdpa on cuda returns [B, T, H, D] memory viewed as [B, H, T, D]: transpose(1, 2).reshape is a view (fused and math path)', { skip }, () => {
  for (const path of ['auto', 'math'] as const) {
    setCudaAttentionPath(path);
    try {
      const [b, h, t, d] = [2, 4, 24, 64];
      const q = randn([b, h, t, d], 41, 'float32').to('cuda');
      const o = kiln.scaledDotProductAttention(q, q, q, null, 0, true);
      assert.deepEqual([...o.strides], [t * h * d, d, h * d, 1], `${path}: output strides`);
      assert.ok(o.transpose(1, 2).isContiguous(), `${path}: o.transpose(1, 2) is contiguous`);
      const want = kiln.scaledDotProductAttention(q.to('cpu'), q.to('cpu'), q.to('cpu'), null, 0, true).toFlatArray();
      const got = o.toFlatArray();
      for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got[i]! - want[i]!) <= 1e-4, `${path}: element ${i}: cuda ${got[i]}, cpu ${want[i]}`);
    } finally {
      setCudaAttentionPath('auto');
    }
  }
});

test('fused sdpa: a transposed key (non-unit last stride) is copied; odd head dims, decode steps and the forced math path use the fallback', { skip }, () => {
  const q = randn([1, 2, 30, 64], 1, 'float32');
  const kT = randn([1, 2, 64, 30], 2, 'float32');
  const v = randn([1, 2, 30, 64], 3, 'float32');
  const k = kT.transpose(2, 3);
  const want = reference({ q: q.toFlatArray(), k: k.contiguous().toFlatArray(), v: v.toFlatArray(), mask: null, maskBool: false, b: 1, h: 2, hk: 2, l: 30, s: 30, d: 64, causal: true, scale: 1 / 8 });
  const copies = flashStats.copies;
  const got = kiln.scaledDotProductAttention(q.to('cuda'), kT.to('cuda').transpose(2, 3), v.to('cuda'), null, 0, true);
  assert.equal(flashStats.copies, copies + 1, 'the transposed key is copied once');
  assertNear('transposed key', got.toFlatArray(), want, 'float32');
  // Head dim 33 (not a multiple of 4) and 300 (> 256): the math path.
  check({ b: 1, h: 2, hk: 2, l: 17, d: 33, dtype: 'float32', causal: true, fused: false });
  check({ b: 1, h: 1, hk: 1, l: 9, d: 300, dtype: 'bfloat16', causal: false, fused: false });
  // Decode steps (few query rows, many keys) take the math path; just under the key limit, fused.
  check({ b: 1, h: 4, hk: 2, l: 1, s: 3000, d: 64, dtype: 'bfloat16', causal: false, fused: false });
  check({ b: 1, h: 4, hk: 2, l: 16, s: 600, d: 128, dtype: 'float32', causal: false, fused: false });
  check({ b: 1, h: 4, hk: 2, l: 16, s: 512, d: 128, dtype: 'float32', causal: false });
  setCudaAttentionPath('math');
  try {
    check({ b: 1, h: 2, hk: 2, l: 50, d: 64, dtype: 'bfloat16', causal: true, fused: false });
  } finally {
    setCudaAttentionPath('auto');
  }
});

test('fused sdpa: T = 4096 (16 heads, head dim 128, bf16, causal) allocates no T x T matrix', { skip }, () => {
  const [h, t, d] = [16, 4096, 128];
  const q = randn([1, h, t, d], 11, 'bfloat16');
  const k = randn([1, h, t, d], 12, 'bfloat16');
  const v = randn([1, h, t, d], 13, 'bfloat16');
  const qc = q.to('cuda');
  const kc = k.to('cuda');
  const vc = v.to('cuda');
  kiln.synchronize('cuda');
  const base = kiln.memoryStats('cuda').allocatedBytes;
  kiln.resetPeakMemoryStats('cuda');
  const out = kiln.scaledDotProductAttention(qc, kc, vc, null, 0, true);
  kiln.synchronize('cuda');
  const peak = kiln.memoryStats('cuda').peakAllocatedBytes - base;
  const outBytes = h * t * d * 2;
  const scoresBytes = t * t * h * 4;
  assert.ok(peak <= outBytes * 1.25, `peak extra allocation ${peak} bytes: expected about the output (${outBytes}), far below a T x T score matrix (${scoresBytes})`);
  // Rows across the range (first, a tile edge, middle, last) of every head against the reference.
  const rows = [0, 63, 64, 2047, 4095];
  const want = reference({ q: q.toFlatArray(), k: k.toFlatArray(), v: v.toFlatArray(), mask: null, maskBool: false, b: 1, h, hk: h, l: t, s: t, d, causal: true, scale: 1 / Math.sqrt(d), rows });
  assertNear('T=4096', out.toFlatArray(), want, 'bfloat16', { l: t, d, rows });
});

test('sdpa backward on cuda (fused forward) matches the cpu gradients', { skip }, () => {
  const mk = (seed: number): [Tensor, Tensor] => {
    const x = randn([1, 4, 24, 64], seed, 'float32');
    return [x.clone().requiresGrad_(), x.to('cuda').requiresGrad_()];
  };
  const [qa, qb] = mk(21);
  const [ka, kb] = mk(22);
  const [va, vb] = mk(23);
  const w = randn([1, 4, 24, 64], 24, 'float32');
  kiln.scaledDotProductAttention(qa, ka, va, null, 0, true).mul(w).sum().backward();
  const before = flashStats.runs;
  kiln.scaledDotProductAttention(qb, kb, vb, null, 0, true).mul(w.to('cuda')).sum().backward();
  assert.equal(flashStats.runs - before, 1, 'the forward ran the fused kernel');
  for (const [name, a, b] of [['q', qa, qb], ['k', ka, kb], ['v', va, vb]] as const) {
    const ga = a.grad!.toFlatArray();
    const gb = b.grad!.toFlatArray();
    for (let i = 0; i < ga.length; i++) assert.ok(Math.abs(ga[i]! - gb[i]!) <= 1e-4 + 1e-4 * Math.abs(ga[i]!), `grad ${name}[${i}]: cuda ${gb[i]}, cpu ${ga[i]}`);
  }
});

test('kiln.compile on cuda runs sdpa through the fused kernel as an extern (default and reduce-overhead)', { skip }, () => {
  const fn = (q: Tensor, k: Tensor, v: Tensor): Tensor => kiln.scaledDotProductAttention(q.mul(2), k, v, null, 0, true, null, true).add(1);
  const q = randn([2, 8, 40, 64], 31, 'bfloat16').to('cuda');
  const k = randn([2, 2, 40, 64], 32, 'bfloat16').to('cuda');
  const v = randn([2, 2, 40, 64], 33, 'bfloat16').to('cuda');
  const eager = fn(q, k, v).toFlatArray();
  for (const mode of ['default', 'reduce-overhead'] as const) {
    const cf = kiln.compile(fn, { mode });
    const before = flashStats.runs;
    const got = (kiln.noGrad(() => cf(q, k, v)) as Tensor).toFlatArray();
    kiln.noGrad(() => cf(q, k, v));
    assert.ok(flashStats.runs > before, `${mode}: the compiled program called the fused kernel`);
    for (let i = 0; i < eager.length; i++) assert.ok(Math.abs(got[i]! - eager[i]!) <= 1e-2 + 1e-2 * Math.abs(eager[i]!), `${mode}: element ${i}: compiled ${got[i]}, eager ${eager[i]}`);
  }
});
