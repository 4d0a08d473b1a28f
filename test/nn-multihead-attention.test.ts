/** nn.MultiheadAttention against a float64 reference written here; masks, layouts, state dict names, gradcheck. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { randomValues } from './helpers/make.js';

const { nn } = kiln;
const F64 = { dtype: 'float64' as const };
const TOL = { atol: 1e-12, rtol: 1e-10 };

interface Ref {
  out: number[];
  /** [N, L, S] averaged over heads, or [N, H, L, S]. */
  weights: number[];
}

/**
 * Batch-first float64 MHA: q [N, L, E], k/v [N, S, E] flat; W [3E, E], b [3E], Wo [E, E], bo [E];
 * maskAdd(n, h, i, j) is added to the scaled scores (-Infinity to mask).
 */
function refMha(q: number[], k: number[], v: number[], N: number, L: number, S: number, E: number, H: number, W: number[], b: number[], Wo: number[], bo: number[], maskAdd: (n: number, h: number, i: number, j: number) => number, average: boolean): Ref {
  const D = E / H;
  const lin = (x: number[], rows: number, wOff: number, ww: number[], bb: number[]): number[] => {
    const out: number[] = [];
    for (let r = 0; r < rows; r++) for (let o = 0; o < E; o++) {
      let s = bb[wOff + o]!;
      for (let e = 0; e < E; e++) s += x[r * E + e]! * ww[(wOff + o) * E + e]!;
      out.push(s);
    }
    return out;
  };
  const Q = lin(q, N * L, 0, W, b);
  const K = lin(k, N * S, E, W, b);
  const V = lin(v, N * S, 2 * E, W, b);
  const ctx = new Array<number>(N * L * E).fill(0);
  const wts = new Array<number>(N * H * L * S).fill(0);
  for (let n = 0; n < N; n++) for (let h = 0; h < H; h++) for (let i = 0; i < L; i++) {
    const sc: number[] = [];
    for (let j = 0; j < S; j++) {
      let s = 0;
      for (let d = 0; d < D; d++) s += Q[(n * L + i) * E + h * D + d]! * K[(n * S + j) * E + h * D + d]!;
      sc.push(s / Math.sqrt(D) + maskAdd(n, h, i, j));
    }
    const m = Math.max(...sc);
    const ex = sc.map((s) => Math.exp(s - m));
    const z = ex.reduce((a, c) => a + c, 0);
    for (let j = 0; j < S; j++) {
      const p = ex[j]! / z;
      wts[((n * H + h) * L + i) * S + j] = p;
      for (let d = 0; d < D; d++) ctx[(n * L + i) * E + h * D + d]! += p * V[(n * S + j) * E + h * D + d]!;
    }
  }
  const out = lin(ctx, N * L, 0, Wo, bo);
  if (!average) return { out, weights: wts };
  const avg: number[] = [];
  for (let n = 0; n < N; n++) for (let i = 0; i < L; i++) for (let j = 0; j < S; j++) {
    let s = 0;
    for (let h = 0; h < H; h++) s += wts[((n * H + h) * L + i) * S + j]!;
    avg.push(s / H);
  }
  return { out, weights: avg };
}

/** [A, B, E] flat -> [B, A, E] flat. */
function swap01(x: number[], A: number, B: number, E: number): number[] {
  const out: number[] = [];
  for (let b = 0; b < B; b++) for (let a = 0; a < A; a++) out.push(...x.slice((a * B + b) * E, (a * B + b + 1) * E));
  return out;
}

function setup(E: number, H: number, options: kiln.nn.MultiheadAttentionOptions = {}) {
  const mha = new nn.MultiheadAttention(E, H, { dtype: 'float64', generator: new kiln.Generator(1), ...options });
  // Non-zero biases so the reference checks where each one goes.
  kiln.noGrad(() => {
    kiln.copy_(mha.in_proj_bias!, kiln.tensor(randomValues(3 * E, 11, -0.5, 0.5), F64));
    kiln.copy_(mha.out_proj.bias!, kiln.tensor(randomValues(E, 12, -0.5, 0.5), F64));
  });
  const p = (t: kiln.Tensor): number[] => t.toFlatArray();
  return { mha, W: p(mha.in_proj_weight), b: p(mha.in_proj_bias!), Wo: p(mha.out_proj.weight), bo: p(mha.out_proj.bias!) };
}

test('state dict names and shapes are PyTorch\'s; in_proj_weight is xavier-uniform, biases zero', () => {
  const mha = new nn.MultiheadAttention(8, 2);
  const sd = mha.stateDict();
  assert.deepEqual(Object.keys(sd).sort(), ['in_proj_bias', 'in_proj_weight', 'out_proj.bias', 'out_proj.weight']);
  assert.deepEqual(sd.in_proj_weight!.shape, [24, 8]);
  const bound = Math.sqrt(6 / (8 + 24));
  assert.ok(sd.in_proj_weight!.toFlatArray().every((x) => Math.abs(x) <= bound));
  assert.ok(sd.in_proj_bias!.toFlatArray().every((x) => x === 0));
  assert.ok(sd['out_proj.bias']!.toFlatArray().every((x) => x === 0));
  assert.deepEqual(Object.keys(new nn.MultiheadAttention(8, 2, { bias: false }).stateDict()).sort(), ['in_proj_weight', 'out_proj.weight']);
});

test('seq-first and batch-first forward with key padding and bool attn masks match the reference, weights averaged or per head', () => {
  const [N, L, S, E, H] = [2, 3, 4, 6, 2];
  const { mha, W, b, Wo, bo } = setup(E, H);
  const q = randomValues(N * L * E, 1);
  const k = randomValues(N * S * E, 2);
  const v = randomValues(N * S * E, 3);
  const kpm = [false, false, true, false, false, false, false, true]; // [N, S]
  const am = [false, true, false, false, false, false, true, false, false, false, false, false]; // [L, S]
  const maskAdd = (n: number, _h: number, i: number, j: number): number => (kpm[n * S + j] || am[i * S + j] ? -Infinity : 0);
  const ref = refMha(q, k, v, N, L, S, E, H, W, b, Wo, bo, maskAdd, true);
  const keyPaddingMask = kiln.tensor(kpm).reshape([N, S]);
  const attnMask = kiln.tensor(am).reshape([L, S]);
  // seq-first: [L, N, E]
  const t = (x: number[], A: number, B: number): kiln.Tensor => kiln.tensor(swap01(x, A, B, E), F64).reshape([B, A, E]);
  const r1 = mha.forward(t(q, N, L), t(k, N, S), t(v, N, S), { keyPaddingMask, attnMask });
  assertClose(r1.output, swap01(ref.out, N, L, E), [L, N, E], TOL);
  assertClose(r1.weights!, ref.weights, [N, L, S], TOL);
  // batch-first, weights per head, float additive masks
  const bf = new nn.MultiheadAttention(E, H, { dtype: 'float64', batchFirst: true });
  bf.loadStateDict(mha.stateDict());
  const perHead = refMha(q, k, v, N, L, S, E, H, W, b, Wo, bo, maskAdd, false);
  const fl = (m: kiln.Tensor): kiln.Tensor => kiln.where(m, -Infinity, 0).to('float64');
  const r2 = bf.forward(kiln.tensor(q, F64).reshape([N, L, E]), kiln.tensor(k, F64).reshape([N, S, E]), kiln.tensor(v, F64).reshape([N, S, E]), { keyPaddingMask: fl(keyPaddingMask), attnMask: fl(attnMask), averageAttnWeights: false });
  assertClose(r2.output, ref.out, [N, L, E], TOL);
  assertClose(r2.weights!, perHead.weights, [N, H, L, S], TOL);
  // needWeights false goes through scaledDotProductAttention: same output, no weights
  const r3 = bf.forward(kiln.tensor(q, F64).reshape([N, L, E]), kiln.tensor(k, F64).reshape([N, S, E]), kiln.tensor(v, F64).reshape([N, S, E]), { keyPaddingMask, attnMask, needWeights: false });
  assertClose(r3.output, ref.out, [N, L, E], TOL);
  assert.equal(r3.weights, null);
});

test('per-head [N * H, L, S] masks, isCausal, unbatched input', () => {
  const [N, L, E, H] = [2, 3, 4, 2];
  const { mha, W, b, Wo, bo } = setup(E, H, { batchFirst: true });
  const x = randomValues(N * L * E, 5);
  const hm = randomValues(N * H * L * L, 6);
  const ref = refMha(x, x, x, N, L, L, E, H, W, b, Wo, bo, (n, h, i, j) => hm[((n * H + h) * L + i) * L + j]!, true);
  const xt = kiln.tensor(x, F64).reshape([N, L, E]);
  const r = mha.forward(xt, xt, xt, { attnMask: kiln.tensor(hm, F64).reshape([N * H, L, L]) });
  assertClose(r.output, ref.out, [N, L, E], TOL);
  const causal = refMha(x, x, x, N, L, L, E, H, W, b, Wo, bo, (_n, _h, i, j) => (j > i ? -Infinity : 0), true);
  for (const needWeights of [true, false]) assertClose(mha.forward(xt, xt, xt, { isCausal: true, needWeights }).output, causal.out, [N, L, E], TOL);
  const one = refMha(x.slice(0, L * E), x.slice(0, L * E), x.slice(0, L * E), 1, L, L, E, H, W, b, Wo, bo, () => 0, true);
  const u = mha.forward(xt.select(0, 0), xt.select(0, 0), xt.select(0, 0));
  assertClose(u.output, one.out, [L, E], TOL);
  assertClose(u.weights!, one.weights, [L, L], TOL);
});

test('MultiheadAttention gradients match finite differences', () => {
  const mha = new nn.MultiheadAttention(4, 2, { dtype: 'float64', batchFirst: true, generator: new kiln.Generator(2) });
  const q = kiln.tensor(randomValues(2 * 3 * 4, 7), F64).reshape([2, 3, 4]).requiresGrad_();
  const kv = kiln.tensor(randomValues(2 * 2 * 4, 8), F64).reshape([2, 2, 4]).requiresGrad_();
  const kpm = kiln.tensor([false, true, false, false]).reshape([2, 2]);
  kiln.gradcheck((x, y, w, wo) => {
    mha.in_proj_weight = w as kiln.nn.Parameter;
    mha.out_proj.weight = wo as kiln.nn.Parameter;
    const r = mha.forward(x!, y!, y!, { keyPaddingMask: kpm });
    return [r.output, r.weights!];
  }, [q, kv, mha.in_proj_weight, mha.out_proj.weight]);
});

test('MultiheadAttention errors name the module, the argument and the shapes', () => {
  assertThrowsWith(() => new nn.MultiheadAttention(6, 4), 'nn.MultiheadAttention', 'embedDim (6)', 'numHeads (4)');
  const mha = new nn.MultiheadAttention(4, 2);
  const x = kiln.zeros([3, 2, 4]);
  assertThrowsWith(() => mha.forward(x, kiln.zeros([3, 2, 5]), kiln.zeros([3, 2, 5])), 'nn.MultiheadAttention', "'key'", '[3, 2, 5]');
  assertThrowsWith(() => mha.forward(x, x, x, { keyPaddingMask: kiln.zeros([3, 2]) }), "'keyPaddingMask'", '[2, 3]', '[3, 2]');
  assertThrowsWith(() => mha.forward(x, x, x, { attnMask: kiln.zeros([2, 3]) }), "'attnMask'", '[3, 3]', '[2, 3]');
  assert.throws(() => mha.forward(x, x, x, { needWeight: false } as never), /unknown option 'needWeight' \(did you mean 'needWeights'\?\)/);
});
