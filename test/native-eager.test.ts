/**
 * The native eager float32 kernels (kernels/cpu/native/ops.ts, conv.ts) against float64 references
 * written here or in helpers/nn-ref.ts: unary ops over wide ranges and special values, broadcasting
 * arithmetic with transposed / strided / scalar operands, softmax and log-softmax, layer and RMS
 * norm, eval batch norm in channels_last, attention (causal, full, grouped-query, strided views)
 * and conv2d (channels_last and NCHW, stride, dilation, padding, groups, bias); each asserts that
 * the native kernel ran (call counters) and the JS path stays available. Skips where no C compiler works.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { nativeGemmCalls, probeToolchain, setCpuPath } from '../src/kernels/cpu/native/index.js';
import { nativeOpCalls } from '../src/kernels/cpu/native/ops.js';
import { makeTensor, rand, randomValues } from './helpers/make.js';
import { refAttention, refConv2d } from './helpers/nn-ref.js';
import { geluRef } from './helpers/pointwise-ref.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;

function native<T>(fn: () => T): T {
  setCpuPath('native');
  try {
    return fn();
  } finally {
    setCpuPath(undefined);
  }
}

/** Runs fn and asserts it made `n` native (non-GEMM) kernel calls. */
function calls<T>(n: number, fn: () => T, what: string): T {
  const before = nativeOpCalls();
  const r = fn();
  assert.equal(nativeOpCalls() - before, n, `${what}: native kernel calls`);
  return r;
}

function near(got: readonly number[], want: readonly number[], atol: number, rtol: number, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!;
    const w = want[i]!;
    if (Number.isNaN(w)) {
      assert.ok(Number.isNaN(g), `${what}[${i}]: got ${g}, expected NaN`);
      continue;
    }
    if (!Number.isFinite(w)) {
      assert.equal(g, w, `${what}[${i}]`);
      continue;
    }
    if (!(Math.abs(g - w) <= atol + rtol * Math.abs(w))) assert.fail(`${what}[${i}]: got ${g}, expected ${w}`);
  }
}

const SPECIAL = [NaN, Infinity, -Infinity, 0, -0, 1e-30, -1e-30, 20, -20, 88, -88, 100, -100, 0.5, -0.5];

test('native unary ops match float64 references over wide ranges and special values', { skip }, () => {
  const vals = [...SPECIAL, ...randomValues(3000, 3, -12, 12)];
  const x = makeTensor(vals, [vals.length]);
  const xf = x.toFlatArray();
  const refs: [string, (t: Tensor) => Tensor, (v: number) => number, number][] = [
    ['relu', kiln.relu, (v) => (v > 0 || Number.isNaN(v) ? v : 0), 0],
    // gelu: the erfc tail (x < -1.4) carries a few ulp more (the compiled kernels' bound, 2e-6).
    ['gelu', (t) => kiln.nn.functional.gelu(t), geluRef, 2e-6],
    ['gelu tanh', (t) => kiln.nn.functional.gelu(t, 'tanh'), (v) => (v === -Infinity ? NaN : v / (1 + Math.exp(-2 * Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)))), 3e-6],
    ['sigmoid', kiln.sigmoid, (v) => 1 / (1 + Math.exp(-v)), 4e-7],
    ['tanh', kiln.tanh, Math.tanh, 4e-7],
    ['exp', kiln.exp, Math.exp, 4e-7],
    ['silu', kiln.silu, (v) => v / (1 + Math.exp(-v)), 4e-7],
    ['neg', kiln.neg, (v) => -v, 0],
    ['abs', kiln.abs, Math.abs, 0],
    ['sqrt', kiln.sqrt, Math.sqrt, 0],
    ['square', kiln.square, (v) => v * v, 0],
  ];
  native(() => {
    for (const [name, f, ref, rtol] of refs) {
      const got = calls(1, () => f(x), name).toFlatArray();
      const want = xf.map((v) => Math.fround(ref(v)));
      // atol 1e-12: gelu's far negative tail (|y| < 1e-6) is tiny in absolute terms, where the
      // float32 algorithms carry a few ulp of relative error.
      near(got, want, rtol === 0 ? 0 : 1e-12, rtol, name);
    }
    // Non-dense input (a strided view) keeps the JS kernel.
    const s = makeTensor(vals.slice(0, 100), [100], 'float32', 'strided');
    const got = calls(0, () => kiln.tanh(s), 'strided tanh').toFlatArray();
    near(got, s.toFlatArray().map((v) => Math.fround(Math.tanh(v))), 0, 0, 'strided tanh (JS kernel, exact)');
  });
});

test('native elementwise arithmetic broadcasts over transposed, strided and scalar operands exactly', { skip }, () => {
  native(() => {
    const a = rand([7, 33, 40], 1, 'transposed');
    const b = rand([33, 1], 2, 'strided');
    const af = a.toFlatArray();
    const bf = b.toFlatArray();
    const want = (f: (x: number, y: number) => number): number[] => af.map((v, i) => Math.fround(f(v, bf[Math.floor(i / 40) % 33]!)));
    near(calls(1, () => kiln.add(a, b), 'add').toFlatArray(), want((x, y) => x + y), 0, 0, 'add');
    near(calls(1, () => kiln.sub(a, b), 'sub').toFlatArray(), want((x, y) => x - y), 0, 0, 'sub');
    near(calls(1, () => kiln.mul(a, b), 'mul').toFlatArray(), want((x, y) => x * y), 0, 0, 'mul');
    near(calls(1, () => kiln.div(a, b), 'div').toFlatArray(), want((x, y) => x / y), 0, 0, 'div');
    near(calls(1, () => kiln.mul(a, 1.5), 'mul scalar').toFlatArray(), af.map((v) => Math.fround(v * 1.5)), 0, 0, 'mul scalar');
    // 0.1 is not a float32: add keeps the JS kernel's float64 arithmetic.
    near(calls(0, () => kiln.add(a, 0.1), 'add 0.1').toFlatArray(), af.map((v) => Math.fround(v + 0.1)), 0, 0, 'add 0.1');
    near(calls(0, () => kiln.add(a, b, 2), 'add alpha').toFlatArray(), want((x, y) => x + 2 * y), 0, 0, 'add alpha 2');
  });
});

test('native softmax, log-softmax, layer norm and RMS norm match float64 rows', { skip }, () => {
  const rows = 37;
  const n = 300;
  const x = rand([rows, n], 5, 'contiguous', 'float32', -30, 30);
  const xf = x.toFlatArray();
  const w = rand([n], 6);
  const b = rand([n], 7);
  const wf = w.toFlatArray();
  const bf = b.toFlatArray();
  const sm: number[] = [];
  const lsm: number[] = [];
  const ln: number[] = [];
  const rms: number[] = [];
  for (let r = 0; r < rows; r++) {
    const row = xf.slice(r * n, (r + 1) * n);
    const m = Math.max(...row);
    const s = row.reduce((acc, v) => acc + Math.exp(v - m), 0);
    for (const v of row) {
      sm.push(Math.exp(v - m) / s);
      lsm.push(v - m - Math.log(s));
    }
    const mean = row.reduce((p, v) => p + v, 0) / n;
    const vr = row.reduce((p, v) => p + (v - mean) ** 2, 0) / n;
    const ms = row.reduce((p, v) => p + v * v, 0) / n;
    row.forEach((v, i) => {
      ln.push(((v - mean) / Math.sqrt(vr + 1e-5)) * wf[i]! + bf[i]!);
      rms.push((v / Math.sqrt(ms + 1e-6)) * wf[i]!);
    });
  }
  native(() => {
    near(calls(1, () => kiln.softmax(x, -1), 'softmax').toFlatArray(), sm, 1e-9, 2e-6, 'softmax');
    near(calls(1, () => kiln.logSoftmax(x, 1), 'logSoftmax').toFlatArray(), lsm, 2e-5, 2e-6, 'logSoftmax');
    near(calls(1, () => kiln.nn.functional.layerNorm(x, [n], w, b, 1e-5), 'layerNorm').toFlatArray(), ln, 2e-5, 2e-6, 'layerNorm');
    near(calls(1, () => kiln.nn.functional.rmsNorm(x, [n], w, 1e-6), 'rmsNorm').toFlatArray(), rms, 2e-5, 2e-6, 'rmsNorm');
    // softmax over a non-last dim keeps the JS kernel.
    calls(0, () => kiln.softmax(x, 0), 'softmax dim 0');
  });
});

test('native eval batch norm is one fma pass in channels_last and contiguous layouts', { skip }, () => {
  const [N, C, H, W] = [2, 5, 4, 3];
  const mean = rand([C], 11);
  const vr = rand([C], 12, 'contiguous', 'float32', 0.5, 2);
  const g = rand([C], 13);
  const bb = rand([C], 14);
  for (const layout of ['channelsLast', 'contiguous'] as const) {
    const x = rand([N, C, H, W], 15, layout);
    const xf = x.toFlatArray();
    const [mf, vf, gf, bf] = [mean, vr, g, bb].map((t) => t.toFlatArray()) as [number[], number[], number[], number[]];
    const want = xf.map((v, i) => {
      const c = Math.floor(i / (H * W)) % C;
      return ((v - mf[c]!) / Math.sqrt(vf[c]! + 1e-5)) * gf[c]! + bf[c]!;
    });
    native(() => {
      const y = calls(1, () => kiln.nn.functional.batchNorm(x, mean, vr, g, bb, false, 0.1, 1e-5), `batchNorm ${layout}`);
      near(y.toFlatArray(), want, 3e-6, 3e-6, `batchNorm ${layout}`);
      assert.equal(y.isContiguous(layout), true, `batchNorm keeps ${layout}`);
    });
  }
});

test('native attention: causal and full, grouped-query heads and strided q/k/v views', { skip }, () => {
  const [B, H, Hk, L, S, E] = [2, 4, 2, 19, 19, 24];
  const q = rand([B, H, L, E], 21);
  const k = rand([B, Hk, S, E], 22);
  const v = rand([B, Hk, S, E], 23);
  const inp = (t: Tensor): { values: number[]; shape: number[] } => ({ values: t.toFlatArray(), shape: [...t.shape] });
  native(() => {
    for (const causal of [true, false]) {
      const got = calls(1, () => kiln.scaledDotProductAttention(q, k, v, null, 0, causal, null, true), `attention causal=${causal}`);
      const ref = refAttention(inp(q), inp(k), inp(v), { causal });
      near(got.toFlatArray(), ref.values, 2e-6, 2e-5, `attention causal=${causal}`);
    }
    // q/k/v as transposed views of a [B, L, H, E] projection (the transformer block's layout).
    const qkv = rand([B, L, 3, H, E], 24);
    const [qv, kv, vv] = [0, 1, 2].map((i) => kiln.transpose(kiln.select(qkv, 2, i), 1, 2)) as [Tensor, Tensor, Tensor];
    const got = calls(1, () => kiln.scaledDotProductAttention(qv, kv, vv, null, 0, true, 0.3), 'attention on views');
    const ref = refAttention(inp(kiln.contiguous(qv)), inp(kiln.contiguous(kv)), inp(kiln.contiguous(vv)), { causal: true, scale: 0.3 });
    near(got.toFlatArray(), ref.values, 2e-6, 2e-5, 'attention on views');
    // Longer keys than queries and a value width unlike the key width (EV 40: two 16-wide
    // register blocks and a scalar tail; L 37: a partial 4-row block).
    for (const causal of [true, false]) {
      const q2 = rand([1, 2, 37, 32], 26);
      const k2 = rand([1, 1, 45, 32], 27);
      const v2 = rand([1, 1, 45, 40], 28);
      const got = calls(1, () => kiln.scaledDotProductAttention(q2, k2, v2, null, 0, causal, null, true), `attention L != S causal=${causal}`);
      near(got.toFlatArray(), refAttention(inp(q2), inp(k2), inp(v2), { causal }).values, 2e-6, 2e-5, `attention L != S causal=${causal}`);
    }
    // A mask keeps the JS kernel.
    const kf = rand([B, H, S, E], 25);
    calls(0, () => kiln.scaledDotProductAttention(q, kf, kf, kiln.zeros([L, S]), 0, false), 'masked');
  });
});

test('native conv2d: channels_last and NCHW, stride, dilation, asymmetric padding, groups and bias', { skip }, () => {
  const cases: { x: [number, number, number, number]; w: [number, number, number, number]; stride: [number, number]; pad: [number, number, number, number]; dil: [number, number]; groups: number; layout: 'channelsLast' | 'contiguous' | 'strided' }[] = [
    { x: [2, 3, 17, 15], w: [8, 3, 7, 7], stride: [2, 2], pad: [3, 3, 3, 3], dil: [1, 1], groups: 1, layout: 'channelsLast' },
    { x: [1, 20, 9, 11], w: [19, 20, 3, 3], stride: [1, 1], pad: [1, 1, 1, 1], dil: [1, 1], groups: 1, layout: 'channelsLast' },
    { x: [2, 6, 10, 9], w: [4, 3, 3, 2], stride: [1, 2], pad: [0, 1, 2, 1], dil: [2, 1], groups: 2, layout: 'contiguous' },
    { x: [1, 4, 8, 8], w: [6, 4, 1, 1], stride: [1, 1], pad: [0, 0, 0, 0], dil: [1, 1], groups: 1, layout: 'strided' },
  ];
  native(() => {
    cases.forEach((c, i) => {
      const x = rand(c.x, 30 + i, c.layout);
      const w = rand(c.w, 40 + i, 'contiguous', 'float32', -0.5, 0.5);
      const b = rand([c.w[0]], 50 + i);
      const before = nativeGemmCalls();
      const y = kiln.conv2d(x, w, b, c.stride, c.pad, c.dil, c.groups);
      assert.equal(nativeGemmCalls() - before, c.groups, `case ${i}: one implicit-GEMM call per group`);
      const ref = refConv2d(x.toFlatArray(), c.x, w.toFlatArray(), c.w, b.toFlatArray(), c.stride, c.pad, c.dil, c.groups);
      assert.deepEqual([...y.shape], ref.shape, `case ${i}: shape`);
      near(y.toFlatArray(), ref.values, 2e-5, 1e-5, `conv case ${i}`);
      if (c.layout === 'channelsLast') assert.ok(y.isContiguous('channelsLast'), `case ${i}: channels_last output`);
    });
    // A weight update repacks: the output follows the new weight.
    const x = rand([1, 3, 6, 6], 60, 'channelsLast');
    const w = rand([4, 3, 3, 3], 61);
    const y1 = kiln.conv2d(x, w, null, 1, 1).toFlatArray();
    kiln.noGrad(() => w.mul_(-1));
    const y2 = kiln.conv2d(x, w, null, 1, 1).toFlatArray();
    near(y2, y1.map((v) => -v), 0, 0, 'conv after weight *= -1');
  });
});
