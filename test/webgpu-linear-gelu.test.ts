/**
 * llm.linearGelu's webgpu kernel (kernels/webgpu/llm-linear-gelu.ts: the GELU in the GEMM's
 * epilogue, or in the split-K combine's; after the skinny GEMV at a few rows) against a float64
 * loop, in float32 and float16, both GELU forms, on a product that splits K (64 x 512 x 512:
 * mlp-64x512's layer), one that does not and one of 3 rows (the GEMV); the
 * pipeline keys show the epilogue ran where it was meant to. Then kiln.compile of a GELU MLP on
 * webgpu: the pass maps linear -> gelu onto the op (a GEMM pipeline with the GELU epilogue runs)
 * and the result equals eager's. Needs an adapter that computes (SwiftShader here: float16 is
 * stored packed there; a GPU with shader-f16 runs the subgroup-matrix kernels); skips on the null
 * backend.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { gemmPipelineKeys } from '../src/kernels/webgpu/linalg.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { refLinearGelu } from './helpers/linear-gelu-ref.js';

const skip = webgpuSkipReason();

function close(got: Tensor, want: readonly number[], atol: number, rtol: number, label: string): void {
  const g = got.to('cpu').to('float64').toFlatArray();
  assert.equal(g.length, want.length, label);
  for (let i = 0; i < want.length; i++) assert.ok(Math.abs(g[i]! - want[i]!) <= atol + rtol * Math.abs(want[i]!), `${label}: element ${i} got ${g[i]}, want ${want[i]}`);
}

test('llm.linearGelu on webgpu equals the float64 loop: float32 and float16, both forms, split K or not', { skip }, () => {
  const before = new Set(gemmPipelineKeys());
  for (const dtype of ['float32', 'float16'] as const) {
    for (const [M, N, K] of [
      [64, 512, 512],
      [70, 24, 40],
      [3, 16, 32],
    ] as const) {
      for (const approximate of ['none', 'tanh'] as const) {
        // Inputs rounded to the dtype first, so the reference sees the values the GPU multiplies.
        const x = rand([M, K], 1, 'contiguous', 'float32', -1.5, 1.5).to(dtype);
        const w = rand([N, K], 2, 'contiguous', 'float32', -1 / Math.sqrt(K), 1 / Math.sqrt(K)).to(dtype);
        const b = rand([N], 3, 'contiguous', 'float32', -0.5, 0.5).to(dtype);
        const want = refLinearGelu(x.to('float64'), w.to('float64'), b.to('float64'), approximate);
        const got = kiln.llm.linearGelu(x.to('webgpu'), w.to('webgpu'), b.to('webgpu'), approximate);
        assert.deepEqual([...got.shape], [M, N]);
        close(got, want, dtype === 'float32' ? 1e-5 : 4e-3, dtype === 'float32' ? 1e-5 : 4e-3, `${dtype} ${M}x${N}x${K} ${approximate}`);
      }
    }
  }
  const keys = gemmPipelineKeys().filter((k) => !before.has(k));
  assert.ok(keys.some((k) => k.startsWith('combine,') && k.endsWith(',gelu')) && keys.some((k) => k.startsWith('combine,') && k.endsWith(',gelut')), `the split-K combine applied both GELUs (compiled: ${keys.join(' ')})`);
  assert.ok(keys.some((k) => !k.startsWith('combine,') && !k.includes('partial') && /,gelut?$/.test(k)), `a GEMM applied the GELU in its own epilogue (compiled: ${keys.join(' ')})`);
});

test('kiln.compile of a GELU MLP on webgpu runs the GELU in the first linear\'s epilogue and equals eager', { skip }, () => {
  const mlp = new kiln.nn.Sequential(new kiln.nn.Linear(48, 64), new kiln.nn.GELU(), new kiln.nn.Linear(64, 48));
  mlp.eval();
  mlp.to('webgpu');
  const x = rand([16, 48], 5, 'contiguous', 'float32', -2, 2).to('webgpu');
  const want = kiln.noGrad(() => mlp.forward(x)).to('cpu').toFlatArray();
  const f = kiln.compile((t: Tensor) => mlp.forward(t), { modules: [mlp] });
  const got = kiln.noGrad(() => f(x));
  const programs = f.programs().inference.map((p) => p.describe()).join('\n');
  assert.match(programs, /llm\.linearGelu/, programs);
  assert.doesNotMatch(programs, /\bgelu\b(?!.*linearGelu)/, 'no separate gelu kernel is left');
  assert.ok(gemmPipelineKeys().some((k) => /,gelu$/.test(k)), 'a GEMM or combine with the GELU epilogue was built');
  close(got, want, 2e-5, 2e-5, 'compiled vs eager');
});
