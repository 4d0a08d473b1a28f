/**
 * Every cuda kernel against the CPU kernel on the same inputs: pointwise ops (fp32/fp16/bf16 and
 * integers), contiguous, transposed, offset (misaligned) and broadcast operands, scalars and
 * zero-dim operands, in-place ops, casts and copies, factories, scans, GEMMs, embedding, and a
 * pointwise op over more than 2^31 elements (reductions, softmax and norms:
 * cuda-reductions.test.ts). Skips where no CUDA device exists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DType } from '../src/tensor/dtype.js';
import { rand, makeTensor, randomInts } from './helpers/make.js';
import { assertMatchesCpu, checkOp, skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
const FLOATS: DType[] = ['float32', 'float16', 'bfloat16'];
type Fn = (...xs: Tensor[]) => Tensor;
type Api = Record<string, (...args: unknown[]) => Tensor>;
const api = kiln as unknown as Api;

/** Views applied identically on both devices: the kernel sees the same strides on each. */
const layouts: [string, (t: Tensor) => Tensor][] = [
  ['contiguous', (t) => t],
  ['transposed', (t) => kiln.transpose(t, 0, 1)],
  ['offset', (t) => kiln.narrow(t, 1, 1, t.shape[1]! - 2)],
];

/** Runs fn(layout(inputs)) on CPU and cuda and compares. */
function checkLayouts(label: string, fn: Fn, inputs: Tensor[], tol = {}): void {
  for (const [name, lay] of layouts) checkOp(`${label} [${name}]`, (...xs) => fn(...xs.map(lay)), inputs, tol);
}

const POSITIVE = new Set(['log', 'log2', 'log10', 'sqrt', 'rsqrt', 'reciprocal']);
const UNARY = ['neg', 'abs', 'sign', 'exp', 'expm1', 'log', 'log2', 'log10', 'log1p', 'sqrt', 'rsqrt', 'reciprocal', 'sin', 'cos', 'tan', 'tanh', 'sigmoid', 'erf', 'relu', 'silu', 'floor', 'ceil', 'round', 'trunc', 'square', 'isnan', 'isinf', 'isfinite', 'logicalNot'];

test('unary pointwise ops match the CPU in fp32/fp16/bf16, on contiguous, transposed and offset views', { skip }, () => {
  for (const dtype of FLOATS) {
    for (const name of UNARY) {
      const lo = POSITIVE.has(name) ? 0.1 : name === 'log1p' ? -0.5 : -3;
      const x = rand([67, 33], 7, 'contiguous', dtype, lo, 3);
      checkLayouts(`${name} ${dtype}`, (a) => api[name]!(a), [x]);
    }
    const x = rand([40, 50], 3, 'contiguous', dtype);
    checkLayouts(`gelu ${dtype}`, (a) => kiln.gelu(a), [x]);
    checkLayouts(`gelu tanh ${dtype}`, (a) => kiln.gelu(a, 'tanh'), [x]);
    checkLayouts(`softplus ${dtype}`, (a) => kiln.softplus(a, 2, 3), [x]);
  }
  // Integers: the ops that keep integer dtypes, and the float ones (which compute in float32).
  for (const dtype of ['int32', 'int64'] as DType[]) {
    const x = makeTensor(randomInts(300, 5, -50, 50), [20, 15], dtype);
    for (const name of ['neg', 'abs', 'sign', 'square', 'relu', 'floor', 'exp', 'sqrt', 'logicalNot']) checkLayouts(`${name} ${dtype}`, (a) => api[name]!(a), [x]);
  }
});

test('special values: NaN and infinities propagate as on the CPU', { skip }, () => {
  const x = kiln.tensor([NaN, Infinity, -Infinity, 0, -0, 1e30, -1e-30, 2.5, -2.5, 0.5]);
  for (const name of ['relu', 'sign', 'round', 'exp', 'tanh', 'sigmoid', 'isnan', 'isinf', 'isfinite', 'abs', 'floor']) checkOp(name, (a) => api[name]!(a), [x]);
  const y = kiln.tensor([1, NaN, -1, 3, Infinity, 0, 2, -7, 4, 4]);
  checkOp('maximum', (a, b) => kiln.maximum(a, b), [x, y]);
  checkOp('minimum', (a, b) => kiln.minimum(a, b), [x, y]);
  checkOp('clamp', (a) => kiln.clamp(a, -1, 1), [x]);
});

const BINARY: [string, Fn][] = [
  ['add', (a, b) => kiln.add(a, b)],
  ['add alpha', (a, b) => kiln.add(a, b, 2.5)],
  ['sub', (a, b) => kiln.sub(a, b)],
  ['mul', (a, b) => kiln.mul(a, b)],
  ['div', (a, b) => kiln.div(a, b)],
  ['div trunc', (a, b) => kiln.div(a, b, 'trunc')],
  ['div floor', (a, b) => kiln.div(a, b, 'floor')],
  ['remainder', (a, b) => kiln.remainder(a, b)],
  ['pow', (a, b) => kiln.pow(kiln.abs(a), b)],
  ['maximum', (a, b) => kiln.maximum(a, b)],
  ['minimum', (a, b) => kiln.minimum(a, b)],
  ['atan2', (a, b) => kiln.atan2(a, b)],
  ['eq', (a, b) => kiln.eq(a, b)],
  ['lt', (a, b) => kiln.lt(a, b)],
  ['ge', (a, b) => kiln.ge(a, b)],
  ['logicalXor', (a, b) => kiln.logicalXor(kiln.gt(a, 0), kiln.gt(b, 0))],
];

test('binary pointwise ops: same shapes, broadcasting, mixed dtypes, scalars and zero-dim operands', { skip }, () => {
  for (const dtype of FLOATS) {
    const a = rand([48, 40], 11, 'contiguous', dtype);
    const b = rand([48, 40], 12, 'contiguous', dtype, 0.5, 2);
    for (const [name, fn] of BINARY) checkLayouts(`${name} ${dtype}`, fn, [a, b]);
    const col = rand([48, 1], 13, 'contiguous', dtype, 0.5, 2);
    const row = rand([1, 40], 14, 'contiguous', dtype, 0.5, 2);
    for (const [name, fn] of BINARY) {
      checkOp(`${name} ${dtype} broadcast col`, fn, [a, col]);
      checkOp(`${name} ${dtype} broadcast row x col`, fn, [row, col]);
    }
    checkOp(`mul ${dtype} by scalar`, (x) => kiln.mul(x, 0.1), [a]);
    checkOp(`add ${dtype} scalar`, (x) => kiln.add(x, 3), [a]);
    checkOp(`pow ${dtype} scalar exponent`, (x) => kiln.pow(x, 2), [a]);
    checkOp(`pow ${dtype} scalar base`, (x) => kiln.pow(2, x), [a]);
    checkOp(`remainder ${dtype} scalar self`, (x) => kiln.remainder(5, kiln.add(kiln.abs(x), 0.5)), [a]);
    // A zero-dim float32 tensor on the cpu with a half tensor: PyTorch rounds it to the half dtype.
    const z = kiln.tensor(0.1);
    checkOp(`mul ${dtype} zero-dim cpu`, (x) => kiln.mul(x, z), [a]);
    // A zero-dim tensor moved to cuda along with the other input.
    checkOp(`sub ${dtype} zero-dim cuda`, (x, y) => kiln.sub(x, y), [a, kiln.tensor(0.3)]);
  }
  // Mixed dtypes promote (fp16 + bf16 -> float32, int + float -> float).
  checkOp('add fp16+bf16', (x, y) => kiln.add(x, y), [rand([10, 10], 1, 'contiguous', 'float16'), rand([10, 10], 2, 'contiguous', 'bfloat16')]);
  checkOp('mul int32*float32', (x, y) => kiln.mul(x, y), [makeTensor(randomInts(100, 3, -9, 9), [10, 10], 'int32'), rand([10, 10], 4)]);
  for (const dtype of ['int32', 'int64'] as DType[]) {
    const a = makeTensor(randomInts(200, 21, -40, 40), [20, 10], dtype);
    const b = makeTensor(randomInts(200, 22, 1, 9), [20, 10], dtype);
    for (const name of ['add', 'sub', 'mul', 'div', 'div trunc', 'div floor', 'remainder', 'maximum', 'eq', 'lt']) checkOp(`${name} ${dtype}`, BINARY.find(([n]) => n === name)![1], [a, b]);
    checkOp(`pow ${dtype}`, (x, y) => kiln.pow(x, y), [a, makeTensor(randomInts(200, 23, 0, 4), [20, 10], dtype)]);
  }
  const ia = makeTensor([4, -5], [2], 'int64').to('cuda');
  assert.throws(() => kiln.div(ia, kiln.tensor([0, 1], { dtype: 'int64' }).to('cuda'), 'floor'), /ZeroDivisionError/);
});

test('ternary ops and clamp: where, lerp, clampTensor, maskedFill', { skip }, () => {
  for (const dtype of FLOATS) {
    const a = rand([30, 20], 31, 'contiguous', dtype);
    const b = rand([30, 20], 32, 'contiguous', dtype);
    const w = rand([1, 20], 33, 'contiguous', dtype, 0, 1);
    checkLayouts(`where ${dtype}`, (x, y) => kiln.where(kiln.gt(x, 0), x, y), [a, b]);
    checkOp(`where scalar ${dtype}`, (x) => kiln.where(kiln.gt(x, 0), x, 0.5), [a]);
    checkOp(`lerp ${dtype}`, (x, y, z) => kiln.lerp(x, y, z), [a, b, w]);
    checkOp(`lerp scalar ${dtype}`, (x, y) => kiln.lerp(x, y, 0.75), [a, b]);
    checkLayouts(`clamp ${dtype}`, (x) => kiln.clamp(x, -0.5, 0.7), [a]);
    checkOp(`clamp min only ${dtype}`, (x) => kiln.clamp(x, 0.1), [a]);
    checkOp(`clampTensor ${dtype}`, (x, lo, hi) => kiln.clamp(x, lo, hi), [a, kiln.mul(w, -1).to(dtype), w]);
    checkOp(`maskedFill ${dtype}`, (x, y) => kiln.maskedFill(x, kiln.gt(y, 0), -2), [a, b]);
  }
});

test('in-place ops write through views and match the CPU', { skip }, () => {
  const inplace: [string, (t: Tensor, o: Tensor) => void][] = [
    ['add_', (t, o) => kiln.add_(t, o, 0.5)],
    ['mul_', (t, o) => kiln.mul_(t, o)],
    ['sub_', (t, o) => kiln.sub_(t, o)],
    ['div_', (t, o) => kiln.div_(t, kiln.add(kiln.abs(o), 1))],
    ['relu_', (t) => kiln.relu_(t)],
    ['exp_', (t) => kiln.exp_(t)],
    ['clamp_', (t) => kiln.clamp_(t, -0.2, 0.3)],
    ['fill_', (t) => kiln.fill_(t, 1.25)],
    ['zero_', (t) => kiln.zero_(t)],
    // Another view of self's storage is read while self is written: it must be read before the writes.
    ['mul_ self-transpose', (t) => kiln.mul_(t, kiln.transpose(t, 0, 1))],
  ];
  for (const dtype of FLOATS) {
    for (const [name, f] of inplace) {
      const base = rand([24, 24], 41, 'contiguous', dtype);
      const other = rand([24, 24], 42, 'contiguous', dtype);
      const run = (t: Tensor, o: Tensor): Tensor => {
        const dst = kiln.clone(t);
        f(kiln.transpose(dst, 0, 1), o);
        return dst;
      };
      checkOp(`${name} ${dtype}`, run, [base, other]);
    }
  }
});

test('casts, copies, clone/contiguous, cross-device copy_ and factories', { skip }, () => {
  const x = rand([33, 65], 51, 'contiguous', 'float32', -300, 300);
  for (const to of ['float16', 'bfloat16', 'float64', 'int32', 'int64', 'uint8', 'bool'] as DType[]) {
    checkLayouts(`to ${to}`, (a) => a.to(to), [x]);
  }
  const ints = makeTensor(randomInts(100, 2, -1000, 1000), [10, 10], 'int64');
  checkOp('int64 -> float32', (a) => a.to('float32'), [ints]);
  checkOp('int64 -> float16', (a) => a.to('float16'), [ints]);
  checkOp('bf16 -> fp16', (a) => a.to('float16'), [rand([10, 10], 3, 'contiguous', 'bfloat16')]);
  checkLayouts('contiguous', (a) => kiln.contiguous(a), [x]);
  checkLayouts('clone', (a) => kiln.clone(a), [x]);
  checkOp('reshape of a transposed view (copy)', (a) => kiln.reshape(kiln.transpose(a, 0, 1), [-1]), [x]);
  checkOp('cat', (a, b) => kiln.cat([a, b], 1), [x, rand([33, 7], 52)]);
  checkOp('stack', (a, b) => kiln.stack([a, b], 0), [x, rand([33, 65], 53)]);
  for (const dg of [-1, 0, 2]) {
    checkOp(`tril ${dg}`, (a) => kiln.tril(a, dg), [rand([3, 7, 5], 54)]);
    checkOp(`triu ${dg} transposed`, (a) => kiln.triu(kiln.transpose(a, 1, 2), dg), [rand([3, 7, 5], 55, 'contiguous', 'bfloat16')]);
  }
  checkOp('expand + contiguous', (a) => kiln.contiguous(kiln.expand(a, [5, 33, 65])), [x]);
  // copy_ from a cpu tensor into a cuda view (broadcast, cast).
  const dst = kiln.zeros([4, 6], { device: 'cuda', dtype: 'float16' });
  kiln.transpose(dst, 0, 1).copy_(kiln.tensor([[1], [2], [3], [4], [5], [6]]));
  assert.deepEqual(dst.toArray(), [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]]);
  assert.deepEqual(kiln.full([2, 3], 7, { device: 'cuda', dtype: 'int32' }).toArray(), [[7, 7, 7], [7, 7, 7]]);
  assert.deepEqual(kiln.ones([3], { device: 'cuda', dtype: 'bfloat16' }).toArray(), [1, 1, 1]);
  assert.deepEqual(kiln.zeros([2], { device: 'cuda' }).toArray(), [0, 0]);
  assert.deepEqual(kiln.arange(0, 5, { device: 'cuda' }).toArray(), [0, 1, 2, 3, 4]);
  kiln.manualSeed(5);
  const r1 = kiln.randn([100]);
  kiln.manualSeed(5);
  const r2 = kiln.randn([100], { device: 'cuda' });
  assertMatchesCpu('randn is the same on every device for a seed', r2, r1);
});

test('cumsum and cumprod (hand-written scans) over rows and columns, integer scans in int64, dtype casts', { skip }, () => {
  for (const dtype of FLOATS) {
    const s = rand([5, 300], 64, 'contiguous', dtype, -1, 1);
    checkLayouts(`cumsum dim 1 ${dtype}`, (a) => kiln.cumsum(a, 1), [s], dtype === 'float32' ? { atol: 1e-4 } : { atol: 2e-2 });
    checkOp(`cumsum dim 0 ${dtype}`, (a) => kiln.cumsum(a, 0), [s], dtype === 'float32' ? { atol: 1e-5 } : {});
    checkOp(`cumprod ${dtype}`, (a) => kiln.cumprod(a, 1), [rand([4, 40], 65, 'contiguous', dtype, 0.8, 1.2)], dtype === 'float32' ? { atol: 1e-5 } : { atol: 2e-2 });
  }
  checkOp('cumsum int32 -> int64', (a) => kiln.cumsum(a, 0), [makeTensor(randomInts(1000, 66, -9, 9), [1000], 'int32')]);
  checkOp('cumsum to float32', (a) => kiln.cumsum(a, 1, 'float32'), [rand([3, 70], 67, 'contiguous', 'bfloat16')]);
});

// Reductions, softmax, logSoftmax and the norms: test/cuda-reductions.test.ts (float64 references).

test('GEMMs through cuBLASLt: mm, bmm, broadcast matmul, linear with fused bias, addmm, dot', { skip }, () => {
  for (const dtype of [...FLOATS, 'float64'] as DType[]) {
    const tol = dtype === 'float32' ? { atol: 1e-4 } : {};
    const a = rand([65, 33], 81, 'contiguous', dtype);
    const b = rand([33, 47], 82, 'contiguous', dtype);
    checkOp(`mm ${dtype}`, (x, y) => kiln.mm(x, y), [a, b], tol);
    checkOp(`mm transposed operands ${dtype}`, (x, y) => kiln.mm(kiln.transpose(kiln.contiguous(kiln.transpose(x, 0, 1)), 0, 1), kiln.transpose(kiln.contiguous(kiln.transpose(y, 0, 1)), 0, 1)), [a, b], tol);
    checkOp(`mm offset view ${dtype}`, (x, y) => kiln.mm(kiln.narrow(x, 1, 1, 31), kiln.narrow(y, 0, 2, 31)), [a, b], tol);
    checkOp(`bmm ${dtype}`, (x, y) => kiln.bmm(x, y), [rand([3, 17, 9], 83, 'contiguous', dtype), rand([3, 9, 13], 84, 'contiguous', dtype)], tol);
    checkOp(`matmul broadcast ${dtype}`, (x, y) => kiln.matmul(x, y), [rand([2, 1, 5, 8], 85, 'contiguous', dtype), rand([3, 8, 4], 86, 'contiguous', dtype)], tol);
    checkOp(`matmul 3d @ 2d ${dtype}`, (x, y) => kiln.matmul(x, y), [rand([4, 6, 8], 87, 'contiguous', dtype), rand([8, 5], 88, 'contiguous', dtype)], tol);
    checkOp(`matmul vec ${dtype}`, (x, y) => kiln.matmul(x, y), [rand([8], 89, 'contiguous', dtype), rand([8, 5], 90, 'contiguous', dtype)], tol);
    const x3 = rand([2, 5, 33], 91, 'contiguous', dtype);
    const w = rand([47, 33], 92, 'contiguous', dtype);
    const bias = rand([47], 93, 'contiguous', dtype);
    checkOp(`linear + bias ${dtype}`, (x, ww, bb) => kiln.linear(x, ww, bb), [x3, w, bias], tol);
    checkOp(`linear no bias ${dtype}`, (x, ww) => kiln.linear(x, ww), [x3, w], tol);
    checkOp(`linear transposed input ${dtype}`, (x, ww) => kiln.linear(kiln.transpose(x, 0, 1), ww), [x3, w], tol);
    checkOp(`addmm ${dtype}`, (c, x, y) => kiln.addmm(c, x, y, 0.5, 2), [rand([47], 94, 'contiguous', dtype), a, b], tol);
    checkOp(`dot ${dtype}`, (x, y) => kiln.dot(x, y), [rand([100], 95, 'contiguous', dtype), rand([100], 96, 'contiguous', dtype)], tol);
  }
  // Integer products run on the exact fallback kernel (cuBLASLt has no integer GEMM of these types).
  const i = makeTensor([1, 2, 3, 4], [2, 2], 'int32').to('cuda');
  assert.deepEqual(Array.from(kiln.mm(i, i).to('cpu').toFlatArray(), Number), [7, 10, 15, 22]);
});

test('embedding and indexSelect gather rows; out-of-range indices raise at the next read-back (device-side check)', { skip }, () => {
  for (const dtype of FLOATS) {
    const w = rand([50, 16], 101, 'contiguous', dtype);
    const idx = makeTensor(randomInts(21, 5, 0, 50), [3, 7], 'int64');
    checkOp(`embedding ${dtype}`, (ix, ww) => kiln.embedding(ix, ww), [idx, w]);
    checkOp(`indexSelect dim 1 ${dtype}`, (ww, ix) => kiln.indexSelect(ww, 1, ix), [w, makeTensor([3, 0, 15, 3], [4], 'int32')]);
  }
  const w = rand([5, 4], 1).to('cuda');
  assert.throws(() => kiln.embedding(kiln.tensor([1, 5], { dtype: 'int64' }).to('cuda'), w).toArray(), /embedding: index 5 is out of range for 'weight' rows of size 5/);
});

test('gather matches the CPU along every dim', { skip }, () => {
  const x = rand([6, 7, 5], 111);
  for (const d of [0, 1, 2]) {
    const size = x.shape[d]!;
    const ishape = [4, 3, 2];
    checkOp(`gather dim ${d}`, (a, ix) => kiln.gather(a, d, ix), [x, makeTensor(randomInts(24, 112 + d, 0, size), ishape, 'int64')]);
  }
  checkOp('gather transposed self', (a, ix) => kiln.gather(kiln.transpose(a, 0, 2), 1, ix), [x, makeTensor(randomInts(10, 115, 0, 7), [5, 2, 1], 'int32')]);
});

test('scaled dot-product attention: plain, causal, masks, grouped-query heads', { skip }, () => {
  for (const dtype of FLOATS) {
    const tol = dtype === 'float32' ? { atol: 1e-4 } : {};
    const q = rand([2, 4, 9, 16], 121, 'contiguous', dtype);
    const k = rand([2, 4, 11, 16], 122, 'contiguous', dtype);
    const v = rand([2, 4, 11, 8], 123, 'contiguous', dtype);
    const sdpa = (a: Tensor, b: Tensor, c: Tensor, mask: Tensor | null = null, causal = false, scale: number | null = null): Tensor =>
      kiln.nn.functional.scaledDotProductAttention(a, b, c, mask, 0, causal, scale);
    checkOp(`sdpa ${dtype}`, (a, b, c) => sdpa(a, b, c), [q, k, v], tol);
    checkOp(`sdpa causal ${dtype}`, (a, b, c) => sdpa(a, b, c, null, true), [q, k, v], tol);
    checkOp(`sdpa scale ${dtype}`, (a, b, c) => sdpa(a, b, c, null, false, 0.3), [q, k, v], tol);
    checkOp(`sdpa bool mask ${dtype}`, (a, b, c, m) => sdpa(a, b, c, kiln.gt(m, -1.5)), [q, k, v, rand([9, 11], 124)], tol);
    checkOp(`sdpa float mask ${dtype}`, (a, b, c, m) => sdpa(a, b, c, m), [q, k, v, rand([1, 4, 9, 11], 125, 'contiguous', dtype)], tol);
    checkOp(`sdpa transposed q ${dtype}`, (a, b, c) => sdpa(kiln.transpose(a, 1, 2), kiln.transpose(b, 1, 2), kiln.transpose(c, 1, 2)), [rand([2, 9, 4, 16], 126, 'contiguous', dtype), rand([2, 11, 4, 16], 127, 'contiguous', dtype), rand([2, 11, 4, 8], 128, 'contiguous', dtype)], tol);
    checkOp(`sdpa GQA ${dtype}`, (a, b, c) => kiln.nn.functional.scaledDotProductAttention(a, b, c, null, 0, true, null, true), [rand([1, 8, 5, 16], 129, 'contiguous', dtype), rand([1, 2, 5, 16], 130, 'contiguous', dtype), rand([1, 2, 5, 16], 131, 'contiguous', dtype)], tol);
  }
  const q = rand([1, 2, 3, 4], 1).to('cuda');
  assert.throws(() => kiln.nn.functional.scaledDotProductAttention(q, q, q, null, 0.1), /dropoutP 0\.1 > 0 is not supported on cuda:0/);
});

test('conv2d: padding, stride, dilation, groups, bias, channels_last (float32 exact: TF32 off)', { skip }, () => {
  const F = kiln.nn.functional;
  // float32 is compared at fp32 tolerance, so TF32 (the default, as in PyTorch) is turned off here;
  // test/cuda-conv.test.ts checks the TF32 path at its own tolerance.
  const tf32 = kiln.backends.cuda.allowTf32Conv;
  kiln.backends.cuda.allowTf32Conv = false;
  try {
  for (const dtype of [...FLOATS, 'float64'] as DType[]) {
    const tol = dtype === 'float32' ? { atol: 1e-4 } : dtype === 'bfloat16' ? { atol: 3e-2, rtol: 2e-2 } : {};
    const x = rand([2, 6, 11, 13], 141, 'contiguous', dtype);
    const w = rand([8, 6, 3, 3], 142, 'contiguous', dtype, -0.5, 0.5);
    const b = rand([8], 143, 'contiguous', dtype);
    checkOp(`conv2d ${dtype}`, (a, ww, bb) => F.conv2d(a, ww, bb, 1, 1), [x, w, b], tol);
    checkOp(`conv2d stride 2 dilation 2 ${dtype}`, (a, ww) => F.conv2d(a, ww, null, 2, [2, 1], 2), [x, w], tol);
    checkOp(`conv2d groups 2 ${dtype}`, (a, ww, bb) => F.conv2d(a, ww, bb, 1, 0, 1, 2), [x, rand([8, 3, 3, 3], 144, 'contiguous', dtype, -0.5, 0.5), b], tol);
    checkOp(`conv2d channels_last ${dtype}`, (a, ww, bb) => F.conv2d(kiln.contiguous(a, 'channelsLast'), ww, bb, 2, 3), [x, rand([8, 6, 7, 7], 145, 'contiguous', dtype, -0.2, 0.2), b], tol);
    checkOp(`conv2d unbatched ${dtype}`, (a, ww) => F.conv2d(a, ww, null, 1, 1), [rand([6, 9, 9], 146, 'contiguous', dtype), w], tol);
  }
  } finally {
    kiln.backends.cuda.allowTf32Conv = tf32;
  }
});

test('maxPool2d (values and indices) and avgPool2d, contiguous and channels_last', { skip }, () => {
  const F = kiln.nn.functional;
  for (const dtype of FLOATS) {
    const x = rand([2, 3, 11, 10], 161, 'contiguous', dtype);
    checkOp(`maxPool2d ${dtype}`, (a) => F.maxPool2d(a, 3, 2, 1), [x]);
    checkOp(`maxPool2d dilation ceil ${dtype}`, (a) => F.maxPool2d(a, [2, 3], [2, 1], [1, 0], 2, true), [x]);
    checkOp(`maxPool2d indices ${dtype}`, (a) => F.maxPool2dWithIndices(a, 3, 2, 1).indices, [x]);
    checkOp(`maxPool2d channels_last ${dtype}`, (a) => F.maxPool2d(kiln.contiguous(a, 'channelsLast'), 2), [x]);
    checkOp(`avgPool2d ${dtype}`, (a) => F.avgPool2d(a, 3, 2, 1), [x]);
    checkOp(`avgPool2d exclude pad, ceil ${dtype}`, (a) => F.avgPool2d(a, 3, 2, 1, true, false), [x]);
    checkOp(`avgPool2d divisor ${dtype}`, (a) => F.avgPool2d(kiln.contiguous(a, 'channelsLast'), 2, 2, 0, false, true, 3), [x]);
  }
});

test('batchNorm in evaluation and training mode, including the running statistics', { skip }, () => {
  for (const dtype of FLOATS) {
    const tol = dtype === 'float32' ? { atol: 1e-4 } : {};
    const x = rand([4, 5, 6, 7], 151, 'contiguous', dtype);
    const rm = rand([5], 152, 'contiguous', 'float32');
    const rv = rand([5], 153, 'contiguous', 'float32', 0.5, 2);
    const w = rand([5], 154, 'contiguous', 'float32');
    const b = rand([5], 155, 'contiguous', 'float32');
    const eval_ = (a: Tensor, m: Tensor, v: Tensor, ww: Tensor, bb: Tensor): Tensor => kiln.nn.functional.batchNorm(a, m, v, ww, bb, false, 0.1, 1e-5);
    checkOp(`batchNorm eval ${dtype}`, eval_, [x.to(dtype), rm.to(dtype), rv.to(dtype), w.to(dtype), b.to(dtype)], tol);
    checkOp(`batchNorm eval channels_last ${dtype}`, (a, m, v) => kiln.nn.functional.batchNorm(kiln.contiguous(a, 'channelsLast'), m, v, null, null, false, 0.1, 1e-5), [x, rm.to(dtype), rv.to(dtype)], tol);
    const runCpu = [kiln.clone(rm), kiln.clone(rv)];
    const runCuda = [rm.to('cuda'), rv.to('cuda')];
    const want = kiln.nn.functional.batchNorm(x, runCpu[0]!, runCpu[1]!, w, b, true, 0.1, 1e-5);
    const got = kiln.nn.functional.batchNorm(x.to('cuda'), runCuda[0]!, runCuda[1]!, w.to('cuda'), b.to('cuda'), true, 0.1, 1e-5);
    assertMatchesCpu(`batchNorm train ${dtype}`, got, want, tol);
    assertMatchesCpu(`batchNorm running mean ${dtype}`, runCuda[0]!, runCpu[0]!, { atol: 1e-4 });
    assertMatchesCpu(`batchNorm running var ${dtype}`, runCuda[1]!, runCpu[1]!, { atol: 1e-4 });
  }
});

test('pointwise over more than 2^31 elements uses 64-bit indexing', { skip }, () => {
  const n = 2_200_000_000;
  const x = kiln.ones([n], { dtype: 'uint8', device: 'cuda' });
  const y = kiln.add(x, 2);
  assert.equal(y.dtype, 'uint8');
  assert.deepEqual(kiln.narrow(y, 0, n - 3, 3).toArray(), [3, 3, 3]);
  assert.deepEqual(kiln.narrow(y, 0, 0, 2).toArray(), [3, 3]);
  assert.equal(kiln.sum(y).item(), 3 * n);
  // A strided (transposed) view of the same data takes the strided 64-bit path.
  const t = kiln.transpose(kiln.view(y, [2, n / 2]), 0, 1);
  const z = kiln.mul(t, 2);
  assert.deepEqual(kiln.narrow(kiln.select(z, 0, n / 2 - 1), 0, 0, 2).toArray(), [6, 6]);
  for (const v of [x, y, z]) v.dispose();
  kiln.emptyCache('cuda');
});
