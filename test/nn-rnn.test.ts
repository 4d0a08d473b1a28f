/** nn.LSTM and nn.GRU against float64 recurrences written here; names, layouts, states, gradcheck, compile. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { randomValues } from './helpers/make.js';

const { nn } = kiln;
const F64 = { dtype: 'float64' as const };
const TOL = { atol: 1e-12, rtol: 1e-10 };
type Mat = number[][];

const sig = (x: number): number => 1 / (1 + Math.exp(-x));
/** W [G*H, I] x [I] + b. */
function mv(W: number[], b: number[] | null, x: number[], rows: number): number[] {
  const I = x.length;
  return Array.from({ length: rows }, (_, r) => x.reduce((s, v, i) => s + W[r * I + i]! * v, b ? b[r]! : 0));
}

interface P { wih: number[]; whh: number[]; bih: number[] | null; bhh: number[] | null }

function lstmCell(x: number[], h: number[], c: number[], p: P, H: number): [number[], number[]] {
  const g = mv(p.wih, p.bih, x, 4 * H).map((v, r) => v + mv(p.whh, p.bhh, h, 4 * H)[r]!);
  const c2 = c.map((cv, j) => sig(g[H + j]!) * cv + sig(g[j]!) * Math.tanh(g[2 * H + j]!));
  return [c2.map((cv, j) => sig(g[3 * H + j]!) * Math.tanh(cv)), c2];
}

function gruCell(x: number[], h: number[], p: P, H: number): number[] {
  const xi = mv(p.wih, p.bih, x, 3 * H);
  const hh = mv(p.whh, p.bhh, h, 3 * H);
  return h.map((hv, j) => {
    const r = sig(xi[j]! + hh[j]!);
    const z = sig(xi[H + j]! + hh[H + j]!);
    const n = Math.tanh(xi[2 * H + j]! + r * hh[2 * H + j]!);
    return (1 - z) * n + z * hv;
  });
}

/**
 * Reference multi-layer (bi)directional run for one sequence xs [T][I]; h0/c0 [L*D][H].
 * Returns output [T][D*H] and final h, c [L*D][H].
 */
function refRun(kind: 'lstm' | 'gru', xs: Mat, params: (l: number, d: number) => P, L: number, D: number, H: number, h0: Mat, c0: Mat): { out: Mat; h: Mat; c: Mat } {
  let inp = xs;
  const hN: Mat = [];
  const cN: Mat = [];
  for (let l = 0; l < L; l++) {
    const outs: Mat[] = [];
    for (let d = 0; d < D; d++) {
      let h = h0[l * D + d]!;
      let c = c0[l * D + d]!;
      const o: Mat = new Array(inp.length);
      for (let s = 0; s < inp.length; s++) {
        const t = d === 1 ? inp.length - 1 - s : s;
        if (kind === 'lstm') [h, c] = lstmCell(inp[t]!, h, c, params(l, d), H);
        else h = gruCell(inp[t]!, h, params(l, d), H);
        o[t] = h;
      }
      outs.push(o);
      hN.push(h);
      cN.push(c);
    }
    inp = inp.map((_, t) => outs.flatMap((o) => o[t]!));
  }
  return { out: inp, h: hN, c: cN };
}

function paramsOf(m: kiln.nn.Module): (l: number, d: number) => P {
  const sd = m.stateDict();
  return (l, d) => {
    const s = d === 1 ? '_reverse' : '';
    const get = (k: string): number[] | null => (sd[`${k}_l${l}${s}`] ? sd[`${k}_l${l}${s}`]!.toFlatArray() : null);
    return { wih: get('weight_ih')!, whh: get('weight_hh')!, bih: get('bias_ih'), bhh: get('bias_hh') };
  };
}

test('parameter names, shapes and order are PyTorch\'s; weights U(-1/sqrt(H), 1/sqrt(H))', () => {
  const lstm = new nn.LSTM(3, 4, { numLayers: 2, bidirectional: true });
  const names = [...lstm.namedParameters()].map(([n, p]) => `${n} ${p.shape.join('x')}`);
  assert.deepEqual(names.slice(0, 8), [
    'weight_ih_l0 16x3', 'weight_hh_l0 16x4', 'bias_ih_l0 16', 'bias_hh_l0 16',
    'weight_ih_l0_reverse 16x3', 'weight_hh_l0_reverse 16x4', 'bias_ih_l0_reverse 16', 'bias_hh_l0_reverse 16',
  ]);
  assert.equal(names[8], 'weight_ih_l1 16x8');
  assert.equal(names.length, 16);
  for (const p of lstm.parameters()) assert.ok(p.toFlatArray().every((v) => Math.abs(v) <= 0.5));
  const gru = new nn.GRU(3, 5, { bias: false });
  assert.deepEqual([...gru.namedParameters()].map(([n, p]) => `${n} ${p.shape.join('x')}`), ['weight_ih_l0 15x3', 'weight_hh_l0 15x5']);
});

for (const kind of ['lstm', 'gru'] as const) {
  test(`${kind}: 2 layers, bidirectional, initial states, seq-first and batch-first match the reference`, () => {
    const [T, N, I, H, L, D] = [4, 2, 3, 3, 2, 2];
    const opts = { numLayers: L, bidirectional: true, dtype: 'float64' as const, generator: new kiln.Generator(5) };
    const m = kind === 'lstm' ? new nn.LSTM(I, H, opts) : new nn.GRU(I, H, opts);
    const xv = randomValues(N * T * I, 1); // [N, T, I]
    const h0v = randomValues(L * D * N * H, 2); // [L*D, N, H]
    const c0v = randomValues(L * D * N * H, 3);
    const params = paramsOf(m);
    const outRef: number[][] = []; // per n: [T * D * H]
    const hRef: number[][][] = []; // per n: [L*D][H]
    const cRef: number[][][] = [];
    for (let n = 0; n < N; n++) {
      const xs = Array.from({ length: T }, (_, t) => xv.slice((n * T + t) * I, (n * T + t + 1) * I));
      const pick = (v: number[]): Mat => Array.from({ length: L * D }, (_, k) => v.slice((k * N + n) * H, (k * N + n + 1) * H));
      const r = refRun(kind, xs, params, L, D, H, pick(h0v), pick(c0v));
      outRef.push(r.out.flat());
      hRef.push(r.h);
      cRef.push(r.c);
    }
    const x = kiln.tensor(xv, F64).reshape([N, T, I]);
    const h0 = kiln.tensor(h0v, F64).reshape([L * D, N, H]);
    const c0 = kiln.tensor(c0v, F64).reshape([L * D, N, H]);
    const r = m instanceof nn.LSTM ? m.forward(x.transpose(0, 1), { h: h0, c: c0 }) : m.forward(x.transpose(0, 1), { h: h0 });
    // output [T, N, D*H]
    const outTN = Array.from({ length: T }, (_, t) => Array.from({ length: N }, (_, n) => outRef[n]!.slice(t * D * H, (t + 1) * D * H))).flat(2);
    assertClose(r.output, outTN, [T, N, D * H], TOL);
    const hFlat = Array.from({ length: L * D }, (_, k) => Array.from({ length: N }, (_, n) => hRef[n]![k]!)).flat(2);
    assertClose(r.h, hFlat, [L * D, N, H], TOL);
    if ('c' in r) assertClose((r as kiln.nn.LSTMOutput).c, Array.from({ length: L * D }, (_, k) => Array.from({ length: N }, (_, n) => cRef[n]![k]!)).flat(2), [L * D, N, H], TOL);

    const bf = kind === 'lstm' ? new nn.LSTM(I, H, { ...opts, batchFirst: true }) : new nn.GRU(I, H, { ...opts, batchFirst: true });
    bf.loadStateDict(m.stateDict());
    const rb = bf instanceof nn.LSTM ? bf.forward(x, { h: h0, c: c0 }) : bf.forward(x, { h: h0 });
    assertClose(rb.output, outRef.flat(), [N, T, D * H], TOL);
    assertClose(rb.h, hFlat, [L * D, N, H], TOL);
  });

  test(`${kind}: zero initial states by default; unbatched [T, I] input`, () => {
    const [T, I, H] = [3, 2, 4];
    const m = kind === 'lstm' ? new nn.LSTM(I, H, { dtype: 'float64' }) : new nn.GRU(I, H, { dtype: 'float64' });
    const xv = randomValues(T * I, 9);
    const xs = Array.from({ length: T }, (_, t) => xv.slice(t * I, (t + 1) * I));
    const z = [new Array<number>(H).fill(0)];
    const ref = refRun(kind, xs, paramsOf(m), 1, 1, H, z, z);
    const r = m.forward(kiln.tensor(xv, F64).reshape([T, I]));
    assertClose(r.output, ref.out.flat(), [T, H], TOL);
    assertClose(r.h, ref.h.flat(), [1, H], TOL);
    if ('c' in r) assertClose((r as kiln.nn.LSTMOutput).c, ref.c.flat(), [1, H], TOL);
  });
}

test('LSTM and GRU gradients match finite differences (input, initial state, weights)', () => {
  const lstm = new nn.LSTM(2, 2, { numLayers: 2, bidirectional: true, dtype: 'float64', generator: new kiln.Generator(3) });
  const ls = lstm.stateDict();
  const x = kiln.tensor(randomValues(3 * 2 * 2, 4), F64).reshape([3, 2, 2]).requiresGrad_();
  const h0 = kiln.tensor(randomValues(4 * 2 * 2, 5), F64).reshape([4, 2, 2]).requiresGrad_();
  kiln.gradcheck((xi, hi, ...ws) => {
    void ws;
    const r = lstm.forward(xi!, { h: hi });
    return [r.output, r.h, r.c];
  }, [x, h0, ls.weight_ih_l0!, ls.weight_hh_l1_reverse!, ls.bias_hh_l0!]);
  const gru = new nn.GRU(2, 3, { batchFirst: true, dtype: 'float64', generator: new kiln.Generator(4) });
  const xb = kiln.tensor(randomValues(2 * 3 * 2, 6), F64).reshape([2, 3, 2]).requiresGrad_();
  kiln.gradcheck((xi) => {
    const r = gru.forward(xi!);
    return [r.output, r.h];
  }, [xb, gru.stateDict().weight_hh_l0!, gru.stateDict().bias_hh_l0!]);
});

test('kiln.compile(GRU forward) equals eager', () => {
  const gru = new nn.GRU(3, 4, { numLayers: 2, batchFirst: true, generator: new kiln.Generator(8) });
  gru.eval();
  const f = (x: kiln.Tensor): kiln.Tensor[] => {
    const r = gru.forward(x);
    return [r.output, r.h];
  };
  const cf = kiln.compile(f);
  const x = kiln.tensor(randomValues(2 * 5 * 3, 10)).reshape([2, 5, 3]);
  const [eo, eh] = kiln.noGrad(() => f(x));
  const [co, ch] = kiln.noGrad(() => cf(x));
  assertClose(co!, eo!.toFlatArray(), [2, 5, 4], { atol: 1e-6, rtol: 1e-5 });
  assertClose(ch!, eh!.toFlatArray(), [2, 2, 4], { atol: 1e-6, rtol: 1e-5 });
});

test('RNN errors name the module, the argument and the shapes', () => {
  const lstm = new nn.LSTM(3, 4, { numLayers: 2 });
  assertThrowsWith(() => lstm.forward(kiln.zeros([5, 2, 4])), 'nn.LSTM', "'input'", 'inputSize 3', '[5, 2, 4]');
  assertThrowsWith(() => lstm.forward(kiln.zeros([5, 2, 3]), { h: kiln.zeros([1, 2, 4]) }), 'nn.LSTM', "'h'", '[2, 2, 4]', '[1, 2, 4]');
  assertThrowsWith(() => new nn.GRU(3, 0), 'nn.GRU', 'hiddenSize');
  assert.throws(() => new nn.GRU(3, 4, { bidirectinal: true } as never), /nn\.GRU: unknown option 'bidirectinal' \(did you mean 'bidirectional'\?\)/);
});
