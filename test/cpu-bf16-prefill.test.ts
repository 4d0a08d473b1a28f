/**
 * The bfloat16 prefill's products on the native cpu path. Linears with more rows than the GEMV
 * takes:
 * the float32 GEMM reading the weight's bfloat16 bits in place (kernels/cpu/native/eager.ts,
 * nativeBf16Linear; kiln_sgemm's bfloat16 B packing). Against a float64 product of the same
 * bfloat16 values rounded once to bfloat16: within one bfloat16 step (float32 sums against
 * float64 may land on the other side of a rounding boundary), over shapes with remainders,
 * transposed and sliced weights, biases, 3-d inputs and NaN / infinity propagation. Attention
 * (scaledDotProductAttention, bfloat16 q / k / v widened for the float32 kernel,
 * native/ops.ts nativeAttentionBf16): against float64 softmax attention of the same values, causal
 * and not, grouped-query heads, transposed (strided) operands.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { nativeGemmCalls } from '../src/kernels/cpu/native/gemm.js';
import { cpuPath } from '../src/kernels/cpu/native/path.js';
import { roundToBfloat16 } from '../src/tensor/half.js';

const skip = cpuPath() === 'native' ? false : 'needs the native cpu path (a C compiler)';

/** A bfloat16 tensor's values as float64, row-major over its shape (any strides). */
function values(t: Tensor): number[] {
  return Array.from(t.contiguous().toFlatArray() as number[]);
}

/** float64 reference of linear on bfloat16 values, rounded once to bfloat16. */
function reference(x: number[], rows: number, k: number, w: number[], n: number, bias: number[] | null): number[] {
  const out: number[] = [];
  for (let i = 0; i < rows; i++)
    for (let j = 0; j < n; j++) {
      let s = bias ? bias[j]! : 0;
      for (let p = 0; p < k; p++) s += x[i * k + p]! * w[j * k + p]!;
      out.push(roundToBfloat16(s));
    }
  return out;
}

/** Distance in bfloat16 steps at the reference's magnitude. */
function steps(got: number, want: number): number {
  if (Number.isNaN(want)) return Number.isNaN(got) ? 0 : Infinity;
  if (!Number.isFinite(want)) return got === want ? 0 : Infinity;
  const ulp = Math.max(Math.abs(want), 2 ** -120) * 2 ** -7;
  return Math.abs(got - want) / ulp;
}

const CASES: { label: string; x: number[]; k: number; n: number; bias: boolean; weight: 'plain' | 'transposed' | 'sliced' }[] = [
  { label: 'prompt rows [32, 1024] x [300, 1024]^T + bias', x: [32], k: 1024, n: 300, bias: true, weight: 'plain' },
  { label: 'remainders [7, 100] x [17, 100]^T', x: [7], k: 100, n: 17, bias: false, weight: 'plain' },
  { label: '3-d input [2, 35, 64], transposed weight view', x: [2, 35], k: 64, n: 40, bias: true, weight: 'transposed' },
  { label: 'sliced weight (row stride > k)', x: [9], k: 48, n: 33, bias: false, weight: 'sliced' },
];

for (const c of CASES) {
  test(`bfloat16 linear through the native GEMM (${c.label}) is the float64 product within one bfloat16 step`, { skip }, () => {
    kiln.manualSeed(41);
    const x = kiln.randn([...c.x, c.k], { dtype: 'bfloat16' });
    let w: Tensor;
    if (c.weight === 'transposed') w = kiln.randn([c.k, c.n], { dtype: 'bfloat16' }).t();
    else if (c.weight === 'sliced') w = kiln.narrow(kiln.randn([c.n, c.k + 16], { dtype: 'bfloat16' }), 1, 8, c.k);
    else w = kiln.randn([c.n, c.k], { dtype: 'bfloat16' });
    const b = c.bias ? kiln.randn([c.n], { dtype: 'bfloat16' }) : null;
    const before = nativeGemmCalls();
    const y = kiln.nn.functional.linear(x, w, b);
    assert.equal(nativeGemmCalls() - before, 1, 'one native GEMM call');
    assert.equal(y.dtype, 'bfloat16');
    assert.deepEqual(y.shape, [...c.x, c.n]);
    const rows = c.x.reduce((a, v) => a * v, 1);
    const want = reference(values(x), rows, c.k, values(w), c.n, b ? values(b) : null);
    const got = values(y);
    let worst = 0;
    let off = 0;
    got.forEach((g, i) => {
      const d = steps(g, want[i]!);
      worst = Math.max(worst, d);
      if (d > 0) off++;
    });
    assert.ok(worst <= 1, `worst ${worst} bfloat16 steps`);
    assert.ok(off < got.length / 10, `${off} of ${got.length} outputs one step off`);
  });
}

test('bfloat16 linear through the native GEMM propagates NaN and infinity from the input and the weight', { skip }, () => {
  const k = 16;
  const xs = Array.from({ length: 5 * k }, (_, i) => (i % 7) - 3);
  xs[3] = NaN;
  xs[k + 2] = Infinity;
  const x = kiln.tensor(xs, { dtype: 'bfloat16' }).reshape([5, k]);
  const ws = Array.from({ length: 6 * k }, (_, i) => ((i % 5) - 2) / 4);
  ws[4 * k + 1] = -Infinity;
  const w = kiln.tensor(ws, { dtype: 'bfloat16' }).reshape([6, k]);
  const got = values(kiln.nn.functional.linear(x, w, null));
  const want = reference(values(x), 5, k, values(w), 6, null);
  got.forEach((g, i) => assert.ok(steps(g, want[i]!) <= 1, `output ${i}: ${g} against ${want[i]}`));
  assert.ok(Number.isNaN(got[0]!), 'a NaN input row gives NaN');
  assert.ok(got.slice(6, 12).some((v) => !Number.isFinite(v)), 'an infinite input row gives infinities or NaN');
});

/** float64 attention of [B, H, L, E] q against [B, Hk, S, E] k / v (grouped heads), rounded once to bfloat16. */
function attentionReference(q: number[], k: number[], v: number[], B: number, H: number, Hk: number, L: number, S: number, E: number, causal: boolean): number[] {
  const out: number[] = [];
  const g = H / Hk;
  const scale = 1 / Math.sqrt(E);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let i = 0; i < L; i++) {
        const kh = Math.floor(h / g);
        const visible = causal ? Math.min(S, i + 1 + (S - L)) : S;
        const sc: number[] = [];
        for (let j = 0; j < visible; j++) {
          let d = 0;
          for (let e = 0; e < E; e++) d += q[((b * H + h) * L + i) * E + e]! * k[((b * Hk + kh) * S + j) * E + e]!;
          sc.push(d * scale);
        }
        const m = Math.max(...sc);
        const w = sc.map((x) => Math.exp(x - m));
        const z = w.reduce((a, x) => a + x, 0);
        for (let e = 0; e < E; e++) {
          let acc = 0;
          for (let j = 0; j < visible; j++) acc += (w[j]! / z) * v[((b * Hk + kh) * S + j) * E + e]!;
          out.push(roundToBfloat16(acc));
        }
      }
  return out;
}

for (const causal of [false, true]) {
  test(`bfloat16 attention through the native float32 kernel is float64 attention within one bfloat16 step (${causal ? 'causal' : 'full'}, grouped heads, strided q)`, { skip }, () => {
    const [B, H, Hk, L, E] = [2, 4, 2, 9, 16];
    kiln.manualSeed(43);
    // q as the transposed view a model makes ([B, L, H, E] -> [B, H, L, E]).
    const q = kiln.randn([B, L, H, E], { dtype: 'bfloat16' }).transpose(1, 2);
    const k = kiln.randn([B, Hk, L, E], { dtype: 'bfloat16' });
    const v = kiln.randn([B, Hk, L, E], { dtype: 'bfloat16' });
    const y = kiln.nn.functional.scaledDotProductAttention(q, k, v, null, 0, causal, null, true);
    assert.equal(y.dtype, 'bfloat16');
    const want = attentionReference(values(q), values(k), values(v), B, H, Hk, L, L, E, causal);
    const got = values(y);
    let worst = 0;
    got.forEach((g, i) => (worst = Math.max(worst, steps(g, want[i]!))));
    assert.ok(worst <= 1, `worst ${worst} bfloat16 steps`);
  });
}
