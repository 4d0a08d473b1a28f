/**
 * norm, isclose/allclose, einsum, interpolate, adaptiveAvgPool2d, conv1d and convTranspose2d
 * against float64 references written here as direct loops (einsum by brute force over every label
 * assignment, convTranspose2d by scattering each input pixel), finite-difference gradchecks,
 * kiln.compile against eager, and PyTorch goldens from test/fixtures/op-goldens.json when that
 * file exists (scripts/make_op_goldens.py writes it on a machine with torch).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { gradcheck } from '../src/autograd/gradcheck.js';
import { numel } from '../src/tensor/layout.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { makeTensor, rand, randomValues } from './helpers/make.js';

const leaf = (shape: number[], seed: number): Tensor => makeTensor(randomValues(numel(shape), seed), shape, 'float64').requiresGrad_();
const f64 = (shape: number[], seed: number): Tensor => makeTensor(randomValues(numel(shape), seed), shape, 'float64');
const TOL = { atol: 1e-12, rtol: 1e-10 };

test('norm: fro/2, 1, inf, -inf, 0 and general p, over dims with keepdim', () => {
  const x = f64([3, 4, 5], 1);
  const v = x.toFlatArray();
  const over12 = (f: (row: number[]) => number): number[] => [0, 1, 2].map((i) => f(v.slice(i * 20, i * 20 + 20)));
  const cases: [kiln.NormP, (r: number[]) => number][] = [
    ['fro', (r) => Math.sqrt(r.reduce((a, b) => a + b * b, 0))],
    [2, (r) => Math.sqrt(r.reduce((a, b) => a + b * b, 0))],
    [1, (r) => r.reduce((a, b) => a + Math.abs(b), 0)],
    [Infinity, (r) => Math.max(...r.map(Math.abs))],
    [-Infinity, (r) => Math.min(...r.map(Math.abs))],
    [3, (r) => Math.cbrt(r.reduce((a, b) => a + Math.abs(b) ** 3, 0))],
    [0.5, (r) => r.reduce((a, b) => a + Math.sqrt(Math.abs(b)), 0) ** 2],
  ];
  for (const [p, f] of cases) {
    assertClose(kiln.norm(x, p, [1, 2]), over12(f), [3], TOL);
    assertClose(x.norm({ p, dim: [-1, -2], keepdim: true }), over12(f), [3, 1, 1], TOL);
  }
  assertClose(kiln.norm(x), [Math.sqrt(v.reduce((a, b) => a + b * b, 0))], [], TOL);
  assertClose(kiln.norm(kiln.tensor([0, 2, 0, -1]), 0), [2], []);
  gradcheck((t) => kiln.norm(t, 2, 1), [leaf([3, 4], 2)]);
  gradcheck((t) => kiln.norm(t, 3, [0], true), [leaf([3, 4], 3)]);
  gradcheck((t) => kiln.norm(t, 1), [leaf([3, 4], 4)]);
  gradcheck((t) => kiln.norm(t, Infinity, 1), [leaf([3, 4], 5)]);
  assertThrowsWith(() => kiln.norm(kiln.tensor([1, 2], { dtype: 'int32' })), 'norm', '[2] int32');
});

test('isclose/allclose follow torch: rtol * |other| + atol, infinities, equalNan', () => {
  const a = kiln.tensor([1, 1e-9, Infinity, -Infinity, NaN, 100]);
  const b = kiln.tensor([1 + 1e-6, 0, Infinity, Infinity, NaN, 100.002]);
  assert.deepEqual(kiln.isclose(a, b).tolist(), [true, true, true, false, false, false]);
  assert.deepEqual(a.isclose(b, { equalNan: true, rtol: 1e-4 }).tolist(), [true, true, true, false, true, true]);
  assert.equal(kiln.allclose(kiln.tensor([1, 2]), kiln.tensor([1, 2.00001])), true);
  assert.equal(kiln.allclose(kiln.tensor([1, 2]), kiln.tensor([1, 2.001])), false);
  assert.equal(kiln.allclose(kiln.tensor([1, 2]), kiln.tensor([1, 2.001]), 1e-3), true);
  assert.equal(kiln.allclose(kiln.tensor([0]), kiln.tensor([1e-7]), 0, 1e-6), true);
  assert.equal(kiln.tensor([NaN]).allclose(kiln.tensor([NaN]), 1e-5, 1e-8, true), true);
  assert.equal(kiln.allclose(kiln.tensor([[1, 2]]), kiln.tensor([1, 2])), true, 'broadcasts');
  assertThrowsWith(() => kiln.allclose(kiln.tensor([1]), kiln.tensor([1], { dtype: 'float64' })), 'isclose', 'same dtype');
});

/** Brute-force einsum over every assignment of the labels. */
function refEinsum(eq: string, ops: Tensor[]): { data: number[]; shape: number[] } {
  const [lhs, rhs] = eq.split('->') as [string, string];
  const ins = lhs.split(',');
  const size = new Map<string, number>();
  ins.forEach((s, i) => [...s].forEach((l, d) => size.set(l, ops[i]!.shape[d]!)));
  const labels = [...size.keys()];
  const outShape = [...rhs].map((l) => size.get(l)!);
  const out = new Array<number>(numel(outShape)).fill(0);
  const vals = ops.map((o) => o.toFlatArray());
  const asg = new Map<string, number>();
  const flat = (ls: string, shape: readonly number[]): number => [...ls].reduce((a, l, d) => a * shape[d]! + asg.get(l)!, 0);
  const rec = (k: number): void => {
    if (k === labels.length) {
      out[flat(rhs, outShape)]! += ins.reduce((p, s, i) => p * vals[i]![flat(s, ops[i]!.shape)]!, 1);
      return;
    }
    for (let i = 0; i < size.get(labels[k]!)!; i++) {
      asg.set(labels[k]!, i);
      rec(k + 1);
    }
  };
  rec(0);
  return { data: out, shape: outShape };
}

test('einsum: matmul chains, batch, traces, diagonals, outer products, sums, implicit output, ellipsis', () => {
  const cases: [string, number[][]][] = [
    ['ij,jk->ik', [[3, 4], [4, 5]]],
    ['bij,bjk->bik', [[2, 3, 4], [2, 4, 5]]],
    ['bij,bjk,kl->bil', [[2, 3, 4], [2, 4, 5], [5, 2]]],
    ['ii->', [[4, 4]]],
    ['ii->i', [[4, 4]]],
    ['iij->ji', [[3, 3, 2]]],
    ['i,j->ij', [[3], [4]]],
    ['ijk->', [[2, 3, 4]]],
    ['ijk->kji', [[2, 3, 4]]],
    ['ij,ij->i', [[3, 4], [3, 4]]],
    ['bhqd,bhkd->bhqk', [[2, 2, 3, 4], [2, 2, 5, 4]]],
    ['ab,bc,cd,da->', [[2, 3], [3, 4], [4, 2], [2, 2]]],
    ['ij,k->jk', [[2, 3], [4]]],
  ];
  let seed = 10;
  for (const [eq, shapes] of cases) {
    const ops = shapes.map((s) => f64(s, seed++));
    const want = refEinsum(eq, ops);
    assertClose(kiln.einsum(eq, ...ops), want.data, want.shape, TOL);
  }
  const a = f64([2, 3], 1);
  const b = f64([3, 4], 2);
  assertClose(kiln.einsum('ij,jk', a, b), refEinsum('ij,jk->ik', [a, b]).data, [2, 4], TOL);
  assertClose(kiln.einsum('ba', a), refEinsum('ba->ab', [a]).data, [3, 2], TOL);
  // Ellipsis with broadcasting: [2, 1, 3, 4] x [5, 4, 2] -> [2, 5, 3, 2].
  const e1 = f64([2, 1, 3, 4], 3);
  const e2 = f64([5, 4, 2], 4);
  const got = kiln.einsum('...ij,...jk->...ik', [e1, e2]);
  assert.deepEqual(got.shape, [2, 5, 3, 2]);
  const ev1 = e1.toFlatArray();
  const ev2 = e2.toFlatArray();
  const want: number[] = [];
  for (let p = 0; p < 2; p++) for (let q = 0; q < 5; q++) for (let i = 0; i < 3; i++) for (let k = 0; k < 2; k++) {
    let s = 0;
    for (let j = 0; j < 4; j++) s += ev1[p * 12 + i * 4 + j]! * ev2[q * 8 + j * 2 + k]!;
    want.push(s);
  }
  assertClose(got, want, [2, 5, 3, 2], TOL);
  gradcheck((x, y, z) => kiln.einsum('bij,bjk,kl->bil', x, y, z), [leaf([2, 3, 4], 20), leaf([2, 4, 2], 21), leaf([2, 3], 22)]);
  gradcheck((x) => kiln.einsum('iij->ji', x), [leaf([3, 3, 2], 23)]);
  const c = kiln.compile((x: Tensor, y: Tensor) => kiln.einsum('bij,bkj->bik', x, y).relu(), { fullgraph: true });
  const x32 = rand([2, 3, 4], 30);
  const y32 = rand([2, 5, 4], 31);
  assertClose(c(x32, y32), kiln.einsum('bij,bkj->bik', x32, y32).relu().toFlatArray(), [2, 3, 5]);
  assertThrowsWith(() => kiln.einsum('ij,jk->ik', a), 'einsum', '2 operand(s) but 1 tensor(s)');
  assertThrowsWith(() => kiln.einsum('ij,jk->ik', a, a), 'einsum', "subscript 'j'", 'sizes 3 and 2');
  assertThrowsWith(() => kiln.einsum('ijk->i', a), 'einsum', 'operand 0 [2, 3] has 2 dims');
  assertThrowsWith(() => kiln.einsum('ij->iz', a), 'einsum', "output subscript 'z'");
});

/** torch's interpolate, per output pixel. */
function refInterpolate(x: Tensor, oh: number, ow: number, mode: 'nearest' | 'bilinear', alignCorners: boolean, scale: [number, number] | null): number[] {
  const [n, c, h, w] = x.shape as [number, number, number, number];
  const v = x.toFlatArray();
  const src = (o: number, inS: number, outS: number, sc: number | null): number => {
    const s = sc !== null ? 1 / sc : inS / outS;
    if (mode === 'nearest') return Math.min(Math.floor(o * s), inS - 1);
    if (alignCorners) return outS > 1 ? (o * (inS - 1)) / (outS - 1) : 0;
    return Math.max((o + 0.5) * s - 0.5, 0);
  };
  const out: number[] = [];
  for (let p = 0; p < n * c; p++) {
    for (let i = 0; i < oh; i++) {
      for (let j = 0; j < ow; j++) {
        const y = src(i, h, oh, scale ? scale[0] : null);
        const xx = src(j, w, ow, scale ? scale[1] : null);
        if (mode === 'nearest') {
          out.push(v[p * h * w + y * w + xx]!);
          continue;
        }
        const y0 = Math.floor(y);
        const x0 = Math.floor(xx);
        const y1 = Math.min(y0 + 1, h - 1);
        const x1 = Math.min(x0 + 1, w - 1);
        const ly = y - y0;
        const lx = xx - x0;
        const at = (a: number, b: number): number => v[p * h * w + a * w + b]!;
        out.push((1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) + ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1)));
      }
    }
  }
  return out;
}

test('interpolate: nearest and bilinear (alignCorners true/false), by size and by scaleFactor', () => {
  const x = f64([2, 3, 5, 7], 40);
  const cases: [kiln.InterpolateOptions, number, number][] = [
    [{ size: [3, 4] }, 3, 4],
    [{ scaleFactor: 1.5 }, 7, 10],
    [{ size: [8, 9], mode: 'bilinear', alignCorners: true }, 8, 9],
    [{ size: [4, 10], mode: 'bilinear' }, 4, 10],
    [{ scaleFactor: [0.7, 2.3], mode: 'bilinear' }, 3, 16],
    [{ size: 1, mode: 'bilinear', alignCorners: true }, 1, 1],
  ];
  for (const [opts, oh, ow] of cases) {
    const sf = opts.scaleFactor === undefined ? null : typeof opts.scaleFactor === 'number' ? [opts.scaleFactor, opts.scaleFactor] : [...opts.scaleFactor!];
    const want = refInterpolate(x, oh, ow, opts.mode ?? 'nearest', opts.alignCorners === true, sf as [number, number] | null);
    assertClose(kiln.interpolate(x, opts), want, [2, 3, oh, ow], TOL);
  }
  gradcheck((t) => kiln.interpolate(t, { size: [5, 3], mode: 'bilinear' }), [leaf([1, 2, 3, 4], 41)]);
  gradcheck((t) => kiln.interpolate(t, { scaleFactor: 2, mode: 'bilinear', alignCorners: true }), [leaf([1, 1, 3, 3], 42)]);
  gradcheck((t) => kiln.interpolate(t, { scaleFactor: 2 }), [leaf([1, 2, 2, 3], 43)]);
  const c = kiln.compile((t: Tensor) => kiln.nn.functional.interpolate(t, { size: [6, 5], mode: 'bilinear' }).mul(2), { fullgraph: true });
  const x32 = rand([1, 2, 4, 4], 44);
  assertClose(c(x32), kiln.interpolate(x32, { size: [6, 5], mode: 'bilinear' }).mul(2).toFlatArray(), [1, 2, 6, 5]);
  assertThrowsWith(() => kiln.interpolate(rand([2, 3, 4]), { size: 2 }), 'interpolate', '4-d', '[2, 3, 4] float32');
  assertThrowsWith(() => kiln.interpolate(x, { size: 2, scaleFactor: 2 }), 'interpolate', "exactly one of 'size' and 'scaleFactor'");
  assertThrowsWith(() => kiln.interpolate(x, { size: 2, alignCorners: true }), 'interpolate', 'alignCorners');
});

function refAdaptive(x: Tensor, oh: number, ow: number): number[] {
  const [h, w] = x.shape.slice(-2) as [number, number];
  const planes = numel(x.shape) / (h * w);
  const v = x.toFlatArray();
  const out: number[] = [];
  for (let p = 0; p < planes; p++) {
    for (let i = 0; i < oh; i++) {
      for (let j = 0; j < ow; j++) {
        const [h0, h1] = [Math.floor((i * h) / oh), Math.ceil(((i + 1) * h) / oh)];
        const [w0, w1] = [Math.floor((j * w) / ow), Math.ceil(((j + 1) * w) / ow)];
        let s = 0;
        for (let a = h0; a < h1; a++) for (let b = w0; b < w1; b++) s += v[p * h * w + a * w + b]!;
        out.push(s / ((h1 - h0) * (w1 - w0)));
      }
    }
  }
  return out;
}

test('adaptiveAvgPool2d: overlapping and uneven bins, 3-d and 4-d, null keeps a size', () => {
  const x = f64([2, 3, 5, 7], 50);
  for (const [oh, ow] of [[3, 4], [2, 7], [5, 3], [1, 1], [7, 9]] as const) assertClose(kiln.adaptiveAvgPool2d(x, [oh, ow]), refAdaptive(x, oh, ow), [2, 3, oh, ow], TOL);
  assertClose(kiln.adaptiveAvgPool2d(f64([3, 5, 7], 51), [2, null]), refAdaptive(f64([3, 5, 7], 51), 2, 7), [3, 2, 7], TOL);
  gradcheck((t) => kiln.adaptiveAvgPool2d(t, [2, 3]), [leaf([1, 2, 5, 4], 52)]);
  const c = kiln.compile((t: Tensor) => kiln.adaptiveAvgPool2d(t, 3).relu());
  const x32 = rand([2, 3, 7, 8], 53);
  assertClose(c(x32), kiln.adaptiveAvgPool2d(x32, 3).relu().toFlatArray(), [2, 3, 3, 3]);
  assertThrowsWith(() => kiln.adaptiveAvgPool2d(rand([5, 7]), 2), 'adaptiveAvgPool2d', '[5, 7] float32');
});

function refConv1d(x: Tensor, w: Tensor, b: Tensor | null, s: number, p: number, d: number, g: number): { data: number[]; shape: number[] } {
  const [n, cin, l] = x.shape as [number, number, number];
  const [cout, cg, k] = w.shape as [number, number, number];
  const lo = Math.floor((l + 2 * p - d * (k - 1) - 1) / s) + 1;
  const xv = x.toFlatArray();
  const wv = w.toFlatArray();
  const bv = b?.toFlatArray();
  const out: number[] = [];
  for (let a = 0; a < n; a++) for (let o = 0; o < cout; o++) for (let t = 0; t < lo; t++) {
    let acc = bv ? bv[o]! : 0;
    const grp = Math.floor(o / (cout / g));
    for (let c = 0; c < cg; c++) for (let q = 0; q < k; q++) {
      const pos = t * s - p + q * d;
      if (pos >= 0 && pos < l) acc += xv[(a * cin + grp * cg + c) * l + pos]! * wv[(o * cg + c) * k + q]!;
    }
    out.push(acc);
  }
  return { data: out, shape: [n, cout, lo] };
}

test('conv1d: stride, padding, dilation, groups, bias, unbatched', () => {
  const x = f64([2, 4, 11], 60);
  const w = f64([6, 2, 3], 61);
  const b = f64([6], 62);
  const r = refConv1d(x, w, b, 2, 1, 2, 2);
  assertClose(kiln.conv1d(x, w, b, 2, 1, 2, 2), r.data, r.shape, TOL);
  const w1 = f64([3, 4, 4], 63);
  const r1 = refConv1d(x, w1, null, 1, 0, 1, 1);
  assertClose(kiln.nn.functional.conv1d(x, w1), r1.data, r1.shape, TOL);
  assertClose(kiln.conv1d(x.select(0, 0), w1), r1.data.slice(0, 3 * 8), [3, 8], TOL);
  assert.deepEqual(kiln.conv1d(x, w1, null, 1, 'same').shape, [2, 3, 11]);
  gradcheck((t, u, v) => kiln.conv1d(t, u, v, 2, 1, 1, 2), [leaf([1, 4, 7], 64), leaf([2, 2, 3], 65), leaf([2], 66)]);
  const c = kiln.compile((t: Tensor, u: Tensor) => kiln.conv1d(t, u, null, 1, 1).relu());
  const [x32, w32] = [rand([2, 4, 9], 67), rand([3, 4, 3], 68)];
  assertClose(c(x32, w32), kiln.conv1d(x32, w32, null, 1, 1).relu().toFlatArray(), [2, 3, 9]);
  assertThrowsWith(() => kiln.conv1d(x, f64([3, 4, 2, 2], 1)), 'conv1d', '3-d weight', '[3, 4, 2, 2] float64');
});

/** conv_transpose2d by definition: every input pixel scatters weight * value into the output. */
function refConvT(x: Tensor, w: Tensor, b: Tensor | null, s: number[], p: number[], op: number[], g: number, d: number[]): { data: number[]; shape: number[] } {
  const [n, cin, h, wd] = x.shape as [number, number, number, number];
  const [, cg, kh, kw] = w.shape as [number, number, number, number];
  const cout = cg * g;
  const oh = (h - 1) * s[0]! - 2 * p[0]! + d[0]! * (kh - 1) + op[0]! + 1;
  const ow = (wd - 1) * s[1]! - 2 * p[1]! + d[1]! * (kw - 1) + op[1]! + 1;
  const out = new Array<number>(n * cout * oh * ow).fill(0);
  const xv = x.toFlatArray();
  const wv = w.toFlatArray();
  const bv = b?.toFlatArray();
  const cinG = cin / g;
  for (let a = 0; a < n; a++) for (let ci = 0; ci < cin; ci++) for (let i = 0; i < h; i++) for (let j = 0; j < wd; j++) {
    const grp = Math.floor(ci / cinG);
    for (let oc = 0; oc < cg; oc++) for (let u = 0; u < kh; u++) for (let v = 0; v < kw; v++) {
      const y = i * s[0]! - p[0]! + u * d[0]!;
      const z = j * s[1]! - p[1]! + v * d[1]!;
      if (y < 0 || y >= oh || z < 0 || z >= ow) continue;
      out[((a * cout + grp * cg + oc) * oh + y) * ow + z]! += xv[((a * cin + ci) * h + i) * wd + j]! * wv[((ci * cg + oc) * kh + u) * kw + v]!;
    }
  }
  if (bv) for (let k = 0; k < out.length; k++) out[k]! += bv[Math.floor(k / (oh * ow)) % cout]!;
  return { data: out, shape: [n, cout, oh, ow] };
}

test('convTranspose2d: stride, padding, outputPadding, groups, dilation, bias, unbatched', () => {
  const cases: [number[], number[], number[], number[], number, number[]][] = [
    // input, weight, stride, padding, groups, [outputPadding..., dilation...]
    [[2, 4, 5, 6], [4, 3, 3, 2], [2, 3], [1, 0], 2, [1, 2, 1, 2]],
    [[1, 3, 4, 4], [3, 2, 3, 3], [1, 1], [2, 2], 1, [0, 0, 1, 1]],
    [[1, 2, 3, 3], [2, 2, 2, 2], [3, 3], [0, 0], 1, [0, 0, 1, 1]],
    [[1, 2, 3, 4], [2, 1, 3, 3], [2, 2], [4, 1], 2, [1, 0, 2, 1]],
  ];
  let seed = 70;
  for (const [xs, ws, s, p, g, od] of cases) {
    const x = f64(xs, seed++);
    const w = f64(ws, seed++);
    const b = f64([ws[1]! * g], seed++);
    const op = od.slice(0, 2);
    const d = od.slice(2);
    const r = refConvT(x, w, b, s, p, op, g, d);
    assertClose(kiln.convTranspose2d(x, w, b, s, p, op, g, d), r.data, r.shape, TOL);
    assertClose(kiln.nn.functional.convTranspose2d(x, w, b, { stride: s, padding: p, outputPadding: op, groups: g, dilation: d }), r.data, r.shape, TOL);
  }
  const x3 = f64([3, 4, 4], 90);
  const w3 = f64([3, 2, 3, 3], 91);
  const r3 = refConvT(kiln.unsqueeze(x3, 0), w3, null, [2, 2], [1, 1], [0, 0], 1, [1, 1]);
  assertClose(kiln.convTranspose2d(x3, w3, null, 2, 1), r3.data, r3.shape.slice(1), TOL);
  gradcheck((t, u, v) => kiln.convTranspose2d(t, u, v, 2, 1, 1, 2), [leaf([1, 2, 3, 3], 92), leaf([2, 1, 3, 3], 93), leaf([2], 94)]);
  const c = kiln.compile((t: Tensor, u: Tensor) => kiln.convTranspose2d(t, u, null, 2, 1, 1).relu());
  const [x32, w32] = [rand([1, 3, 4, 5], 95), rand([3, 2, 3, 3], 96)];
  assertClose(c(x32, w32), kiln.convTranspose2d(x32, w32, null, 2, 1, 1).relu().toFlatArray(), [1, 2, 8, 10]);
  assertThrowsWith(() => kiln.convTranspose2d(x32, w32, null, 1, 0, 1), 'convTranspose2d', 'output padding must be smaller than either stride or dilation');
  assertThrowsWith(() => kiln.convTranspose2d(x32, rand([4, 2, 3, 3], 1)), 'convTranspose2d', 'expects 4 input channels', '[1, 3, 4, 5] float32');
});

// PyTorch goldens (scripts/make_op_goldens.py), when the fixture has been made.
const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = [path.join(here, 'fixtures/op-goldens.json'), path.join(here, '../../test/fixtures/op-goldens.json')].find((p) => fs.existsSync(p));
interface GoldenCase {
  name: string;
  params: Record<string, unknown>;
  inputs: { shape: number[]; data: number[] }[];
  out: { shape: number[]; data: number[] };
}
test('PyTorch goldens (test/fixtures/op-goldens.json)', { skip: fixture ? false : 'no fixture: run python3 scripts/make_op_goldens.py on a machine with torch' }, () => {
  const { cases } = JSON.parse(fs.readFileSync(fixture!, 'utf8')) as { cases: GoldenCase[] };
  const num = (v: unknown): number => (v === 'inf' ? Infinity : (v as number));
  for (const c of cases) {
    const ins = c.inputs.map((i) => makeTensor(i.data, i.shape, 'float64'));
    const q = c.params as Record<string, never>;
    const x = ins[0]!;
    const run: Record<string, () => Tensor> = {
      flip: () => kiln.flip(x, q.dims),
      roll: () => kiln.roll(x, q.shifts, q.dims),
      roll_flat: () => kiln.roll(x, q.shifts),
      repeat: () => x.repeat(q.repeats),
      norm: () => kiln.norm(x, q.p === 'fro' ? 'fro' : num(q.p), q.dim),
      einsum: () => kiln.einsum(q.equation, ...ins),
      interpolate: () => kiln.interpolate(x, { ...(q.size ? { size: q.size } : { scaleFactor: q.scaleFactor }), mode: q.mode, ...(q.mode === 'bilinear' ? { alignCorners: q.alignCorners } : {}) }),
      adaptiveAvgPool2d: () => kiln.adaptiveAvgPool2d(x, q.outputSize),
      conv1d: () => kiln.conv1d(x, ins[1]!, ins[2] ?? null, q.stride, q.padding, q.dilation, q.groups),
      convTranspose2d: () => kiln.convTranspose2d(x, ins[1]!, ins[2] ?? null, q.stride, q.padding, q.outputPadding, q.groups, q.dilation),
    };
    const fn = c.name.startsWith('pad_') ? () => kiln.pad(x, q.pad, q.mode, (q.value as number | undefined) ?? null) : run[c.name];
    assert.ok(fn, `golden case ${c.name} has a runner`);
    assertClose(fn(), c.out.data, c.out.shape, { atol: 1e-10, rtol: 1e-9 });
  }
});
