/**
 * Float64 references of webgpu row reductions for the reduction-form tests
 * (webgpu-reduce-registers.test.ts, webgpu-reduce-unroll.test.ts): inputs rounded to the dtype and
 * read back as float64, the reference computed on the host from those values, and a tolerance
 * derived from the dtype (its rounding unit at the store, plus float32 accumulation over the row).
 * Forms that sum in another order legitimately give other bits, so the forms are each checked
 * against these references, not against one another.
 */
import assert from 'node:assert/strict';
import * as kiln from '../../src/index.js';
import { getOption } from '../../src/runtime/config.js';
import type { Tensor } from '../../src/tensor/tensor.js';

const dev = 'webgpu';
export type FDT = 'float32' | 'float16' | 'bfloat16';

/** The dtype's unit roundoff (half an ulp at 1). */
export const UNIT: Record<FDT, number> = { float32: 2 ** -24, float16: 2 ** -11, bfloat16: 2 ** -8 };

/**
 * Allowed |got - want| for a result of magnitude `scale` (the sum of the magnitudes that made it,
 * for a sum; the value's own for a norm): the output's rounding twice (once where the kernel rounds
 * an intermediate to the dtype, as a compiled add stores its sum), and float32 accumulation error
 * over a row of n (a loose n * 2^-24 bound; kernels accumulate in f32 whatever the dtype).
 */
export const tolerance = (dt: FDT, n: number, scale: number): number => (4 * UNIT[dt] + (n + 8) * 2 ** -24) * (scale + 1e-3);

export const f64 = (t: Tensor): number[] => t.to('cpu').to('float64').toFlatArray() as number[];

/** Inputs rounded to dt, on webgpu, and their float64 values. */
export function input(shape: number[], dt: FDT, scale = 1): { t: Tensor; v: number[] } {
  const t = kiln.mul(kiln.randn(shape), scale).to(dt).to(dev);
  return { t, v: f64(t) };
}

export function rowsOf(v: number[], n: number): number[][] {
  return Array.from({ length: v.length / n }, (_, r) => v.slice(r * n, r * n + n));
}

export function assertClose(got: number[], want: number[], scale: number[], dt: FDT, n: number, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const tol = tolerance(dt, n, scale[i]!);
    if (!(Math.abs(got[i]! - want[i]!) <= tol)) assert.fail(`${what}: element ${i} got ${got[i]} want ${want[i]} (|diff| ${Math.abs(got[i]! - want[i]!)} > tolerance ${tol})`);
  }
}

/** Float64 references of one row. */
export const ref = {
  sum: (x: number[]) => ({ v: x.reduce((a, b) => a + b, 0), s: x.reduce((a, b) => a + Math.abs(b), 0) }),
  rms: (x: number[], w: number[], eps: number) => {
    const r = 1 / Math.sqrt(x.reduce((a, b) => a + b * b, 0) / x.length + eps);
    return { v: x.map((xi, i) => xi * r * w[i]!), s: x.map((xi, i) => Math.abs(xi * r * w[i]!)) };
  },
  layer: (x: number[], w: number[], eps: number) => {
    const m = x.reduce((a, b) => a + b, 0) / x.length;
    const vr = x.reduce((a, b) => a + (b - m) * (b - m), 0) / x.length;
    const r = 1 / Math.sqrt(vr + eps);
    // The scale: the centred value's magnitude before the subtraction's cancellation.
    return { v: x.map((xi, i) => (xi - m) * r * w[i]!), s: x.map((xi, i) => (Math.abs(xi) + Math.abs(m)) * r * Math.abs(w[i]!)) };
  },
  softmax: (x: number[]) => {
    const mx = Math.max(...x);
    const e = x.map((xi) => Math.exp(xi - mx));
    const z = e.reduce((a, b) => a + b, 0);
    return { v: e.map((ei) => ei / z), s: e.map((ei) => ei / z) };
  },
};

/** Checks every op over [rows, n] in dt against float64 (the tag names the form in failures). */
export function checkShape(rows: number, n: number, dt: FDT): void {
  const what = `[${rows}, ${n}] ${dt} registers=${getOption('KILN_WEBGPU_REDUCE_REGISTERS')} unroll=${getOption('KILN_WEBGPU_REDUCE_UNROLL')}`;
  const x = input([rows, n], dt);
  const w = input([n], dt);
  const xr = rowsOf(x.v, n);
  kiln.noGrad(() => {
    const s = xr.map(ref.sum);
    assertClose(f64(kiln.sum(x.t, 1)), s.map((r) => r.v), s.map((r) => r.s), dt, n, `sum ${what}`);
    assertClose(f64(kiln.mean(x.t, 1)), s.map((r) => r.v / n), s.map((r) => r.s / n), dt, n, `mean ${what}`);
    assert.deepEqual(f64(kiln.amax(x.t, 1)), xr.map((r) => Math.max(...r)), `amax ${what}`);
    // A strided row (a transposed [n, rows]): amin over rows read with stride `rows`.
    const xs = input([n, rows], dt);
    const xsRows = Array.from({ length: rows }, (_, r) => Array.from({ length: n }, (_, j) => xs.v[j * rows + r]!));
    assert.deepEqual(f64(kiln.amin(kiln.transpose(xs.t, 0, 1), 1)), xsRows.map((r) => Math.min(...r)), `amin (strided rows) ${what}`);
    // prod of values near 1 (0.01 x + 1, computed and rounded on the host first, as the kernel's input).
    const p = input([rows, n], dt, 0.01);
    const pv = p.v.map((v) => v + 1);
    const pt = kiln.tensor(pv, { dtype: 'float64' }).reshape([rows, n]).to(dt).to(dev);
    const pr = rowsOf(f64(pt), n).map((r) => r.reduce((a, b) => a * b, 1));
    assertClose(f64(kiln.prod(pt, 1)), pr, pr.map((v) => Math.abs(v)), dt, n, `prod ${what}`);
    // Ties: values rounded to halves repeat; the first index among equals wins.
    const xt = input([rows, n], dt, 2);
    const tied = kiln.round(xt.t);
    const tv = rowsOf(f64(tied), n);
    assert.deepEqual(f64(kiln.argmax(tied, 1).to('int32')), tv.map((r) => r.indexOf(Math.max(...r))), `argmax ${what}`);
    const sm = xr.map(ref.softmax);
    assertClose(f64(kiln.softmax(x.t, 1)), sm.flatMap((r) => r.v), sm.flatMap((r) => r.s), dt, n, `softmax ${what}`);
    const rm = xr.map((r) => ref.rms(r, w.v, 1e-6));
    assertClose(f64(kiln.llm.rmsNorm(x.t, w.t, 1e-6)), rm.flatMap((r) => r.v), rm.flatMap((r) => r.s), dt, n, `llm.rmsNorm ${what}`);
    const ln = xr.map((r) => ref.layer(r, w.v, 1e-5));
    assertClose(f64(kiln.nn.functional.layerNorm(x.t, [n], w.t, null, 1e-5)), ln.flatMap((r) => r.v), ln.flatMap((r) => r.s), dt, n, `layerNorm ${what}`);
  });
}

/**
 * The compiled residual add + RMSNorm over [1, n] (one fused kernel with two full-size outputs: the
 * sum and the norm) against float64; `what` names the case. A fresh function per call: the options
 * are part of the program's kernels' keys.
 */
export function checkAddRmsNorm(n: number, dt: FDT, what: string): void {
  const x = input([1, n], dt);
  const r = input([1, n], dt);
  const w = input([n], dt);
  const f = kiln.compile((p: Tensor, q: Tensor, g: Tensor) => {
    const s = kiln.add(p, q);
    return [kiln.nn.functional.rmsNorm(s, [n], g, 1e-6), s];
  });
  const [normed, sum] = kiln.noGrad(() => (f(x.t, r.t, w.t) as Tensor[]).map(f64));
  const s = x.v.map((xi, i) => xi + r.v[i]!);
  assertClose(sum!, s, s.map((v, i) => Math.abs(x.v[i]!) + Math.abs(r.v[i]!) + Math.abs(v)), dt, n, `${what}: the sum`);
  // The sum is rounded to dt before (eager) or after (compiled) the norm: within the 4-unit bound.
  const want = ref.rms(s, w.v, 1e-6);
  assertClose(normed!, want.v, want.s, dt, n, `${what}: the norm`);
}

