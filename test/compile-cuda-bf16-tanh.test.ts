/**
 * Which tanh the CUDA code generator emits (no GPU needed): tanh.approx.f32 (kiln_tanh_approx)
 * only in pointwise kernels whose every stored result is bfloat16, where its 2^-11 relative error
 * rounds away; the accurate kiln_ftanh everywhere else (float32 or float16 results, a kernel with
 * any non-bfloat16 output, reductions). test/cuda-fast-math.test.ts checks the accuracy on a GPU.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { H200_TARGET } from '../src/compile/codegen/cuda/configs.js';
import { generateCudaKernel } from '../src/compile/codegen/cuda/generate.js';
import { kernelLayout } from '../src/compile/codegen/cuda/layout.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { build } from './compile-cuda-codegen-graphs.js';

/** The generated CUDA source of every kernel of fn on one [64, 256] input of `dtype`. */
function sources(fn: (x: Tensor) => Tensor | Tensor[], dtype: DType): string {
  const cg = build(`bf16tanh_${dtype}`, fn as never, [kiln.empty([64, 256], { dtype })]);
  assert.ok(cg.sched.kernels.length > 0, 'the graph has generated kernels');
  return cg.sched.kernels
    .map((g, i) => generateCudaKernel(g, cg.low, kernelLayout(g, (id) => cg.low.values.get(id)!), `k${i}`, H200_TARGET).candidates[0]!.body)
    .join('\n');
}
const uses = (src: string): { approx: boolean; accurate: boolean } => ({ approx: src.includes('kiln_tanh_approx('), accurate: src.includes('kiln_ftanh(') });

test('bfloat16 pointwise kernels use tanh.approx for tanh and for GELU tanh', () => {
  assert.deepEqual(uses(sources((x) => kiln.tanh(x).mul(2), 'bfloat16')), { approx: true, accurate: false });
  assert.deepEqual(uses(sources((x) => kiln.nn.functional.gelu(x, 'tanh'), 'bfloat16')), { approx: true, accurate: false });
});

test('float32 and float16 results keep the accurate tanh', () => {
  assert.deepEqual(uses(sources((x) => kiln.tanh(x).mul(2), 'float32')), { approx: false, accurate: true });
  assert.deepEqual(uses(sources((x) => kiln.tanh(x).mul(2), 'float16')), { approx: false, accurate: true });
  // bfloat16 input, float32 result
  assert.deepEqual(uses(sources((x) => kiln.tanh(x.to('float32')), 'bfloat16')), { approx: false, accurate: true });
});

test('a kernel with any non-bfloat16 output, or a reduction, keeps the accurate tanh', () => {
  const mixed = sources((x) => {
    const t = kiln.tanh(x);
    return [t.mul(2), t.to('float32').add(1)];
  }, 'bfloat16');
  assert.equal(uses(mixed).accurate, true);
  assert.equal(uses(sources((x) => kiln.tanh(x).sum(-1), 'bfloat16')).approx, false);
});
