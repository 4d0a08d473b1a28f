/**
 * llm.applyRotaryEmb (rotary embedding from explicit cos/sin) and the rotate-half rewrite:
 * the op against a float64 loop written here (neox and gpt-j, broadcast tables, transposed input,
 * halves), its layout, errors, the default kiln.compile rewrite of the Hugging Face composition
 * (fires, and compiled equals eager), and the cuda kernel against the cpu one and the float64 loop
 * (collapsed dims, 1-d, column slices of a fused qkv at a storage offset).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { runPasses } from '../src/compile/passes/index.js';
import { autoRewriteRules } from '../src/llm/rewrites.js';
import { broadcastStrides } from '../src/tensor/layout.js';
import type { DType } from '../src/tensor/dtype.js';
import { rand } from './helpers/make.js';
import { skipUnlessCuda } from './cuda-util.js';
import { collapseRotaryDims } from '../src/kernels/cuda/llm-rotary.js';

type T = kiln.Tensor;

/** out = x cos + rot(x) sin in float64, element by element through broadcast strides. */
function reference(x: T, cos: T, sin: T, isNeox: boolean): Float64Array {
  const xv = x.to('float64').contiguous().toFlatArray();
  const read = (t: T): ((i: number[]) => number) => {
    const c = t.to('float64');
    const flat = c.contiguous().toFlatArray();
    const strides = broadcastStrides(c.shape, c.contiguous().strides, x.shape);
    return (idx) => flat[idx.reduce((o, v, k) => o + v * strides[k]!, 0)]!;
  };
  const cr = read(cos);
  const sr = read(sin);
  const d = x.shape[x.ndim - 1]!;
  const out = new Float64Array(xv.length);
  for (let e = 0; e < xv.length; e++) {
    const idx: number[] = [];
    let rest = e;
    for (let k = x.ndim - 1; k >= 0; k--) {
      idx.unshift(rest % x.shape[k]!);
      rest = Math.floor(rest / x.shape[k]!);
    }
    const i = idx[x.ndim - 1]!;
    const base = e - i;
    const rot = isNeox ? (i < d / 2 ? -xv[base + i + d / 2]! : xv[base + i - d / 2]!) : i % 2 === 0 ? -xv[base + i + 1]! : xv[base + i - 1]!;
    out[e] = xv[e]! * cr(idx) + rot * sr(idx);
  }
  return out;
}

function maxErr(got: T, want: Float64Array): number {
  const g = got.to('float64').contiguous().toFlatArray();
  let m = 0;
  for (let i = 0; i < want.length; i++) m = Math.max(m, Math.abs(g[i]! - want[i]!));
  return m;
}

const TOL: Record<string, number> = { float32: 2e-6, float64: 1e-12, bfloat16: 3e-2, float16: 4e-3 };

test('llm.applyRotaryEmb equals the float64 loop: neox and gpt-j, broadcast tables, transposed input, halves', () => {
  for (const dtype of ['float32', 'float64', 'bfloat16', 'float16'] as DType[]) {
    for (const isNeox of [true, false]) {
      // x as Qwen3 has it: [B, T, H, D] viewed as [B, H, T, D]; tables [T, D] and [B, 1, T, D].
      const x = rand([2, 5, 3, 10], 1, 'contiguous', dtype).transpose(1, 2);
      const c2 = rand([5, 10], 2, 'contiguous', dtype);
      const s4 = rand([2, 1, 5, 10], 3, 'contiguous', dtype);
      const y = kiln.llm.applyRotaryEmb(x, c2, s4, isNeox);
      assert.deepEqual(y.shape, x.shape);
      assert.deepEqual(y.strides, x.strides, 'the output keeps the input layout');
      const err = maxErr(y, reference(x, c2, s4, isNeox));
      assert.ok(err <= TOL[dtype]!, `${dtype} ${isNeox ? 'neox' : 'gpt-j'}: max error ${err}`);
    }
  }
});

test('llm.applyRotaryEmb rejects bad input with the op, argument and shapes named', () => {
  const x = kiln.randn([2, 4, 6]);
  assert.throws(() => kiln.llm.applyRotaryEmb(kiln.randn([2, 5]), kiln.randn([5]), kiln.randn([5])), /llm\.applyRotaryEmb: the last dim of 'input' .* must be even/);
  assert.throws(() => kiln.llm.applyRotaryEmb(x, kiln.randn([4, 8]), kiln.randn([4, 6])), /argument 'cos' .*\[4, 8\].* same last dim 6/);
  assert.throws(() => kiln.llm.applyRotaryEmb(x, kiln.randn([3, 4, 6]), kiln.randn([4, 6])), /argument 'cos'/);
  assert.throws(() => kiln.llm.applyRotaryEmb(x, kiln.randn([4, 6]).to('float64'), kiln.randn([4, 6])), /same dtype/);
});

/** The Hugging Face form (as src/models/qwen3 writes it). */
function hfRope(q: T, cos: T, sin: T): T {
  const h = q.shape[q.ndim - 1]! / 2;
  const rot = kiln.cat([kiln.neg(kiln.narrow(q, -1, h, h)), kiln.narrow(q, -1, 0, h)], -1);
  return kiln.add(kiln.mul(q, cos), kiln.mul(rot, sin));
}

test('kiln.compile rewrites the rotate-half RoPE onto llm.applyRotaryEmb by default, and compiled equals eager', () => {
  const fn = (q: T, k: T, cos: T, sin: T): T[] => [hfRope(q.transpose(1, 2), cos, sin), hfRope(k.transpose(1, 2), sin, cos)];
  const args = (): T[] => [rand([1, 6, 4, 8], 1), rand([1, 6, 2, 8], 2), rand([6, 8], 3), rand([6, 8], 4)];
  const { graph } = kiln.noGrad(() => trace(fn as (...a: T[]) => T[], args()));
  const ops = (g: typeof graph): string[] => g.nodes.map((n) => n.op);
  assert.equal(ops(runPasses(graph, { decompose: true }).graph).filter((o) => o === 'llm.applyRotaryEmb').length, 0, 'no rewrite unless asked');
  const rewritten = ops(runPasses(graph, { decompose: true, rewrites: autoRewriteRules }).graph);
  assert.equal(rewritten.filter((o) => o === 'llm.applyRotaryEmb').length, 2);
  assert.ok(!rewritten.includes('cat'), 'no cat left');
  const compiled = kiln.compile(fn, { fullgraph: true });
  const a = args();
  const got = kiln.noGrad(() => compiled(...(a as [T, T, T, T])));
  const want = kiln.noGrad(() => fn(...(a as [T, T, T, T])));
  for (let i = 0; i < 2; i++) {
    const err = maxErr(got[i]!, Float64Array.from(want[i]!.contiguous().toFlatArray()));
    assert.ok(err <= 1e-6, `output ${i}: max |compiled - eager| ${err}`);
  }
});

test('the rewrite leaves a composition whose halves are swapped alone', () => {
  const wrong = (q: T, cos: T, sin: T): T => {
    const h = q.shape[1]! / 2;
    const rot = kiln.cat([kiln.neg(kiln.narrow(q, -1, 0, h)), kiln.narrow(q, -1, h, h)], -1);
    return kiln.add(kiln.mul(q, cos), kiln.mul(rot, sin));
  };
  const { graph } = kiln.noGrad(() => trace(wrong as (...a: T[]) => T, [rand([3, 8], 1), rand([3, 8], 2), rand([3, 8], 3)]));
  const ops = runPasses(graph, { decompose: true, rewrites: autoRewriteRules }).graph.nodes.map((n) => n.op);
  assert.ok(!ops.includes('llm.applyRotaryEmb'), 'not the rotate-half form: no rewrite');
});

test('cuda: llm.applyRotaryEmb matches the cpu kernel (float32 exact to 1e-6, halves to one rounding)', { skip: skipUnlessCuda() }, () => {
  for (const dtype of ['float32', 'bfloat16', 'float16'] as DType[]) {
    for (const isNeox of [true, false]) {
      const x = rand([2, 7, 3, 64], 5, 'contiguous', dtype).transpose(1, 2);
      const c = rand([7, 64], 6, 'contiguous', dtype);
      const s = rand([1, 7, 64], 7, 'contiguous', dtype);
      const want = reference(x, c, s, isNeox);
      const y = kiln.llm.applyRotaryEmb(x.to('cuda'), c.to('cuda'), s.to('cuda'), isNeox);
      assert.deepEqual(y.strides, x.strides);
      const err = maxErr(y.to('cpu'), want);
      assert.ok(err <= TOL[dtype]!, `cuda ${dtype} ${isNeox ? 'neox' : 'gpt-j'}: max error ${err}`);
    }
  }
});

test('cuda kernel geometry: collapseRotaryDims drops size-1 dims and merges leading dims every operand walks as one', () => {
  // Contiguous x/out with cos/sin broadcast over the heads: [B, H, T, D] -> [B*H] cannot merge with T (cos strides differ).
  const c1 = collapseRotaryDims([2, 4, 8, 16], [[512, 128, 16, 1], [512, 128, 16, 1], [0, 0, 16, 1], [0, 0, 16, 1]]);
  assert.deepEqual(c1.shape, [8, 8, 16]);
  assert.deepEqual(c1.strides, [[128, 16, 1], [128, 16, 1], [0, 16, 1], [0, 16, 1]]);
  // Transposed q (a view of [1, T, H, D]): nothing merges, the size-1 batch goes.
  const c2 = collapseRotaryDims([1, 16, 128, 128], [[262144, 128, 2048, 1], [262144, 128, 2048, 1], [0, 0, 128, 1], [0, 0, 128, 1]]);
  assert.deepEqual(c2.shape, [16, 128, 128]);
  assert.deepEqual(c2.strides[1], [128, 2048, 1]);
  // Everything dense with per-row tables: the leading dims become one.
  const c3 = collapseRotaryDims([3, 5, 8], [[40, 8, 1], [40, 8, 1], [40, 8, 1], [40, 8, 1]]);
  assert.deepEqual(c3.shape, [15, 8]);
  assert.deepEqual(collapseRotaryDims([8], [[1], [1], [1], [1]]).shape, [8]);
});

test('cuda: llm.applyRotaryEmb on collapsed and offset layouts (dense, 1-d, column slices of a fused qkv) matches the float64 loop', { skip: skipUnlessCuda() }, () => {
  for (const dtype of ['float32', 'bfloat16'] as DType[]) {
    const cases: [string, T, T, T][] = [];
    cases.push(['dense 4-d, per-row tables', rand([2, 3, 5, 16], 11, 'contiguous', dtype), rand([2, 3, 5, 16], 12, 'contiguous', dtype), rand([2, 3, 5, 16], 13, 'contiguous', dtype)]);
    cases.push(['1-d', rand([16], 14, 'contiguous', dtype), rand([16], 15, 'contiguous', dtype), rand([16], 16, 'contiguous', dtype)]);
    // k of a [1, T, (4 + 2 + 2) * 8] qkv projection: a column slice at an offset, viewed [1, T, 2, 8] and transposed.
    const qkv = rand([1, 6, 64], 17, 'contiguous', dtype);
    const k = qkv.narrow(-1, 32, 16).view([1, 6, 2, 8]).transpose(1, 2);
    cases.push(['qkv column slice', k, rand([6, 8], 18, 'contiguous', dtype), rand([1, 1, 6, 8], 19, 'contiguous', dtype)]);
    for (const [label, x, c, s] of cases) {
      for (const isNeox of [true, false]) {
        const want = reference(x, c, s, isNeox);
        const y = kiln.llm.applyRotaryEmb(x.to('cuda'), c.to('cuda'), s.to('cuda'), isNeox);
        const err = maxErr(y.to('cpu'), want);
        assert.ok(err <= TOL[dtype]!, `cuda ${dtype} ${label} ${isNeox ? 'neox' : 'gpt-j'}: max error ${err}`);
      }
    }
    // The strided slice itself on the device (storage offset and row stride 64 on cuda, not a dense copy).
    const kd = qkv.to('cuda').narrow(-1, 32, 16).view([1, 6, 2, 8]).transpose(1, 2);
    const cd = rand([6, 8], 20, 'contiguous', dtype);
    const err = maxErr(kiln.llm.applyRotaryEmb(kd, cd.to('cuda'), cd.to('cuda'), true).to('cpu'), reference(k, cd, cd, true));
    assert.ok(err <= TOL[dtype]!, `cuda ${dtype} on-device slice: max error ${err}`);
  }
});
