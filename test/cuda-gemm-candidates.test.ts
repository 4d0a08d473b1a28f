/**
 * cuBLASLt autotune candidates (src/runtime/cuda/gemm-candidates.ts) on the device: small-M GEMMs
 * of a Qwen3-0.6B forward (128 tokens), where split-K variants of the heuristic's offers join the
 * timed candidates. Whichever candidate wins, the product must equal the float64 product of the
 * same inputs (computed on the cpu) within the dtype's rounding, and float32 must stay exact
 * float32 (no TF32: its 10-bit mantissa would miss the 1e-5 bound by orders of magnitude).
 * Skips where no CUDA device can be used.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

function randn(shape: number[], seed: number): Tensor {
  return kiln.randn(shape, { generator: new kiln.Generator(seed) });
}

/** max |got - want| / max |want| over all elements. */
function relErr(got: Tensor, want: Tensor): number {
  const g = got.to('cpu').to('float64').toFlatArray();
  const w = want.toFlatArray();
  let err = 0;
  let scale = 0;
  for (let i = 0; i < w.length; i++) {
    err = Math.max(err, Math.abs(g[i]! - w[i]!));
    scale = Math.max(scale, Math.abs(w[i]!));
  }
  return err / scale;
}

// [M, K] x [N, K]^T: the fused qkv (N 4096), o_proj (K 2048) and down_proj (K 3072) shapes.
const SHAPES: [number, number, number][] = [
  [128, 1024, 4096],
  [128, 2048, 1024],
  [128, 3072, 1024],
];

test('cuda linear at M = 128 (split-K candidates timed): float32 within 1e-5 and bfloat16 within its rounding of the float64 product', { skip }, () => {
  for (const [m, k, n] of SHAPES) {
    const x = randn([m, k], m + k);
    const w = randn([n, k], n + k);
    for (const dtype of ['float32', 'bfloat16'] as kiln.DType[]) {
      const xd = x.to(dtype);
      const wd = w.to(dtype);
      // The reference sees the same (rounded) inputs, in float64.
      const want = kiln.linear(xd.to('float64'), wd.to('float64'));
      const xc = xd.to('cuda');
      const wc = wd.to('cuda');
      // Twice: the first call tunes (every candidate runs on these operands), the second runs the winner.
      for (const call of [1, 2]) {
        const got = kiln.linear(xc, wc);
        const err = relErr(got, want);
        const bound = dtype === 'float32' ? 1e-5 : 8e-3;
        assert.ok(err <= bound, `${dtype} [${m}x${k}] @ [${k}x${n}] call ${call}: relative error ${err} > ${bound}`);
      }
    }
  }
});

test('cuda linear at M = 128 inside a CUDA graph (compiled, reduce-overhead) equals eager on the device', { skip }, () => {
  const x = randn([1, 128, 3072], 1).to('cuda');
  const w = randn([1024, 3072], 2).to('cuda');
  const f = kiln.compile((t: Tensor) => kiln.linear(t, w), { mode: 'reduce-overhead' });
  const want = kiln.linear(x, w);
  for (let i = 0; i < 3; i++) assert.ok(relErr(f(x), want.to('cpu').to('float64')) <= 1e-6, `replay ${i}`);
});
