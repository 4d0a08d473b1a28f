/**
 * The cuda pointwise ops' repeated-call path (runMemoized in src/kernels/cuda/pointwise-run.ts)
 * reuses the previous call's kernel when nothing that selects it changed. These tests call one op
 * back to back while each selecting input changes between calls (alignment of a view's offset,
 * dtype, a scalar's value, broadcasting, strides, element count, a cpu zero-dim operand) and
 * compare every result with the CPU kernel's; a stale kernel would read misaligned vectors, the
 * wrong dtype or the wrong scalar and fail here.
 */
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertMatchesCpu, skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

function rand(shape: number[], seed: number, dtype: kiln.DType = 'float32'): Tensor {
  return kiln.randn(shape, { generator: new kiln.Generator(seed) }).to(dtype);
}

type BinaryOp = (self: Tensor, other: Tensor | number) => Tensor;

/** Runs `op` on the cuda copies of the operands and on the cpu originals, and compares. */
function check(label: string, op: BinaryOp, x: Tensor, other: Tensor | number): void {
  // A zero-dim cpu tensor stays on the cpu: the cuda kernels take it as a host scalar.
  const dOther = typeof other === 'number' || other.ndim === 0 ? other : other.to('cuda');
  assertMatchesCpu(label, op(x.to('cuda'), dOther), op(x, other));
}

test('cuda add: repeated calls with changing alignment, dtype, broadcasting and size', { skip }, () => {
  const a = rand([4096], 1);
  const b = rand([4096], 2);
  check('aligned', kiln.add, a, b);
  check('aligned again', kiln.add, a, b);
  // A view at offset 1: not 16-byte aligned, so the vectorised kernel must not be reused.
  const da = a.to('cuda');
  const db = b.to('cuda');
  const got = kiln.add(da.narrow(0, 1, 4000), db.narrow(0, 3, 4000));
  assertMatchesCpu('offset views', got, kiln.add(a.narrow(0, 1, 4000), b.narrow(0, 3, 4000)));
  check('aligned after offsets', kiln.add, a, b);
  check('float16', kiln.add, a.to('float16'), b.to('float16'));
  check('bfloat16 + float32', kiln.add, a.to('bfloat16'), b);
  check('broadcast row', kiln.add, rand([64, 64], 3), rand([64], 4));
  check('transposed', kiln.add, rand([64, 32], 5).t(), rand([32, 64], 6));
  check('small (scalar loop, no vectors)', kiln.add, rand([40], 7), rand([40], 8));
  check('one element', kiln.add, rand([1], 9), rand([1], 10));
  check('cpu zero-dim operand', kiln.add, rand([4096], 11), kiln.tensor(2.5));
  check('back to the first call', kiln.add, a, b);
});

test('cuda mul and add: a host scalar that changes between calls reaches the kernel', { skip }, () => {
  const x = rand([2048], 12);
  for (const s of [2, -0.5, 3.25, 1e-3]) check(`mul by ${s}`, kiln.mul, x, s);
  for (const alpha of [1, 2, -1]) {
    const a = rand([2048], 13);
    const b = rand([2048], 14);
    const got = kiln.add(a.to('cuda'), b.to('cuda'), alpha);
    assertMatchesCpu(`add alpha ${alpha}`, got, kiln.add(a, b, alpha));
  }
});

test('cuda add_: in-place repeated calls keep accumulating the right values', { skip }, () => {
  const x = rand([1024], 15);
  const y = rand([1024], 16);
  const dx = x.to('cuda');
  const dy = y.to('cuda');
  for (let i = 0; i < 50; i++) {
    kiln.add_(dx, dy, 0.5);
    kiln.add_(x, y, 0.5);
  }
  assertMatchesCpu('50 x add_', dx, x, { atol: 1e-5, rtol: 1e-6 });
});
