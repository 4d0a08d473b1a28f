/**
 * The float32 matmul precision switch (kiln.backends.cuda.matmul.allowTf32 /
 * kiln.setFloat32MatmulPrecision, mirroring PyTorch): its API semantics and the keys it enters
 * (no GPU needed), and on a GPU that the default is exact fp32 against a float64 reference while
 * 'high' runs TF32 (an error three orders of magnitude larger, still within TF32's bound).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { gemmComputeType } from '../src/runtime/cuda/cublaslt.js';
import { programCacheKey } from '../src/compile/cache/program-key.js';
import { skipUnlessCuda } from './cuda-util.js';
import { maxRelError } from './helpers/assert.js';

const skip = skipUnlessCuda();
// cublasComputeType_t values (cublas_api.h): exact fp32, fp32 with TF32 tensor-core products, fp64.
const COMPUTE_32F = 68;
const COMPUTE_32F_FAST_TF32 = 77;
const COMPUTE_64F = 70;

function withPrecision<T>(p: kiln.Float32MatmulPrecision, body: () => T): T {
  const saved = kiln.backends.cuda.matmul.allowTf32;
  try {
    kiln.setFloat32MatmulPrecision(p);
    return body();
  } finally {
    kiln.backends.cuda.matmul.allowTf32 = saved;
  }
}

test("float32 matmul precision: default 'highest' (exact fp32); 'high'/'medium' switch float32 GEMMs to TF32, other dtypes never", () => {
  assert.equal(kiln.backends.cuda.matmul.allowTf32, false, 'exact fp32 by default, as torch');
  assert.equal(kiln.getFloat32MatmulPrecision(), 'highest');
  assert.equal(gemmComputeType('float32'), COMPUTE_32F);
  withPrecision('high', () => {
    assert.equal(kiln.backends.cuda.matmul.allowTf32, true);
    assert.equal(kiln.getFloat32MatmulPrecision(), 'high');
    assert.equal(gemmComputeType('float32'), COMPUTE_32F_FAST_TF32);
    assert.equal(gemmComputeType('bfloat16'), COMPUTE_32F);
    assert.equal(gemmComputeType('float16'), COMPUTE_32F);
    assert.equal(gemmComputeType('float64'), COMPUTE_64F);
  });
  withPrecision('medium', () => assert.equal(kiln.getFloat32MatmulPrecision(), 'medium'));
  withPrecision('highest', () => {
    assert.equal(kiln.backends.cuda.matmul.allowTf32, false);
    assert.equal(gemmComputeType('float32'), COMPUTE_32F);
  });
  // Setting the flag directly reads back as torch's does.
  kiln.backends.cuda.matmul.allowTf32 = true;
  try {
    assert.notEqual(kiln.getFloat32MatmulPrecision(), 'highest');
  } finally {
    kiln.backends.cuda.matmul.allowTf32 = false;
  }
  assert.throws(() => kiln.setFloat32MatmulPrecision('low' as kiln.Float32MatmulPrecision), /setFloat32MatmulPrecision: argument 'precision' must be 'highest', 'high' or 'medium', got "low"/);
});

test('float32 matmul precision is part of the compiled-program cache key', () => {
  const parts = { signature: 'in %0 arg[0] float32 [4] c cpu', guardKey: '1|arg0:float32@cpu[4]contiguous', mode: 'default', backend: 'kiln', devices: ['cpu'] };
  const exact = programCacheKey(parts);
  assert.match(exact ?? '', /^[0-9a-f]{64}$/);
  assert.notEqual(withPrecision('high', () => programCacheKey(parts)), exact);
  assert.equal(withPrecision('highest', () => programCacheKey(parts)), exact);
});

/** max |got - ref| / max |ref| of linear(x, w) on cuda against a float64 CPU reference. */
function linearError(x: kiln.Tensor, w: kiln.Tensor): number {
  const got = kiln.linear(x.to('cuda'), w.to('cuda'), null).toFlatArray();
  const ref = kiln.linear(x.to('float64'), w.to('float64'), null).toFlatArray();
  return maxRelError(got, ref);
}

test("float32 linear on cuda: exact fp32 by default (vs float64), TF32 under 'high', exact again under 'highest'", { skip }, () => {
  // K = 1024 (a Qwen3 projection): fp32 accumulation error is ~1e-7 of the output scale; TF32's
  // 10-bit mantissa inputs give ~1e-4 to 1e-3.
  const g = new kiln.Generator(5);
  const x = kiln.randn([128, 1024], { generator: g });
  const w = kiln.randn([256, 1024], { generator: g });
  const exact = linearError(x, w);
  assert.ok(exact < 1e-5, `default float32 linear: relative error ${exact.toExponential(2)} is not exact fp32`);
  const tf32 = withPrecision('high', () => linearError(x, w));
  assert.ok(tf32 > 3e-5, `'high' float32 linear: relative error ${tf32.toExponential(2)} is too small for TF32 (did the compute type change?)`);
  assert.ok(tf32 < 5e-3, `'high' float32 linear: relative error ${tf32.toExponential(2)} exceeds TF32's bound`);
  const again = withPrecision('highest', () => linearError(x, w));
  assert.ok(again < 1e-5, `back to 'highest': relative error ${again.toExponential(2)}`);
});
