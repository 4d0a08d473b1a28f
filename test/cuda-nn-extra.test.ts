/**
 * cuda groupNorm and dropout against the CPU kernels: groupNorm in fp32/fp16/bf16 with and without
 * affine parameters, on channels_last and 3-d inputs; dropout with one seed giving the CPU's mask
 * exactly (float32: equal results), p = 0 / 1 and eval mode. Skips where no CUDA device exists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DType } from '../src/tensor/dtype.js';
import { rand } from './helpers/make.js';
import { checkOp, skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

test('cuda groupNorm matches the CPU: dtypes, affine or not, channels_last, 3-d input', { skip }, () => {
  for (const dtype of ['float32', 'float16', 'bfloat16'] as DType[]) {
    const x = rand([3, 12, 5, 7], 1, 'contiguous', dtype, -3, 3);
    const w = rand([12], 2, 'contiguous', dtype);
    const b = rand([12], 3, 'contiguous', dtype);
    checkOp(`groupNorm ${dtype} affine`, (t, ww, bb) => kiln.groupNorm(t, 4, ww, bb, 1e-5), [x, w, b]);
    checkOp(`groupNorm ${dtype} plain`, (t) => kiln.groupNorm(t, 3), [x]);
    checkOp(`groupNorm ${dtype} channels_last`, (t, ww) => kiln.groupNorm(t, 6, ww), [rand([3, 12, 5, 7], 6, 'channelsLast', dtype, -3, 3), w]);
  }
  checkOp('groupNorm 3-d, one group of 4096', (t) => kiln.groupNorm(t, 1), [rand([2, 8, 512], 4)]);
});

test('cuda dropout draws the CPU mask from the same seed; p = 0, p = 1 and eval mode', { skip }, () => {
  const x = rand([33, 65], 5, 'contiguous', 'float32');
  const cpu = kiln.dropout(x, 0.3, true, new kiln.Generator(7));
  const gpu = kiln.dropout(x.to('cuda'), 0.3, true, new kiln.Generator(7)).to('cpu');
  assert.deepEqual(gpu.toFlatArray(), cpu.toFlatArray(), 'same seed, same result');
  const zeros = cpu.toFlatArray().filter((v) => v === 0).length;
  assert.ok(zeros > 33 * 65 * 0.2 && zeros < 33 * 65 * 0.4, `about 30% dropped, got ${zeros}`);
  const xt = x.transpose(0, 1);
  const cpuT = kiln.dropout(xt, 0.5, true, new kiln.Generator(9));
  const gpuT = kiln.dropout(xt.to('cuda'), 0.5, true, new kiln.Generator(9));
  assert.deepEqual(gpuT.strides, cpuT.strides);
  assert.deepEqual(gpuT.to('cpu').toFlatArray(), cpuT.toFlatArray(), 'transposed input: logical order');
  const xc = x.to('cuda') as Tensor;
  assert.deepEqual(kiln.dropout(xc, 0.3, false).to('cpu').toFlatArray(), x.toFlatArray(), 'eval mode is the identity');
  assert.deepEqual(kiln.dropout(xc, 0, true).to('cpu').toFlatArray(), x.toFlatArray(), 'p = 0 is the identity');
  assert.ok(kiln.dropout(xc, 1, true).to('cpu').toFlatArray().every((v) => v === 0), 'p = 1 zeroes everything');
  const h = kiln.dropout(x.to('bfloat16').to('cuda'), 0.25, true, new kiln.Generator(3)).to('cpu');
  const hc = kiln.dropout(x.to('bfloat16'), 0.25, true, new kiln.Generator(3));
  assert.deepEqual(h.toFlatArray(), hc.toFlatArray(), 'bfloat16: same mask and scale');
});
