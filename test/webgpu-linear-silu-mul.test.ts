/**
 * webgpu llm.linearSiluAndMul (kernels/webgpu/llm-linear-silu-mul.ts: the skinny GEMV's gated
 * variant) against a float64 reference from the same rounded inputs: g and u = x @ W^T (+ b) in
 * float64, rounded to the dtype as the linear stores them, then silu(g) * u. A kernel result may
 * differ where its f32 sum of g or u rounds to the neighbouring value of the dtype: the bound is
 * that flip (one ulp of g or u, through silu(g) * u) plus the product's own rounding. Row counts
 * 1..8, K with and without the unrolled loop's remainder, output columns past a whole group of 8,
 * bias and none, float32 / float16 / bfloat16; the eligible cases must run as one dispatch, the
 * others (9 rows; K not a multiple of a 16-byte word) through linear + siluAndMul, still right.
 * Compiled on Dawn's null backend with shader-f16 by webgpu-validate-decode.test.ts.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../src/tensor/dtype.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();
const ULP: Partial<Record<DType, number>> = { float32: 2 ** -23, float16: 2 ** -10, bfloat16: 2 ** -7 };

function values(n: number, seed: number, scale: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => (((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1) * scale);
}

const silu = (v: number): number => v / (1 + Math.exp(-v));

interface Case {
  readonly M: number;
  readonly I: number;
  readonly K: number;
  readonly bias: boolean;
  readonly fused: boolean;
}

const CASES: Case[] = [
  ...[1, 2, 3, 5, 8].map((M) => ({ M, I: 19, K: 264, bias: M % 2 === 1, fused: true })),
  { M: 1, I: 8, K: 8, bias: false, fused: true },
  { M: 2, I: 40, K: 1032, bias: true, fused: true },
  { M: 9, I: 11, K: 64, bias: true, fused: false },
  { M: 1, I: 6, K: 30, bias: false, fused: false },
];

test('webgpu llm.linearSiluAndMul matches a float64 reference (gated GEMV and the fallback)', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const failures: string[] = [];
  let seed = 5;
  for (const dtype of ['float32', 'float16', 'bfloat16'] as DType[]) {
    for (const c of CASES) {
      const label = `${dtype} M=${c.M} I=${c.I} K=${c.K}${c.bias ? ' bias' : ''}`;
      const x = kiln.tensor(values(c.M * c.K, seed++, 1), { dtype }).reshape([c.M, c.K]);
      const w = kiln.tensor(values(2 * c.I * c.K, seed++, 2 / Math.sqrt(c.K)), { dtype }).reshape([2 * c.I, c.K]);
      const b = c.bias ? kiln.tensor(values(2 * c.I, seed++, 0.5), { dtype }) : null;
      const xv = x.to('float64').toFlatArray() as number[];
      const wv = w.to('float64').toFlatArray() as number[];
      const bv = b ? (b.to('float64').toFlatArray() as number[]) : null;
      const round = (v: number): number => (kiln.tensor([v], { dtype: 'float64' }).to(dtype).to('float64').toFlatArray() as number[])[0]!;
      const d0 = acc.dispatchCount;
      const got = kiln.llm.linearSiluAndMul(x.to('webgpu'), w.to('webgpu'), b ? b.to('webgpu') : null);
      const dispatches = acc.dispatchCount - d0;
      assert.deepEqual([...got.shape], [c.M, c.I], label);
      const g = got.to('cpu').to('float64').toFlatArray() as number[];
      if (c.fused && dispatches !== 1) failures.push(`${label}: ${dispatches} dispatches, want the gated GEMV's one`);
      if (!c.fused && dispatches < 2) failures.push(`${label}: ${dispatches} dispatches, want the fallback's two or more`);
      const ulp = ULP[dtype]!;
      for (let m = 0; m < c.M; m++) {
        for (let n = 0; n < c.I; n++) {
          let gs = bv ? bv[n]! : 0;
          let us = bv ? bv[c.I + n]! : 0;
          let mag = 0;
          for (let k = 0; k < c.K; k++) {
            gs += xv[m * c.K + k]! * wv[n * c.K + k]!;
            us += xv[m * c.K + k]! * wv[(c.I + n) * c.K + k]!;
            mag += Math.abs(xv[m * c.K + k]!) * (Math.abs(wv[n * c.K + k]!) + Math.abs(wv[(c.I + n) * c.K + k]!));
          }
          const gr = round(gs);
          const ur = round(us);
          const want = silu(gr) * ur;
          // One ulp of g or u (|d silu/dg| <= 1.1), the f32 sum's error, and the product's rounding.
          const flip = (1.1 * Math.abs(ur) + Math.abs(silu(gr))) * ulp * (Math.max(Math.abs(gr), Math.abs(ur)) + 1e-3) + 1.1 * mag * c.K * 2 ** -24 * (Math.abs(ur) + Math.abs(silu(gr)) + 1);
          const bound = flip + Math.abs(want) * ulp + 1e-30;
          const v = g[m * c.I + n]!;
          if (!(Math.abs(v - want) <= bound)) failures.push(`${label} [${m}, ${n}]: got ${v}, want ${want} (bound ${bound})`);
        }
      }
    }
  }
  assert.deepEqual(failures.slice(0, 10), [], `${failures.length} failures`);
});
