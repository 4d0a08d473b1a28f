/**
 * Numerics of every kiln.llm op against float64 references written here as naive loops over the
 * input values as stored (so input rounding is shared and only the kernel's own error is
 * measured), in float32, float16, bfloat16 and float64; plus the errors bad input gets.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { makeTensor, rand, randomInts } from './helpers/make.js';
import { ropeCache, routedIds } from './samples/llm.js';

const llm = kiln.llm;
const FLOATS: DType[] = ['float32', 'float16', 'bfloat16', 'float64'];

/** One rounding of the result to the output dtype (relative), plus a little slack. */
function tol(dtype: DType): number {
  return { float32: 2e-6, float16: 1.5e-3, bfloat16: 1e-2, float64: 1e-12 }[dtype as 'float32'] ?? 0;
}

function close(actual: readonly number[], expected: readonly number[], dtype: DType, what: string, atol = 1e-6): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  const t = tol(dtype);
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    assert.ok(Math.abs(a - e) <= atol * (dtype === 'float32' || dtype === 'float64' ? 1 : 100) + t * Math.abs(e), `${what} [${dtype}] element ${i}: got ${a}, expected ${e}`);
  }
}

const vals = (t: kiln.Tensor): number[] => t.toFlatArray();
const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));
function erf(x: number): number {
  // Abramowitz-Stegun 7.1.26 is too coarse for a reference; integrate the series instead.
  let sum = 0;
  let term = x;
  for (let n = 0; n < 200; n++) {
    sum += term / (2 * n + 1);
    term *= (-x * x) / (n + 1);
    if (Math.abs(term) < 1e-17) break;
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}

function refRms(x: number[], w: number[], h: number, eps: number): number[] {
  const out: number[] = [];
  for (let r = 0; r < x.length / h; r++) {
    let ss = 0;
    for (let i = 0; i < h; i++) ss += x[r * h + i]! ** 2;
    const inv = 1 / Math.sqrt(ss / h + eps);
    for (let i = 0; i < h; i++) out.push(x[r * h + i]! * inv * w[i]!);
  }
  return out;
}

for (const dtype of FLOATS) {
  test(`rmsNorm, fusedAddRmsNorm, addRmsNorm match float64 loops [${dtype}]`, () => {
    const x = rand([3, 2, 16], 1, 'strided', dtype);
    const res = rand([3, 2, 16], 2, 'contiguous', dtype);
    const w = rand([16], 3, 'contiguous', dtype);
    const y = llm.rmsNorm(x, w, 1e-5);
    assert.deepEqual(y.shape, [3, 2, 16]);
    close(vals(y), refRms(vals(x), vals(w), 16, 1e-5), dtype, 'rmsNorm');
    // The sum is stored in the dtype first (vLLM stores residual, then normalises what it stored).
    const sum = vals(kiln.add(x, res));
    const o = llm.addRmsNorm(x, res, w, 1e-5);
    close(vals(o.residual), sum, dtype, 'addRmsNorm residual');
    close(vals(o.out), refRms(sum, vals(w), 16, 1e-5), dtype, 'addRmsNorm out');
    const xi = kiln.clone(x);
    const ri = kiln.clone(res);
    const f = llm.fusedAddRmsNorm(xi, ri, w, 1e-5);
    assert.equal(f.input, xi, 'fusedAddRmsNorm returns its input tensor');
    assert.equal(f.residual, ri);
    close(vals(ri), sum, dtype, 'fusedAddRmsNorm residual');
    close(vals(xi), refRms(sum, vals(w), 16, 1e-5), dtype, 'fusedAddRmsNorm input');
  });

  test(`siluAndMul and geluAndMul match float64 loops [${dtype}]`, () => {
    const x = rand([4, 12], 4, 'transposed', dtype, -4, 4);
    const v = vals(x);
    const refGated = (act: (a: number) => number): number[] => {
      const out: number[] = [];
      for (let r = 0; r < 4; r++) for (let i = 0; i < 6; i++) out.push(act(v[r * 12 + i]!) * v[r * 12 + 6 + i]!);
      return out;
    };
    close(vals(llm.siluAndMul(x)), refGated((a) => a * sigmoid(a)), dtype, 'siluAndMul');
    close(vals(llm.geluAndMul(x)), refGated((a) => 0.5 * a * (1 + erf(a / Math.SQRT2))), dtype, 'geluAndMul none');
    const k = Math.sqrt(2 / Math.PI);
    close(vals(llm.geluAndMul(x, 'tanh')), refGated((a) => 0.5 * a * (1 + Math.tanh(k * (a + 0.044715 * a ** 3)))), dtype, 'geluAndMul tanh');
  });

  test(`rotaryEmbedding (neox and gpt-j, partial rotary dim) matches float64 loops [${dtype}]`, () => {
    const tokens = 3;
    const headSize = 8;
    for (const [isNeox, rot] of [[true, 8], [false, 8], [true, 4], [false, 6]] as const) {
      const cache = ropeCache(20, rot, 'float32');
      const pos = makeTensor(randomInts(tokens, 7, 0, 20), [tokens], 'int32');
      const q = rand([tokens, 2 * headSize], 5, 'contiguous', dtype);
      const k = rand([tokens, 1, headSize], 6, 'contiguous', dtype);
      const qv = vals(q);
      const kv = vals(k);
      const cs = vals(cache);
      const p = vals(pos);
      const refRope = (v: number[], heads: number): number[] => {
        const out = [...v];
        for (let t = 0; t < tokens; t++) {
          for (let h = 0; h < heads; h++) {
            const base = (t * heads + h) * headSize;
            for (let i = 0; i < rot / 2; i++) {
              const c = cs[p[t]! * rot + i]!;
              const s = cs[p[t]! * rot + rot / 2 + i]!;
              const [a, b] = isNeox ? [base + i, base + rot / 2 + i] : [base + 2 * i, base + 2 * i + 1];
              out[a] = v[a]! * c - v[b]! * s;
              out[b] = v[b]! * c + v[a]! * s;
            }
          }
        }
        return out;
      };
      const r = llm.rotaryEmbedding(pos, q, k, headSize, cache, isNeox);
      assert.equal(r.query, q);
      close(vals(q), refRope(qv, 2), dtype, `rope query neox=${isNeox} rot=${rot}`);
      close(vals(k), refRope(kv, 1), dtype, `rope key neox=${isNeox} rot=${rot}`);
    }
  });

  test(`moeSum and fusedMoe match float64 loops [${dtype}]`, () => {
    const x3 = rand([3, 2, 5], 8, 'strided', dtype);
    const v3 = vals(x3);
    const sum: number[] = [];
    for (let t = 0; t < 3; t++) for (let i = 0; i < 5; i++) sum.push(v3[t * 10 + i]! + v3[t * 10 + 5 + i]!);
    close(vals(llm.moeSum(x3)), sum, dtype, 'moeSum');

    const [T, H, E, I, K] = [5, 6, 4, 3, 2];
    const x = rand([T, H], 9, 'contiguous', dtype);
    const w13 = rand([E, 2 * I, H], 10, 'contiguous', dtype, -0.7, 0.7);
    const w2 = rand([E, H, I], 11, 'contiguous', dtype, -0.7, 0.7);
    const tw = rand([T, K], 12, 'contiguous', 'float32', 0, 1);
    const ids = routedIds(T, K, E, 13);
    const [xv, av, bv, wv, iv] = [vals(x), vals(w13), vals(w2), vals(tw), vals(ids)];
    const expected: number[] = new Array<number>(T * H).fill(0);
    for (let t = 0; t < T; t++) {
      for (let j = 0; j < K; j++) {
        const e = iv[t * K + j]!;
        const gu: number[] = [];
        for (let o = 0; o < 2 * I; o++) {
          let s = 0;
          for (let i = 0; i < H; i++) s += xv[t * H + i]! * av[(e * 2 * I + o) * H + i]!;
          gu.push(s);
        }
        const act = Array.from({ length: I }, (_, i) => gu[i]! * sigmoid(gu[i]!) * gu[I + i]!);
        for (let o = 0; o < H; o++) {
          let s = 0;
          for (let i = 0; i < I; i++) s += act[i]! * bv[(e * H + o) * I + i]!;
          expected[t * H + o]! += wv[t * K + j]! * s;
        }
      }
    }
    close(vals(llm.fusedMoe(x, w13, w2, tw, ids)), expected, dtype, 'fusedMoe', 1e-5);
  });

  test(`mhcPre, mhcPost and mhcHeadCollapse match float64 loops [${dtype}]`, () => {
    const [N, n, H] = [3, 3, 4];
    const streams = rand([N, n, H], 14, 'transposed', dtype);
    const phi = rand([n * (n + 2), n * H], 15, 'contiguous', 'float32', -0.4, 0.4);
    const alpha = rand([3], 16, 'contiguous', 'float32', 0.5, 1.5);
    const bias = rand([n * (n + 2)], 17, 'contiguous', 'float32', -1, 1);
    const [sv, pv, av, bv] = [vals(streams), vals(phi), vals(alpha), vals(bias)];
    const iters = 20;
    const eps = 1e-6;
    const expIn: number[] = [];
    const expPost: number[] = [];
    const expComb: number[] = [];
    const mixOf = (t: number, rows: number, ph: number[]): number[] => {
      const v = sv.slice(t * n * H, (t + 1) * n * H);
      const r = Math.sqrt(v.reduce((s, a) => s + a * a, 0) / v.length + eps);
      return Array.from({ length: rows }, (_, k) => v.reduce((s, a, i) => s + a * ph[k * n * H + i]!, 0) / r);
    };
    for (let t = 0; t < N; t++) {
      const m = mixOf(t, n * (n + 2), pv);
      const pre = Array.from({ length: n }, (_, i) => sigmoid(av[0]! * m[i]! + bv[i]!) + 1e-6);
      for (let i = 0; i < n; i++) expPost.push(2 * sigmoid(av[1]! * m[n + i]! + bv[n + i]!));
      // Sinkhorn-Knopp written from the paper: exp, then alternate row and column normalisation.
      let M = Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => Math.exp(av[2]! * m[2 * n + i * n + j]! + bv[2 * n + i * n + j]!)));
      const rowNorm = (A: number[][]): number[][] => A.map((row) => row.map((a) => a / (row.reduce((s, b) => s + b, 0) + eps)));
      const colNorm = (A: number[][]): number[][] => A.map((row) => row.map((a, j) => a / (A.reduce((s, r2) => s + r2[j]!, 0) + eps)));
      M = rowNorm(M).map((row) => row.map((a) => a + eps));
      M = colNorm(M);
      for (let k = 1; k < iters; k++) M = colNorm(rowNorm(M));
      expComb.push(...M.flat());
      for (let o = 0; o < H; o++) expIn.push(pre.reduce((s, p, i) => s + p * sv[(t * n + i) * H + o]!, 0));
    }
    const pre = llm.mhcPre(streams, phi, alpha, bias, { preEps: 1e-6, sinkhornIters: iters, sinkhornEps: eps, rmsEps: eps });
    const cd = dtype === 'float64' ? 'float64' : 'float32';
    assert.equal(pre.post.dtype, cd);
    assert.equal(pre.layerInput.dtype, dtype);
    close(vals(pre.layerInput), expIn, dtype, 'mhcPre layerInput', 1e-5);
    close(vals(pre.post), expPost, cd, 'mhcPre post', 1e-5);
    close(vals(pre.comb), expComb, cd, 'mhcPre comb', 1e-5);
    // Doubly stochastic: columns sum to 1 (last step), rows nearly so after 20 rounds.
    const cv = vals(pre.comb);
    for (let t = 0; t < N; t++) {
      for (let j = 0; j < n; j++) {
        let col = 0;
        let row = 0;
        for (let i = 0; i < n; i++) {
          col += cv[t * n * n + i * n + j]!;
          row += cv[t * n * n + j * n + i]!;
        }
        assert.ok(Math.abs(col - 1) < 1e-4 && Math.abs(row - 1) < 1e-3, `comb not doubly stochastic: col ${col}, row ${row}`);
      }
    }

    const layerOut = rand([N, H], 18, 'contiguous', dtype);
    const lo = vals(layerOut);
    const expOut: number[] = [];
    for (let t = 0; t < N; t++) {
      for (let k = 0; k < n; k++) {
        for (let o = 0; o < H; o++) {
          let s = expPost[t * n + k]! * lo[t * H + o]!;
          for (let j = 0; j < n; j++) s += expComb[t * n * n + j * n + k]! * sv[(t * n + j) * H + o]!;
          expOut.push(s);
        }
      }
    }
    close(vals(llm.mhcPost(layerOut, streams, pre.post, pre.comb)), expOut, dtype, 'mhcPost', 1e-4);

    const hphi = rand([n, n * H], 19, 'contiguous', 'float32', -0.4, 0.4);
    const hb = rand([n], 20, 'contiguous', 'float32');
    const ha = rand([1], 21, 'contiguous', 'float32', 0.5, 1.5);
    const expHead: number[] = [];
    for (let t = 0; t < N; t++) {
      const m = mixOf(t, n, vals(hphi));
      const w = m.map((mi, i) => sigmoid(vals(ha)[0]! * mi + vals(hb)[i]!) + 0.01);
      for (let o = 0; o < H; o++) expHead.push(w.reduce((s, wi, i) => s + wi * sv[(t * n + i) * H + o]!, 0));
    }
    close(vals(llm.mhcHeadCollapse(streams, hphi, ha, hb, { rmsEps: eps, eps: 0.01 })), expHead, dtype, 'mhcHeadCollapse', 1e-5);
  });
}

/** Reference routing: indices sorted by (score desc, index asc). */
function refTopk(scores: number[], k: number): number[] {
  return scores.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]).slice(0, k).map((p) => p[1]);
}

for (const dtype of ['float32', 'float16', 'bfloat16', 'float64'] as DType[]) {
  test(`topkSoftmax and groupedTopk match float64 references [${dtype}]`, () => {
    const [T, E] = [4, 8];
    const g = rand([T, E], 22, 'contiguous', dtype, -3, 3);
    const gv = vals(g);
    for (const renorm of [false, true]) {
      const r = llm.topkSoftmax(g, 3, renorm);
      assert.equal(r.weights.dtype, dtype === 'float64' ? 'float64' : 'float32');
      assert.equal(r.ids.dtype, 'int32');
      const ew: number[] = [];
      const ei: number[] = [];
      for (let t = 0; t < T; t++) {
        const row = gv.slice(t * E, (t + 1) * E);
        const m = Math.max(...row);
        const z = row.reduce((s, a) => s + Math.exp(a - m), 0);
        const p = row.map((a) => Math.exp(a - m) / z);
        const top = refTopk(p, 3);
        const s = top.reduce((a, i) => a + p[i]!, 0);
        ei.push(...top);
        ew.push(...top.map((i) => (renorm ? p[i]! / s : p[i]!)));
      }
      assert.deepEqual(vals(r.ids), ei);
      close(vals(r.weights), ew, 'float32', `topkSoftmax renorm=${renorm}`);
    }
    // DeepSeek-V3: sigmoid scores, bias for selection only, groups ranked by their top-2 sum.
    const bias = rand([E], 23, 'contiguous', 'float32', -0.3, 0.3);
    const bv = vals(bias);
    const [G, TG, K, scale] = [4, 2, 3, 2.5];
    const r = llm.groupedTopk(g, K, true, { numExpertGroup: G, topkGroup: TG, scoringFunc: 'sigmoid', eScoreCorrectionBias: bias, routedScalingFactor: scale });
    const ew: number[] = [];
    const ei: number[] = [];
    const per = E / G;
    for (let t = 0; t < T; t++) {
      const sc = gv.slice(t * E, (t + 1) * E).map(sigmoid);
      const biased = sc.map((s, i) => s + bv[i]!);
      const gs = Array.from({ length: G }, (_, gi) => {
        const grp = biased.slice(gi * per, (gi + 1) * per).sort((a, b) => b - a);
        return grp[0]! + grp[1]!;
      });
      const keep = new Set(refTopk(gs, TG));
      const masked = biased.map((b, i) => (keep.has(Math.floor(i / per)) ? b : -Infinity));
      const top = refTopk(masked, K);
      const s = top.reduce((a, i) => a + sc[i]!, 0);
      ei.push(...top);
      ew.push(...top.map((i) => (sc[i]! / s) * scale));
    }
    assert.deepEqual(vals(r.ids), ei);
    close(vals(r.weights), ew, 'float32', 'groupedTopk');
  });
}

test('the correction bias changes which experts are selected but not the weights of the chosen', () => {
  const g = makeTensor([0, 0, 0, 0, 1, 0.9, 0.8, 0.7], [1, 8]);
  const plain = llm.groupedTopk(g, 2, false, { numExpertGroup: 2, topkGroup: 1, scoringFunc: 'sigmoid' });
  assert.deepEqual(vals(plain.ids), [4, 5]);
  const bias = makeTensor([5, 5, 0, 0, 0, 0, 0, 0], [8]);
  const biased = llm.groupedTopk(g, 2, false, { numExpertGroup: 2, topkGroup: 1, scoringFunc: 'sigmoid', eScoreCorrectionBias: bias });
  assert.deepEqual(vals(biased.ids), [0, 1]);
  close(vals(biased.weights), [0.5, 0.5], 'float32', 'unbiased sigmoid(0)');
});

test('errors name the op, the argument, shapes and dtypes', () => {
  const x = kiln.randn([2, 8]);
  assert.throws(() => llm.rmsNorm(x, kiln.randn([7])), /llm\.rmsNorm: argument 'weight' must have shape \[8\] \(the last dim of input \[2, 8\]\), got \[7\] float32/);
  assert.throws(() => llm.rmsNorm(x, kiln.randn([8]).to('float16')), /llm\.rmsNorm: arguments 'input' \(\[2, 8\] float32\) and 'weight' \(\[8\] float16\) must have the same dtype/);
  assert.throws(() => llm.rmsNorm(kiln.ones([2, 8], { dtype: 'int32' }), kiln.ones([8], { dtype: 'int32' })), /llm\.rmsNorm: argument 'input' \(\[2, 8\] int32\) must be float32/);
  assert.throws(() => llm.rmsNorm(x, kiln.randn([8]), -1), /llm\.rmsNorm: (argument )?'eps' must be a (finite|non-negative) number.*, got -1/);
  assert.throws(() => llm.siluAndMul(kiln.randn([2, 7])), /llm\.siluAndMul: the last dim of 'input' must be even .*\[2, 7\] float32/);
  assert.throws(() => llm.geluAndMul(x, 'fast' as 'none'), /llm\.geluAndMul: argument 'approximate' must be one of 'none', 'tanh', got "fast"/);
  assert.throws(() => llm.fusedAddRmsNorm(x, kiln.randn([2, 4]), kiln.randn([8])), /llm\.fusedAddRmsNorm: argument 'residual' \(\[2, 4\] float32\) must have the shape of 'input' \(\[2, 8\] float32\)/);
  const pos = makeTensor([0, 99], [2], 'int64');
  assert.throws(() => llm.rotaryEmbedding(pos, kiln.randn([2, 8]), null, 8, ropeCache(4, 8)), /llm\.rotaryEmbedding: positions\[1\] = 99 is outside the cosSinCache's 4 positions/);
  assert.throws(() => llm.rotaryEmbedding(makeTensor([0, 1], [2], 'int64'), kiln.randn([2, 10]), null, 4, ropeCache(4, 4)), /last dim of 'query' \(\[2, 10\] float32\) must be a multiple of headSize 4/);
  assert.throws(() => llm.rotaryEmbedding(makeTensor([0, 1], [2], 'int64'), kiln.randn([2, 8]), null, 4, ropeCache(4, 6)), /rotary dim .* must be even and in \[2, headSize=4\], got 6/);
  assert.throws(() => llm.rotaryEmbedding(kiln.randn([2]), kiln.randn([2, 8]), null, 8, ropeCache(4, 8)), /argument 'positions' \(\[2\] float32\) must be int32 or int64/);
  assert.throws(() => llm.topkSoftmax(kiln.randn([3, 4]), 5), /llm\.topkSoftmax: topk=5 exceeds the number of experts 4/);
  assert.throws(() => llm.groupedTopk(kiln.randn([3, 6]), 2, true, { numExpertGroup: 4, topkGroup: 2 }), /the 6 experts of 'gatingOutput' \[3, 6\] float32 do not split into numExpertGroup=4/);
  assert.throws(() => llm.groupedTopk(kiln.randn([3, 8]), 5, true, { numExpertGroup: 4, topkGroup: 2 }), /topk=5 exceeds the 4 experts in the topkGroup=2 selected groups/);
  assert.throws(() => llm.moeSum(kiln.randn([3, 4])), /llm\.moeSum: argument 'input' must be 3-d \[tokens, topk, hidden\], got \[3, 4\] float32/);
  const x2 = kiln.randn([2, 8]);
  assert.throws(() => llm.fusedAddRmsNorm(x2, x2, kiln.ones([8])), /llm\.fusedAddRmsNorm: arguments 'input' \[2, 8\] and 'residual' \[2, 8\] overlap in memory/);
  const qk = kiln.randn([2, 16]);
  assert.throws(() => llm.rotaryEmbedding(makeTensor([1, 2], [2], 'int64'), qk.narrow(1, 0, 8), qk.narrow(1, 4, 8), 8, ropeCache(4, 8)), /llm\.rotaryEmbedding: arguments 'query' .* and 'key' .* overlap in memory/);
  // Disjoint views of one storage are fine (vLLM passes q and k as slices of one qkv tensor).
  llm.rotaryEmbedding(makeTensor([1, 2], [2], 'int64'), qk.narrow(1, 0, 8), qk.narrow(1, 8, 8), 8, ropeCache(4, 8));
  const ids = makeTensor([0, 7], [2, 1], 'int32');
  assert.throws(() => llm.fusedMoe(kiln.randn([2, 4]), kiln.randn([2, 6, 4]), kiln.randn([2, 4, 3]), kiln.ones([2, 1]), ids), /llm\.fusedMoe: topkIds\[1, 0\] = 7 is not an expert index in \[0, 2\)/);
  assert.throws(() => llm.fusedMoe(kiln.randn([2, 4]), kiln.randn([2, 6, 4]), kiln.randn([2, 4, 2]), kiln.ones([2, 1]), ids), /argument 'w2' must be \[experts=2, hidden=4, intermediate=3\], got \[2, 4, 2\] float32/);
  assert.throws(() => llm.mhcPre(kiln.randn([2, 3, 4]), kiln.randn([15, 11]), kiln.ones([3]), kiln.zeros([15])), /llm\.mhcPre: argument 'phi' must have shape \[15, 12\]/);
  assert.throws(() => llm.mhcPost(kiln.randn([2, 4]), kiln.randn([2, 3, 4]), kiln.ones([2, 2]), kiln.ones([2, 3, 3])), /llm\.mhcPost: argument 'post' must have shape \[2, 3\] \(one weight per stream and token\), got \[2, 2\] float32/);
});

test('backward: rmsNorm (input, weight), siluAndMul and geluAndMul match finite differences in float64', () => {
  const x = rand([3, 5], 30, 'contiguous', 'float64').requiresGrad_();
  const w = rand([5], 31, 'contiguous', 'float64').requiresGrad_();
  assert.equal(kiln.gradcheck((a, b) => llm.rmsNorm(a!, b!, 1e-3), [x, w]), true);
  const g = rand([2, 3, 8], 32, 'contiguous', 'float64', -3, 3).requiresGrad_();
  assert.equal(kiln.gradcheck((a) => llm.siluAndMul(a!), [g]), true);
  assert.equal(kiln.gradcheck((a) => llm.geluAndMul(a!, 'none'), [g]), true);
  assert.equal(kiln.gradcheck((a) => llm.geluAndMul(a!, 'tanh'), [g]), true);
});

test('backward of halves runs in float32 and returns the input dtype', () => {
  const x = rand([2, 6], 33, 'contiguous', 'bfloat16').requiresGrad_();
  const w = rand([6], 34, 'contiguous', 'bfloat16').requiresGrad_();
  llm.siluAndMul(llm.rmsNorm(x, w)).sum().backward();
  assert.equal(x.grad!.dtype, 'bfloat16');
  assert.equal(w.grad!.dtype, 'bfloat16');
  // Against the float32 computation of the same values.
  const x32 = x.detach().to('float32').requiresGrad_();
  const w32 = w.detach().to('float32').requiresGrad_();
  llm.siluAndMul(llm.rmsNorm(x32, w32)).sum().backward();
  close(vals(x.grad!), vals(x32.grad!), 'bfloat16', 'bf16 grad x', 1e-4);
});

test('mhcPre with one Sinkhorn round: row softmax (+eps) then one column normalisation', () => {
  const [N, n, H] = [2, 3, 2];
  const streams = rand([N, n, H], 40);
  const phi = rand([n * (n + 2), n * H], 41, 'contiguous', 'float32', -1, 1);
  const alpha = makeTensor([1, 1, 2], [3]);
  const bias = rand([n * (n + 2)], 42);
  const eps = 1e-3;
  const { comb } = llm.mhcPre(streams, phi, alpha, bias, { sinkhornIters: 1, sinkhornEps: eps, rmsEps: 1e-6 });
  const [sv, pv, bv] = [vals(streams), vals(phi), vals(bias)];
  const expected: number[] = [];
  for (let t = 0; t < N; t++) {
    const v = sv.slice(t * n * H, (t + 1) * n * H);
    const r = Math.sqrt(v.reduce((s, a) => s + a * a, 0) / v.length + 1e-6);
    const logit = (i: number, j: number): number => (2 * v.reduce((s, a, k) => s + a * pv[(2 * n + i * n + j) * n * H + k]!, 0)) / r + bv[2 * n + i * n + j]!;
    const M = Array.from({ length: n }, (_, i) => {
      const z = Array.from({ length: n }, (_, j) => Math.exp(logit(i, j)));
      const s = z.reduce((a, b) => a + b, 0);
      return z.map((e) => e / s + eps);
    });
    const colSum = Array.from({ length: n }, (_, j) => M.reduce((s, row) => s + row[j]!, 0) + eps);
    expected.push(...M.flatMap((row) => row.map((a, j) => a / colSum[j]!)));
  }
  close(vals(comb), expected, 'float32', 'one Sinkhorn round', 1e-6);
});

test('autograd: in-place library ops refuse leaves that require grad and have no derivative', () => {
  const x = kiln.randn([2, 4]).requiresGrad_();
  const r = kiln.randn([2, 4]);
  assert.throws(() => llm.fusedAddRmsNorm(x, r, kiln.ones([4])), /llm\.fusedAddRmsNorm: a leaf tensor \[2, 4\] that requires grad is being used in an in-place operation/);
  const y = kiln.mul(x, 1);
  llm.fusedAddRmsNorm(y, r, kiln.ones([4]));
  assert.throws(() => y.sum().backward(), /the derivative for 'llm\.fusedAddRmsNorm' is not implemented/);
  // The out-of-place form trains: gradients reach both inputs.
  const a = kiln.randn([2, 4]).requiresGrad_();
  const b = kiln.randn([2, 4]).requiresGrad_();
  const o = llm.addRmsNorm(a, b, kiln.ones([4]));
  kiln.add(o.out.sum(), o.residual.sum()).backward();
  assert.deepEqual(a.grad!.shape, [2, 4]);
  close(vals(a.grad!), vals(b.grad!), 'float32', 'd/da = d/db for a + b');
});
