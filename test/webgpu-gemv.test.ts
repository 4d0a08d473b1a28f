/**
 * The skinny webgpu GEMM for a few rows (gemv-codegen.ts, KILN_WEBGPU_GEMV): values of linear / mm / addmm with M = 1..8 rows against float64 references on the
 * CPU from the same rounded inputs, within |A| @ |B| (+ |bias|, + |beta C|) times the output's ulp
 * plus f32 accumulation over K. The cases are eligible (K a multiple of 8, operands contiguous along
 * K, offsets and row strides multiples of 8), and the test asserts that they ran on the skinny
 * kernel; an ineligible case (K = 30) must still match through the tiled kernel. Every kind, row
 * block and epilogue is compiled on Dawn's null backend by webgpu-validate-gemv.test.ts.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const OUT_ULP: Partial<Record<DType, number>> = { float32: 2 ** -23, float16: 2 ** -10, bfloat16: 2 ** -7 };
const ACC_U = 2 ** -24;

/** A deterministic generator of values in [-1, 1). */
function values(n: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1);
}

interface Case {
  readonly label: string;
  readonly op: 'linear' | 'mm' | 'addmm';
  readonly M: number;
  readonly N: number;
  readonly K: number;
  /** Whether the case is eligible for the skinny kernel. */
  readonly gemv: boolean;
}

const CASES: Case[] = [
  ...[1, 2, 3, 4, 5, 7, 8].map((M) => ({ label: `linear+bias M=${M}`, op: 'linear' as const, M, N: 37, K: 264, gemv: true })),
  { label: 'linear K=8 (remainder loop only)', op: 'linear', M: 1, N: 5, K: 8, gemv: true },
  { label: 'linear K=1032 (unrolled and remainder)', op: 'linear', M: 2, N: 70, K: 1032, gemv: true },
  { label: 'mm x @ W^T, weight rows narrowed (offset)', op: 'mm', M: 3, N: 19, K: 128, gemv: true },
  { label: 'addmm beta 0.5 alpha 2 with W^T', op: 'addmm', M: 4, N: 21, K: 96, gemv: true },
  { label: 'linear K=30 (not eligible: tiled kernel)', op: 'linear', M: 2, N: 9, K: 30, gemv: false },
];

/** Runs `c` in `dtype` on `device` (float64 reference on cpu when `ref`): [result, |.| bound]. */
function run(c: Case, dtype: DType, device: string, ref: boolean): [Tensor, Tensor | null] {
  let seed = 11;
  for (const ch of c.label) seed = (seed * 31 + ch.charCodeAt(0)) >>> 0;
  const mk = (shape: number[]): Tensor => {
    const t = kiln.tensor(values(shape.reduce((p, s) => p * s, 1), seed++), { dtype }).reshape(shape);
    return ref ? t.to('float64') : t.to(device);
  };
  const x = mk([c.M, c.K]);
  if (c.op === 'linear') {
    const w = mk([c.N, c.K]);
    const bias = mk([c.N]);
    const out = kiln.nn.functional.linear(x, w, bias);
    return [out, ref ? kiln.nn.functional.linear(x.abs(), w.abs(), bias.abs()) : null];
  }
  if (c.op === 'mm') {
    // Rows 2 .. N + 2 of a taller weight: B's offset is 2K elements (a multiple of 8).
    const w = mk([c.N + 4, c.K]).narrow(0, 2, c.N);
    return [kiln.mm(x, w.t()), ref ? kiln.mm(x.abs(), w.abs().t()) : null];
  }
  const w = mk([c.N, c.K]);
  const self = mk([c.M, c.N]);
  return [kiln.addmm(self, x, w.t(), 0.5, 2), ref ? kiln.addmm(self.abs(), x.abs(), w.abs().t(), 0.5, 2) : null];
}

test('linear, mm and addmm of 1 to 8 rows on the skinny GEMM match float64', { skip: webgpuSkipReason() }, async () => {
  const { gemmPipelineKeys } = await import('../src/kernels/webgpu/linalg.js');
  setOption('KILN_WEBGPU_GEMV', true);
  const failures: string[] = [];
  try {
    for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
      for (const c of CASES) {
        const [want, bound] = run(c, dtype, 'cpu', true);
        const [got] = run(c, dtype, 'webgpu', false);
        const g = got.to('cpu').to('float64').toFlatArray() as number[];
        const w = want.toFlatArray() as number[];
        const b = bound!.toFlatArray() as number[];
        const tol = OUT_ULP[dtype]! + 2 * (c.K + 2) * ACC_U;
        for (let i = 0; i < w.length; i++) {
          const err = Math.abs(g[i]! - w[i]!);
          if (!(err <= tol * b[i]! + 1e-30)) {
            failures.push(`${c.label} ${dtype}: element ${i} got ${g[i]}, want ${w[i]} (|err| ${err.toExponential(2)})`);
            break;
          }
        }
      }
      // Which kernels ran: the skinny pipelines of this dtype's row blocks and epilogues were compiled.
      // Keys without the tuning suffixes (gemvTuning: ,uN the unroll, ,tsg the subgroup team sums).
      const keys = gemmPipelineKeys().filter((k) => k.startsWith('gemv')).map((k) => k.replace(/,u\d+|,tsg/g, ''));
      const kind = dtype === 'float32' ? 'f32' : dtype === 'bfloat16' ? 'bf16p' : (kiln.getAccelerator('webgpu') as WebgpuAccelerator).hasFeature('shader-f16') ? 'f16' : 'f16p';
      for (const want of [`gemv1,${kind},bias,`, `gemv2,${kind},bias,`, `gemv4,${kind},bias,`, `gemv8,${kind},bias,`, `gemv4,${kind},,`, `gemv4,${kind},,beta`]) {
        assert.ok(keys.includes(want), `${dtype}: the skinny kernel ${want} ran (compiled: ${keys.join(' ')})`);
      }
    }
  } finally {
    setOption('KILN_WEBGPU_GEMV', undefined);
  }
  assert.deepEqual(failures, []);
});

test('4 columns a workgroup (KILN_WEBGPU_GEMV_COLS4_MAX_N): the bits of the 8-column kernel for linear, mm, addmm, the gated GEMV and the norm prologue', { skip: webgpuSkipReason() }, async () => {
  const { gemmPipelineKeys } = await import('../src/kernels/webgpu/linalg.js');
  setOption('KILN_WEBGPU_GEMV', true);
  /** Every result of the cases at one setting, as float64 arrays. */
  const all = (dtype: DType): number[][] => {
    const out = CASES.map((c) => run(c, dtype, 'webgpu', false)[0]);
    let seed = 5;
    const mk = (shape: number[]): Tensor => kiln.tensor(values(shape.reduce((p, s) => p * s, 1), seed++), { dtype }).reshape(shape).to('webgpu');
    // Gated: 2 x 37 output columns, K 264 (unrolled and remainder words); norm prologue with and without gating.
    for (const M of [1, 3]) {
      const x = mk([M, 264]);
      out.push(kiln.llm.linearSiluAndMul(x, mk([74, 264]), mk([74])));
      const r = mk([M, 264]);
      const gamma = mk([264]);
      out.push(kiln.llm.addRmsNormLinear(x, r, gamma, 1e-6, mk([37, 264]), null).out);
      out.push(kiln.llm.addRmsNormLinear(x, r, gamma, 1e-6, mk([74, 264]), null, true).out);
    }
    return out.map((t) => t.to('cpu').to('float64').toFlatArray() as number[]);
  };
  try {
    for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
      setOption('KILN_WEBGPU_GEMV_COLS4_MAX_N', undefined);
      const eight = all(dtype);
      setOption('KILN_WEBGPU_GEMV_COLS4_MAX_N', 1 << 20);
      const four = all(dtype);
      assert.deepEqual(four, eight, `${dtype}: 4 columns a workgroup give the 8-column bits`);
    }
    const keys = gemmPipelineKeys().filter((k) => k.startsWith('gemv'));
    for (const want of [/^gemv1,[^,]*,bias,.*,c4$/, /,gated.*,c4$/, /,norm.*,c4$/]) assert.ok(keys.some((k) => want.test(k)), `a kernel ${String(want)} ran (compiled: ${keys.join(' ')})`);
  } finally {
    setOption('KILN_WEBGPU_GEMV', undefined);
    setOption('KILN_WEBGPU_GEMV_COLS4_MAX_N', undefined);
  }
});
