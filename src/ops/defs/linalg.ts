/**
 * Linear algebra and normalisation ops: matmul (full PyTorch semantics, batched with batch-dim
 * broadcasting), mm, bmm, dot, linear, addmm, layerNorm, rmsNorm, groupNorm and batchNorm.
 *
 * Matrix products require matching dtypes (no promotion, as PyTorch) and reject bool; integer
 * products are exact (float64 accumulation). Norms take floating inputs and give outputs of the
 * input dtype; layerNorm is contiguous (as torch's native_layer_norm), rmsNorm keeps the input's
 * layout (pointwise composite in torch), groupNorm/batchNorm follow suggest_memory_format
 * (channels_last 4-d input gives channels_last output, anything else contiguous).
 */
import type { DType } from '../../tensor/dtype.js';
import { isFloating, isIntegral } from '../../tensor/dtype.js';
import { broadcastShapes, channelsLastStrides, contiguousStrides, fmtShape, numel, shapeEquals } from '../../tensor/layout.js';
import type { TensorMeta } from '../../tensor/tensor.js';
import { checkInt, checkTensor, describe, pointwiseStrides } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta, ScalarValue } from '../schema.js';

/** `'name' [2, 3] float32` */
export function operand(name: string, t: TensorMeta): string {
  return `'${name}' ${describe(t)}`;
}

/** Same dtype across all operands of a matrix product, and not bool. */
function checkProductDtypes(op: string, ...named: [string, TensorMeta | null][]): DType {
  const present = named.filter((x): x is [string, TensorMeta] => x[1] !== null);
  const [firstName, first] = present[0]!;
  for (const [name, t] of present.slice(1)) {
    if (t.dtype !== first.dtype) {
      throw new TypeError(
        `${op}: expected all operands to have the same dtype, but ${operand(firstName, first)} is ${first.dtype} and ${operand(name, t)} is ${t.dtype}`,
      );
    }
  }
  if (first.dtype === 'bool') throw new TypeError(`${op}: not implemented for dtype bool (${operand(firstName, first)})`);
  return first.dtype;
}

function checkAtLeast(op: string, name: string, t: TensorMeta, rank: number): void {
  if (t.shape.length < rank) {
    throw new Error(`${op}: argument '${name}' must have at least ${rank} dim${rank > 1 ? 's' : ''}, got shape ${fmtShape(t.shape)}`);
  }
}

function checkExactRank(op: string, name: string, t: TensorMeta, rank: number, what: string): void {
  if (t.shape.length !== rank) throw new Error(`${op}: argument '${name}' must be a ${rank}-d ${what}, got shape ${fmtShape(t.shape)}`);
}

function innerMismatch(op: string, aName: string, a: TensorMeta, bName: string, b: TensorMeta, ka: number, kb: number): Error {
  return new Error(`${op}: ${operand(aName, a)} and ${operand(bName, b)} cannot be multiplied (contracted dims ${ka} and ${kb} differ)`);
}

/** The output shape of matmul (PyTorch semantics); validates the contracted and batch dims. */
export function matmulShape(op: string, a: TensorMeta, b: TensorMeta, aName = 'self', bName = 'other'): number[] {
  const ra = a.shape.length;
  const rb = b.shape.length;
  if (ra === 0 || rb === 0) {
    throw new Error(`${op}: both arguments need at least 1 dim, got ${operand(aName, a)} and ${operand(bName, b)}`);
  }
  const ka = a.shape[ra - 1]!;
  const kb = rb === 1 ? b.shape[0]! : b.shape[rb - 2]!;
  if (ka !== kb) throw innerMismatch(op, aName, a, bName, b, ka, kb);
  const batchA = ra >= 2 ? a.shape.slice(0, ra - 2) : [];
  const batchB = rb >= 2 ? b.shape.slice(0, rb - 2) : [];
  let batch: number[];
  try {
    batch = broadcastShapes(op, batchA, batchB);
  } catch {
    throw new Error(
      `${op}: batch dims ${fmtShape(batchA)} of ${operand(aName, a)} and ${fmtShape(batchB)} of ${operand(bName, b)} cannot be broadcast together`,
    );
  }
  const out = [...batch];
  if (ra >= 2) out.push(a.shape[ra - 2]!);
  if (rb >= 2) out.push(b.shape[rb - 1]!);
  return out;
}

/**
 * torch's matmul of two operands of 3 or more dims always runs bmm, which allocates its result with
 * the second operand's dtype and returns before the kernel that checks dtypes when the result is
 * empty or the contracted dim is 0 (zeros). So a mixed-dtype product with nothing to multiply is
 * no error there: float64 [1, 3, 0] @ bfloat16 [1, 0, 1] is bfloat16 zeros [1, 3, 1] (fuzz cases
 * 967, 1375). Lower ranks fold to mm or dot, which check dtypes first (cases 875, 1256, 2416), and
 * bool stays rejected. Returns that dtype, or null where the ordinary check applies.
 */
function emptyBatchedDtype(self: TensorMeta, other: TensorMeta, shape: readonly number[]): DType | null {
  if (self.dtype === other.dtype || self.shape.length < 3 || other.shape.length < 3) return null;
  if (self.dtype === 'bool' || other.dtype === 'bool') return null;
  return numel(shape) === 0 || self.shape[self.shape.length - 1] === 0 ? other.dtype : null;
}

function checkScalarFor(op: string, name: string, v: ScalarValue, dtype: DType): void {
  if (typeof v !== 'number' && typeof v !== 'boolean') throw new TypeError(`${op}: '${name}' must be a number, got ${typeof v}`);
  if (isIntegral(dtype) && typeof v === 'number' && !Number.isInteger(v)) {
    throw new TypeError(`${op}: '${name}' ${v} must be an integer for ${dtype} operands`);
  }
}

export const matmul = defineOp({
  name: 'matmul',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'other', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['extern'],
  method: true,
  meta(self: TensorMeta, other: TensorMeta): OutMeta {
    checkTensor('matmul', 'self', self);
    checkTensor('matmul', 'other', other);
    const shape = matmulShape('matmul', self, other);
    const dtype = emptyBatchedDtype(self, other, shape) ?? checkProductDtypes('matmul', ['self', self], ['other', other]);
    return { shape, strides: contiguousStrides(shape), dtype, device: self.device };
  },
});

export const mm = defineOp({
  name: 'mm',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'mat2', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['extern'],
  method: true,
  meta(self: TensorMeta, mat2: TensorMeta): OutMeta {
    checkTensor('mm', 'self', self);
    checkTensor('mm', 'mat2', mat2);
    checkExactRank('mm', 'self', self, 2, 'matrix');
    checkExactRank('mm', 'mat2', mat2, 2, 'matrix');
    const dtype = checkProductDtypes('mm', ['self', self], ['mat2', mat2]);
    const shape = matmulShape('mm', self, mat2, 'self', 'mat2');
    return { shape, strides: contiguousStrides(shape), dtype, device: self.device };
  },
});

export const bmm = defineOp({
  name: 'bmm',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'mat2', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['extern'],
  method: true,
  meta(self: TensorMeta, mat2: TensorMeta): OutMeta {
    checkTensor('bmm', 'self', self);
    checkTensor('bmm', 'mat2', mat2);
    checkExactRank('bmm', 'self', self, 3, 'tensor');
    checkExactRank('bmm', 'mat2', mat2, 3, 'tensor');
    const dtype = checkProductDtypes('bmm', ['self', self], ['mat2', mat2]);
    if (self.shape[0] !== mat2.shape[0]) {
      throw new Error(`bmm: ${operand('self', self)} and ${operand('mat2', mat2)} must have the same number of batches (${self.shape[0]} vs ${mat2.shape[0]})`);
    }
    const shape = matmulShape('bmm', self, mat2, 'self', 'mat2');
    return { shape, strides: contiguousStrides(shape), dtype, device: self.device };
  },
});

export const dot = defineOp({
  name: 'dot',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'tensor', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['extern'],
  method: true,
  meta(self: TensorMeta, tensor: TensorMeta): OutMeta {
    checkTensor('dot', 'self', self);
    checkTensor('dot', 'tensor', tensor);
    checkExactRank('dot', 'self', self, 1, 'tensor');
    checkExactRank('dot', 'tensor', tensor, 1, 'tensor');
    const dtype = checkProductDtypes('dot', ['self', self], ['tensor', tensor]);
    if (self.shape[0] !== tensor.shape[0]) {
      throw new Error(`dot: ${operand('self', self)} and ${operand('tensor', tensor)} must have the same number of elements`);
    }
    return { shape: [], strides: [], dtype, device: self.device };
  },
});

export const linear = defineOp({
  name: 'linear',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'weight', type: 'Tensor' },
    { name: 'bias', type: 'Tensor?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['extern'],
  meta(input: TensorMeta, weight: TensorMeta, bias: TensorMeta | null): OutMeta {
    checkTensor('linear', 'input', input);
    checkTensor('linear', 'weight', weight);
    if (bias !== null) checkTensor('linear', 'bias', bias);
    checkAtLeast('linear', 'input', input, 1);
    if (weight.shape.length !== 1 && weight.shape.length !== 2) {
      throw new Error(`linear: argument 'weight' must be 1-d or 2-d ([outFeatures, inFeatures]), got shape ${fmtShape(weight.shape)}`);
    }
    const dtype = checkProductDtypes('linear', ['input', input], ['weight', weight], ['bias', bias]);
    const inF = input.shape[input.shape.length - 1]!;
    const wIn = weight.shape[weight.shape.length - 1]!;
    if (inF !== wIn) {
      throw new Error(`linear: ${operand('input', input)} has ${inF} input features but ${operand('weight', weight)} expects ${wIn} (cannot be multiplied)`);
    }
    const shape = input.shape.slice(0, -1);
    if (weight.shape.length === 2) shape.push(weight.shape[0]!);
    if (bias !== null) {
      let ok = bias.shape.length <= shape.length;
      if (ok) {
        try {
          ok = shapeEquals(broadcastShapes('linear', shape, bias.shape), shape);
        } catch {
          ok = false;
        }
      }
      if (!ok) throw new Error(`linear: ${operand('bias', bias)} cannot be broadcast to the output shape ${fmtShape(shape)}`);
    }
    return { shape, strides: contiguousStrides(shape), dtype, device: input.device };
  },
});

export const addmm = defineOp({
  name: 'addmm',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'mat1', type: 'Tensor' },
    { name: 'mat2', type: 'Tensor' },
    { name: 'beta', type: 'Scalar' },
    { name: 'alpha', type: 'Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['extern'],
  method: true,
  meta(self: TensorMeta, mat1: TensorMeta, mat2: TensorMeta, beta: ScalarValue, alpha: ScalarValue): OutMeta {
    checkTensor('addmm', 'self', self);
    checkTensor('addmm', 'mat1', mat1);
    checkTensor('addmm', 'mat2', mat2);
    checkExactRank('addmm', 'mat1', mat1, 2, 'matrix');
    checkExactRank('addmm', 'mat2', mat2, 2, 'matrix');
    const dtype = checkProductDtypes('addmm', ['self', self], ['mat1', mat1], ['mat2', mat2]);
    const shape = matmulShape('addmm', mat1, mat2, 'mat1', 'mat2');
    let ok = self.shape.length <= 2;
    if (ok) {
      try {
        ok = shapeEquals(broadcastShapes('addmm', shape, self.shape), shape);
      } catch {
        ok = false;
      }
    }
    if (!ok) throw new Error(`addmm: ${operand('self', self)} cannot be broadcast to the product shape ${fmtShape(shape)}`);
    checkScalarFor('addmm', 'beta', beta, dtype);
    checkScalarFor('addmm', 'alpha', alpha, dtype);
    return { shape, strides: contiguousStrides(shape), dtype, device: self.device };
  },
});

// ---------------------------------------------------------------------------------------------
// Normalisation

function checkFloatInput(op: string, name: string, t: TensorMeta): void {
  if (!isFloating(t.dtype)) throw new TypeError(`${op}: expected a floating point '${name}', got ${describe(t)}`);
}

function checkEps(op: string, eps: unknown): void {
  if (typeof eps !== 'number' || Number.isNaN(eps)) throw new TypeError(`${op}: 'eps' must be a number, got ${String(eps)}`);
}

/** Validates normalizedShape against the trailing dims of the input and returns it. */
function checkNormalizedShape(op: string, input: TensorMeta, normalizedShape: readonly number[]): number[] {
  if (!Array.isArray(normalizedShape) || normalizedShape.some((s) => !Number.isInteger(s) || s < 0)) {
    throw new TypeError(`${op}: 'normalizedShape' must be an array of non-negative integers, got ${String(normalizedShape)}`);
  }
  if (normalizedShape.length === 0) throw new Error(`${op}: 'normalizedShape' must have at least 1 dim, got []`);
  const r = input.shape.length;
  const k = normalizedShape.length;
  if (k > r || !shapeEquals(input.shape.slice(r - k), normalizedShape)) {
    throw new Error(
      `${op}: normalizedShape ${fmtShape(normalizedShape)} expects 'input' of shape [*, ${normalizedShape.join(', ')}], but got ${describe(input)}`,
    );
  }
  return [...normalizedShape];
}

function checkParam(op: string, name: string, t: TensorMeta | null, shape: readonly number[], what: string): void {
  if (t === null) return;
  checkTensor(op, name, t);
  checkFloatInput(op, name, t);
  if (!shapeEquals(t.shape, shape)) throw new Error(`${op}: ${operand(name, t)} does not match ${what} ${fmtShape(shape)}`);
}

/**
 * PyTorch's suggest_memory_format for norm outputs: channels_last strides when a 4-d input's
 * strides look like channels_last (is_channels_last_strides_2d), else contiguous.
 */
export function suggestedStrides(t: TensorMeta): number[] {
  const { shape, strides } = t;
  if (shape.length === 4 && stridesLikeChannelsLast(shape, strides)) return channelsLastStrides(shape);
  return contiguousStrides(shape);
}

function stridesLikeChannelsLast(shape: readonly number[], strides: readonly number[]): boolean {
  let min = 0;
  if (strides[1] === 0) return false;
  for (const d of [1, 3, 2, 0]) {
    if (shape[d] === 0) return false;
    if (strides[d]! < min) return false;
    if (d === 0 && min === strides[1]) return false;
    min = strides[d]!;
    if (shape[d]! > 1) min *= shape[d]!;
  }
  return true;
}

export const layerNorm = defineOp({
  name: 'layerNorm',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'normalizedShape', type: 'int[]' },
    { name: 'weight', type: 'Tensor?' },
    { name: 'bias', type: 'Tensor?' },
    { name: 'eps', type: 'float' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, normalizedShape: readonly number[], weight: TensorMeta | null, bias: TensorMeta | null, eps: number): OutMeta {
    checkTensor('layerNorm', 'input', input);
    checkFloatInput('layerNorm', 'input', input);
    const ns = checkNormalizedShape('layerNorm', input, normalizedShape);
    checkParam('layerNorm', 'weight', weight, ns, 'normalizedShape');
    checkParam('layerNorm', 'bias', bias, ns, 'normalizedShape');
    checkEps('layerNorm', eps);
    return { shape: input.shape, strides: contiguousStrides(input.shape), dtype: input.dtype, device: input.device };
  },
});

/** torch.finfo(dtype).eps: rmsNorm's default eps. */
export function finfoEps(dtype: DType): number {
  switch (dtype) {
    case 'float16':
      return 0.0009765625;
    case 'bfloat16':
      return 0.0078125;
    default:
      return 1.1920928955078125e-7;
  }
}

export const rmsNorm = defineOp({
  name: 'rmsNorm',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'normalizedShape', type: 'int[]' },
    { name: 'weight', type: 'Tensor?' },
    { name: 'eps', type: 'float?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, normalizedShape: readonly number[], weight: TensorMeta | null, eps: number | null): OutMeta {
    checkTensor('rmsNorm', 'input', input);
    checkFloatInput('rmsNorm', 'input', input);
    const ns = checkNormalizedShape('rmsNorm', input, normalizedShape);
    checkParam('rmsNorm', 'weight', weight, ns, 'normalizedShape');
    if (eps !== null && eps !== undefined) checkEps('rmsNorm', eps);
    return { shape: input.shape, strides: pointwiseStrides(input.shape, [input]), dtype: input.dtype, device: input.device };
  },
});

export const groupNorm = defineOp({
  name: 'groupNorm',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'numGroups', type: 'int' },
    { name: 'weight', type: 'Tensor?' },
    { name: 'bias', type: 'Tensor?' },
    { name: 'eps', type: 'float' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, numGroups: number, weight: TensorMeta | null, bias: TensorMeta | null, eps: number): OutMeta {
    checkTensor('groupNorm', 'input', input);
    checkFloatInput('groupNorm', 'input', input);
    if (input.shape.length < 2) throw new Error(`groupNorm: expected 'input' of shape (N, C, *) with at least 2 dims, got ${describe(input)}`);
    checkInt('groupNorm', 'numGroups', numGroups, 1);
    const c = input.shape[1]!;
    if (c % numGroups !== 0) {
      throw new Error(`groupNorm: the ${c} channels of 'input' ${describe(input)} are not divisible by numGroups ${numGroups}`);
    }
    checkParam('groupNorm', 'weight', weight, [c], 'the channels of input: expected shape');
    checkParam('groupNorm', 'bias', bias, [c], 'the channels of input: expected shape');
    checkEps('groupNorm', eps);
    return { shape: input.shape, strides: suggestedStrides(input), dtype: input.dtype, device: input.device };
  },
});

export const batchNorm = defineOp({
  name: 'batchNorm',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'runningMean', type: 'Tensor?', mutated: true },
    { name: 'runningVar', type: 'Tensor?', mutated: true },
    { name: 'weight', type: 'Tensor?' },
    { name: 'bias', type: 'Tensor?' },
    { name: 'training', type: 'bool' },
    { name: 'momentum', type: 'float' },
    { name: 'eps', type: 'float' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(
    input: TensorMeta,
    runningMean: TensorMeta | null,
    runningVar: TensorMeta | null,
    weight: TensorMeta | null,
    bias: TensorMeta | null,
    training: boolean,
    momentum: number,
    eps: number,
  ): OutMeta {
    checkTensor('batchNorm', 'input', input);
    checkFloatInput('batchNorm', 'input', input);
    if (input.shape.length < 2) throw new Error(`batchNorm: expected 'input' of shape (N, C, *) with at least 2 dims, got ${describe(input)}`);
    const c = input.shape[1]!;
    const params: [string, TensorMeta | null][] = [
      ['runningMean', runningMean],
      ['runningVar', runningVar],
      ['weight', weight],
      ['bias', bias],
    ];
    for (const [name, t] of params) {
      if (t === null) continue;
      checkTensor('batchNorm', name, t);
      checkFloatInput('batchNorm', name, t);
      if (t.shape.length !== 1 || t.shape[0] !== c) {
        throw new Error(`batchNorm: ${operand(name, t)} should have shape [${c}] (the channels of 'input' ${describe(input)})`);
      }
    }
    if (!training && (runningMean === null || runningVar === null)) {
      throw new Error(`batchNorm: 'runningMean' and 'runningVar' must be given in evaluation mode (training = false)`);
    }
    if (training && (runningMean === null) !== (runningVar === null)) {
      throw new Error(`batchNorm: 'runningMean' and 'runningVar' must be given together or not at all`);
    }
    if (training && c > 0 && numel(input.shape) / c <= 1) {
      throw new Error(`batchNorm: expected more than 1 value per channel when training, got 'input' ${describe(input)}`);
    }
    if (typeof momentum !== 'number' || Number.isNaN(momentum)) throw new TypeError(`batchNorm: 'momentum' must be a number, got ${String(momentum)}`);
    checkEps('batchNorm', eps);
    return { shape: input.shape, strides: suggestedStrides(input), dtype: input.dtype, device: input.device };
  },
});
