/**
 * Pointwise ops: unary math, binary arithmetic and comparisons, logical ops, clamp, where, lerp,
 * and their in-place variants. Meta functions follow PyTorch's promotion rules (src/tensor/dtype.ts)
 * and TensorIterator's output layout (pointwiseMeta); they are the validators for every user error.
 */
import type { DType } from '../../tensor/dtype.js';
import { isFloating, resultType, toFloating } from '../../tensor/dtype.js';
import type { TensorMeta } from '../../tensor/tensor.js';
import { checkIntegerValue } from '../../tensor/typed.js';
import { checkTensor, describe, isTensorMeta, pointwiseMeta } from '../meta-helpers.js';
import { defineOp, type Op } from '../registry.js';
import type { OutMeta, ScalarValue } from '../schema.js';
import { checkInplace } from './core.js';

type Operand = TensorMeta | ScalarValue;

function fmtOperand(x: Operand | null | undefined): string {
  if (x === null || x === undefined) return String(x);
  return isTensorMeta(x) ? describe(x) : `scalar ${String(x)}`;
}

function checkOperand(op: string, name: string, x: unknown): asserts x is Operand {
  if (typeof x === 'number' || typeof x === 'boolean' || isTensorMeta(x)) return;
  throw new TypeError(`${op}: argument '${name}' must be a Tensor or a number/boolean scalar, got ${x === null ? 'null' : typeof x}`);
}

function checkScalar(op: string, name: string, x: unknown): asserts x is ScalarValue {
  if (typeof x === 'number' || typeof x === 'boolean') return;
  throw new TypeError(`${op}: argument '${name}' must be a number or boolean scalar, got ${x === null ? 'null' : typeof x}`);
}

/** In-place ops write through self's strides: a self with broadcast (stride-0) dims can't be written. */
function checkWritable(op: string, self: TensorMeta): void {
  if (self.strides.some((s, i) => s === 0 && self.shape[i]! > 1)) {
    throw new Error(
      `${op}: unsupported operation: more than one element of the written-to tensor 'self' ${describe(self)} (strides [${self.strides.join(', ')}]) refers to a single memory location`,
    );
  }
}

function inplace(op: string, self: TensorMeta, result: OutMeta): OutMeta {
  checkTensor(op, 'self', self);
  checkWritable(op, self);
  return checkInplace(op, self, result);
}

// ---------------------------------------------------------------------------------------------
// Unary ops
// ---------------------------------------------------------------------------------------------

/**
 * How a unary op picks its output dtype:
 * - float: float dtypes kept, integer/bool inputs give float32 (exp, sqrt, sigmoid, ...)
 * - floatOnly: float dtypes kept, integer/bool inputs rejected; torch has no integer kernel for
 *   these and raises NotImplementedError ("GeluKernelImpl" not implemented for 'Long') rather than
 *   promoting (gelu)
 * - keepSigned: dtype kept; bool rejected (neg, abs, relu)
 * - keep: dtype kept, bool too (sign)
 * - rounding: dtype kept (integers are returned unchanged); bool rejected (floor, ceil, round, trunc)
 * - square: dtype kept; bool gives int64 (square is pow(x, 2))
 * - bool: bool output (isnan, isinf, isfinite, logicalNot)
 */
export type UnaryRule = 'float' | 'floatOnly' | 'keepSigned' | 'keep' | 'rounding' | 'square' | 'bool';

function unaryDtype(op: string, self: TensorMeta, rule: UnaryRule): DType {
  switch (rule) {
    case 'float':
      return toFloating(self.dtype);
    case 'floatOnly':
      if (!isFloating(self.dtype)) {
        throw new TypeError(`${op}: not implemented for ${self.dtype} input 'self' (${describe(self)}); it takes float16, bfloat16, float32 or float64, as torch does, so cast first (e.g. .float())`);
      }
      return self.dtype;
    case 'keep':
      return self.dtype;
    case 'keepSigned':
    case 'rounding':
      if (self.dtype === 'bool') throw new TypeError(`${op}: argument 'self' (${describe(self)}) has dtype bool, which ${op} does not support`);
      return self.dtype;
    case 'square':
      return self.dtype === 'bool' ? 'int64' : self.dtype;
    case 'bool':
      return 'bool';
    default:
      return rule satisfies never;
  }
}

export function unaryMeta(op: string, self: TensorMeta, rule: UnaryRule): OutMeta {
  checkTensor(op, 'self', self);
  return pointwiseMeta(op, [self], unaryDtype(op, self, rule));
}

export type UnaryOp = Op<[TensorMeta], OutMeta>;

function unary(name: string, rule: UnaryRule): UnaryOp {
  return defineOp({
    name,
    args: [{ name: 'self', type: 'Tensor' }],
    outputs: [{ name: 'out', type: 'Tensor' }],
    tags: ['pointwise'],
    method: true,
    meta(self: TensorMeta): OutMeta {
      return unaryMeta(name, self, rule);
    },
  });
}

function unaryInplace(name: string, rule: UnaryRule): UnaryOp {
  return defineOp({
    name,
    args: [{ name: 'self', type: 'Tensor', mutated: true }],
    outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
    tags: ['pointwise', 'inplace'],
    method: true,
    meta(self: TensorMeta): OutMeta {
      return inplace(name, self, unaryMeta(name, self, rule));
    },
  });
}

export const neg = unary('neg', 'keepSigned');
export const abs = unary('abs', 'keepSigned');
export const sign = unary('sign', 'keep');
export const exp = unary('exp', 'float');
export const expm1 = unary('expm1', 'float');
export const log = unary('log', 'float');
export const log2 = unary('log2', 'float');
export const log10 = unary('log10', 'float');
export const log1p = unary('log1p', 'float');
export const sqrt = unary('sqrt', 'float');
export const rsqrt = unary('rsqrt', 'float');
export const reciprocal = unary('reciprocal', 'float');
export const square = unary('square', 'square');
export const sin = unary('sin', 'float');
export const cos = unary('cos', 'float');
export const tan = unary('tan', 'float');
export const tanh = unary('tanh', 'float');
export const sigmoid = unary('sigmoid', 'float');
export const erf = unary('erf', 'float');
export const relu = unary('relu', 'keepSigned');
export const silu = unary('silu', 'float');
export const floor = unary('floor', 'rounding');
export const ceil = unary('ceil', 'rounding');
export const round = unary('round', 'rounding');
export const trunc = unary('trunc', 'rounding');
export const isnan = unary('isnan', 'bool');
export const isinf = unary('isinf', 'bool');
export const isfinite = unary('isfinite', 'bool');
export const logicalNot = unary('logicalNot', 'bool');

export const relu_ = unaryInplace('relu_', 'keepSigned');
export const neg_ = unaryInplace('neg_', 'keepSigned');
export const exp_ = unaryInplace('exp_', 'float');
export const sigmoid_ = unaryInplace('sigmoid_', 'float');
export const tanh_ = unaryInplace('tanh_', 'float');

export type GeluApproximate = 'none' | 'tanh';

export const gelu = defineOp({
  name: 'gelu',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'approximate', type: 'str' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, approximate: GeluApproximate): OutMeta {
    if (approximate !== 'none' && approximate !== 'tanh') {
      throw new Error(`gelu: argument 'approximate' must be 'none' or 'tanh', got '${String(approximate)}'`);
    }
    return unaryMeta('gelu', self, 'floatOnly');
  },
});

export const softplus = defineOp({
  name: 'softplus',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'beta', type: 'float' },
    { name: 'threshold', type: 'float' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, beta: number, threshold: number): OutMeta {
    if (typeof beta !== 'number' || Number.isNaN(beta) || beta === 0) {
      throw new Error(`softplus: argument 'beta' must be a non-zero number, got ${String(beta)}`);
    }
    if (typeof threshold !== 'number' || Number.isNaN(threshold)) {
      throw new Error(`softplus: argument 'threshold' must be a number, got ${String(threshold)}`);
    }
    return unaryMeta('softplus', self, 'float');
  },
});

// ---------------------------------------------------------------------------------------------
// Binary ops
// ---------------------------------------------------------------------------------------------

/** Broadcast shape, preserved layout and promoted dtype of self (tensor) and other (tensor or scalar). */
function binaryMeta(op: string, self: TensorMeta, other: Operand, dtype?: DType): OutMeta {
  checkTensor(op, 'self', self);
  checkOperand(op, 'other', other);
  return pointwiseMeta(op, [self, other], dtype);
}

function isBoolOperand(x: Operand): boolean {
  return typeof x === 'boolean' || (isTensorMeta(x) && x.dtype === 'bool');
}

export const sub = defineOp({
  name: 'sub',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'other', type: 'Tensor|Scalar' },
    { name: 'alpha', type: 'Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, other: Operand, alpha: ScalarValue): OutMeta {
    const out = binaryMeta('sub', self, other);
    checkScalar('sub', 'alpha', alpha);
    if (isBoolOperand(self) || isBoolOperand(other)) {
      throw new TypeError(
        `sub: subtraction with a bool operand is not supported ('self' ${fmtOperand(self)}, 'other' ${fmtOperand(other)}); use logicalXor or logicalNot instead`,
      );
    }
    if (typeof alpha === 'boolean' || (!Number.isInteger(alpha) && !isFloating(out.dtype))) {
      throw new TypeError(`sub: alpha ${String(alpha)} is not valid for result dtype ${out.dtype} ('self' ${fmtOperand(self)}, 'other' ${fmtOperand(other)})`);
    }
    return out;
  },
});

export const mul = defineOp({
  name: 'mul',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'other', type: 'Tensor|Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, other: Operand): OutMeta {
    return binaryMeta('mul', self, other);
  },
});

export type RoundingMode = 'trunc' | 'floor' | null;

export const div = defineOp({
  name: 'div',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'other', type: 'Tensor|Scalar' },
    { name: 'roundingMode', type: 'str?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, other: Operand, roundingMode: RoundingMode): OutMeta {
    if (roundingMode !== null && roundingMode !== undefined && roundingMode !== 'trunc' && roundingMode !== 'floor') {
      throw new Error(`div: argument 'roundingMode' must be undefined, 'trunc' or 'floor', got '${String(roundingMode)}'`);
    }
    const out = binaryMeta('div', self, other);
    if (roundingMode === null || roundingMode === undefined) return { ...out, dtype: toFloating(out.dtype) };
    if (out.dtype === 'bool') {
      throw new TypeError(`div: roundingMode '${roundingMode}' is not supported for bool operands ('self' ${fmtOperand(self)}, 'other' ${fmtOperand(other)})`);
    }
    if (!isFloating(out.dtype) && typeof other !== 'object' && Number(other) === 0) {
      throw new RangeError(`div: integer division by zero ('other' is scalar 0, 'self' ${describe(self)}, roundingMode '${roundingMode}')`);
    }
    return out;
  },
});

function checkNotBoolResult(op: string, out: OutMeta, a: Operand, b: Operand): void {
  if (out.dtype === 'bool') throw new TypeError(`${op}: not supported for bool operands (${fmtOperand(a)} and ${fmtOperand(b)})`);
}

function remainderMeta(op: string, self: Operand, other: Operand): OutMeta {
  const out = pointwiseMeta(op, [self, other]);
  checkNotBoolResult(op, out, self, other);
  if (!isFloating(out.dtype) && typeof other !== 'object' && Number(other) === 0) {
    throw new RangeError(`${op}: integer remainder by zero ('other' is scalar 0, 'self' ${fmtOperand(self)})`);
  }
  return out;
}

export const remainder = defineOp({
  name: 'remainder',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'other', type: 'Tensor|Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, other: Operand): OutMeta {
    checkTensor('remainder', 'self', self);
    checkOperand('remainder', 'other', other);
    return remainderMeta('remainder', self, other);
  },
});

/** remainder(scalar, tensor): the Scalar_Tensor overload behind the public `remainder`. */
export const remainderScalar = defineOp({
  name: 'remainderScalar',
  args: [
    { name: 'self', type: 'Scalar' },
    { name: 'other', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  publicName: 'remainder',
  meta(self: ScalarValue, other: TensorMeta): OutMeta {
    checkScalar('remainder', 'self', self);
    checkTensor('remainder', 'other', other);
    return remainderMeta('remainder', self, other);
  },
});

function powMeta(op: string, self: Operand, exponent: Operand): OutMeta {
  const out = pointwiseMeta(op, [self, exponent]);
  checkNotBoolResult(op, out, self, exponent);
  if (!isFloating(out.dtype) && typeof exponent === 'number' && exponent < 0) {
    throw new RangeError(`${op}: integers to negative integer powers are not allowed ('self' ${fmtOperand(self)}, 'exponent' ${exponent})`);
  }
  return out;
}

export const pow = defineOp({
  name: 'pow',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'exponent', type: 'Tensor|Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, exponent: Operand): OutMeta {
    checkTensor('pow', 'self', self);
    checkOperand('pow', 'exponent', exponent);
    return powMeta('pow', self, exponent);
  },
});

/** pow(scalar, tensor): the Scalar overload behind the public `pow`. */
export const powScalar = defineOp({
  name: 'powScalar',
  args: [
    { name: 'self', type: 'Scalar' },
    { name: 'exponent', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  publicName: 'pow',
  meta(self: ScalarValue, exponent: TensorMeta): OutMeta {
    checkScalar('pow', 'self', self);
    checkTensor('pow', 'exponent', exponent);
    return powMeta('pow', self, exponent);
  },
});

/** Binary op whose 'other' must be a tensor (as in PyTorch's maximum, atan2, logical_and...). */
function tensorBinary(name: string, dtypeRule: 'promote' | 'float' | 'bool'): Op<[TensorMeta, TensorMeta], OutMeta> {
  return defineOp({
    name,
    args: [
      { name: 'self', type: 'Tensor' },
      { name: 'other', type: 'Tensor' },
    ],
    outputs: [{ name: 'out', type: 'Tensor' }],
    tags: ['pointwise'],
    method: true,
    meta(self: TensorMeta, other: TensorMeta): OutMeta {
      checkTensor(name, 'self', self);
      checkTensor(name, 'other', other);
      const out = pointwiseMeta(name, [self, other]);
      if (dtypeRule === 'float') return { ...out, dtype: toFloating(out.dtype) };
      if (dtypeRule === 'bool') return { ...out, dtype: 'bool' };
      return out;
    },
  });
}

export const maximum = tensorBinary('maximum', 'promote');
export const minimum = tensorBinary('minimum', 'promote');
export const atan2 = tensorBinary('atan2', 'float');
export const logaddexp = tensorBinary('logaddexp', 'float');
export const hypot = tensorBinary('hypot', 'float');
export const logicalAnd = tensorBinary('logicalAnd', 'bool');
export const logicalOr = tensorBinary('logicalOr', 'bool');
export const logicalXor = tensorBinary('logicalXor', 'bool');

/** Comparison: operands are compared in their promoted dtype; the output is bool. */
function comparison(name: string): Op<[TensorMeta, Operand], OutMeta> {
  return defineOp({
    name,
    args: [
      { name: 'self', type: 'Tensor' },
      { name: 'other', type: 'Tensor|Scalar' },
    ],
    outputs: [{ name: 'out', type: 'Tensor' }],
    tags: ['pointwise'],
    method: true,
    meta(self: TensorMeta, other: Operand): OutMeta {
      return binaryMeta(name, self, other, 'bool');
    },
  });
}

export const eq = comparison('eq');
export const ne = comparison('ne');
export const lt = comparison('lt');
export const le = comparison('le');
export const gt = comparison('gt');
export const ge = comparison('ge');

export const sub_ = defineOp({
  name: 'sub_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'other', type: 'Tensor|Scalar' },
    { name: 'alpha', type: 'Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['pointwise', 'inplace'],
  method: true,
  meta(self: TensorMeta, other: Operand, alpha: ScalarValue): OutMeta {
    return inplace('sub_', self, sub.meta(self, other, alpha));
  },
});

export const mul_ = defineOp({
  name: 'mul_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'other', type: 'Tensor|Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['pointwise', 'inplace'],
  method: true,
  meta(self: TensorMeta, other: Operand): OutMeta {
    return inplace('mul_', self, mul.meta(self, other));
  },
});

export const div_ = defineOp({
  name: 'div_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'other', type: 'Tensor|Scalar' },
    { name: 'roundingMode', type: 'str?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['pointwise', 'inplace'],
  method: true,
  meta(self: TensorMeta, other: Operand, roundingMode: RoundingMode): OutMeta {
    return inplace('div_', self, div.meta(self, other, roundingMode));
  },
});

// ---------------------------------------------------------------------------------------------
// clamp, where, lerp
// ---------------------------------------------------------------------------------------------

function clampMeta(op: string, self: TensorMeta, min: Operand | null, max: Operand | null): OutMeta {
  checkTensor(op, 'self', self);
  const isNone = (x: unknown): boolean => x === null || x === undefined;
  if (isNone(min) && isNone(max)) throw new Error(`${op}: at least one of 'min' or 'max' must be given (self ${describe(self)})`);
  const operands: Operand[] = [self];
  if (!isNone(min)) {
    checkOperand(op, 'min', min);
    operands.push(min);
  }
  if (!isNone(max)) {
    checkOperand(op, 'max', max);
    operands.push(max);
  }
  const out = pointwiseMeta(op, operands);
  // torch promotes self with the bounds first and has no bool clamp kernel: a bool self with
  // integer bounds computes in int64 (torch.clamp(bool, -1, 1) is int64, fuzz case 1196); only a
  // bool computation (bool self and bool bounds) is an error.
  if (out.dtype === 'bool') {
    throw new TypeError(`${op}: not supported for bool tensors (self ${describe(self)}, min ${fmtOperand(min)}, max ${fmtOperand(max)}); integer bounds compute in int64`);
  }
  return out;
}

export const clamp = defineOp({
  name: 'clamp',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'min', type: 'Scalar?' },
    { name: 'max', type: 'Scalar?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, min: ScalarValue | null, max: ScalarValue | null): OutMeta {
    if (min !== null && min !== undefined) checkScalar('clamp', 'min', min);
    if (max !== null && max !== undefined) checkScalar('clamp', 'max', max);
    return clampMeta('clamp', self, min, max);
  },
});

/** clamp with tensor bounds (PyTorch's clamp.Tensor), behind the public `clamp`. */
export const clampTensor = defineOp({
  name: 'clampTensor',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'min', type: 'Tensor?' },
    { name: 'max', type: 'Tensor?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  publicName: 'clamp',
  meta(self: TensorMeta, min: TensorMeta | null, max: TensorMeta | null): OutMeta {
    if (min !== null && min !== undefined) checkTensor('clamp', 'min', min);
    if (max !== null && max !== undefined) checkTensor('clamp', 'max', max);
    return clampMeta('clamp', self, min, max);
  },
});

export const clamp_ = defineOp({
  name: 'clamp_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'min', type: 'Scalar?' },
    { name: 'max', type: 'Scalar?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['pointwise', 'inplace'],
  method: true,
  meta(self: TensorMeta, min: ScalarValue | null, max: ScalarValue | null): OutMeta {
    if (min !== null && min !== undefined) checkScalar('clamp_', 'min', min);
    if (max !== null && max !== undefined) checkScalar('clamp_', 'max', max);
    return inplace('clamp_', self, clampMeta('clamp_', self, min, max));
  },
});

export const clampTensor_ = defineOp({
  name: 'clampTensor_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'min', type: 'Tensor?' },
    { name: 'max', type: 'Tensor?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['pointwise', 'inplace'],
  method: true,
  publicName: 'clamp_',
  meta(self: TensorMeta, min: TensorMeta | null, max: TensorMeta | null): OutMeta {
    if (min !== null && min !== undefined) checkTensor('clamp_', 'min', min);
    if (max !== null && max !== undefined) checkTensor('clamp_', 'max', max);
    return inplace('clamp_', self, clampMeta('clamp_', self, min, max));
  },
});

export const where = defineOp({
  name: 'where',
  args: [
    { name: 'condition', type: 'Tensor' },
    { name: 'self', type: 'Tensor|Scalar' },
    { name: 'other', type: 'Tensor|Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  meta(condition: TensorMeta, self: Operand, other: Operand): OutMeta {
    checkTensor('where', 'condition', condition);
    checkOperand('where', 'self', self);
    checkOperand('where', 'other', other);
    if (condition.dtype !== 'bool') {
      throw new TypeError(`where: expected 'condition' to be a bool tensor, got ${describe(condition)}`);
    }
    const dtype = resultType([self, other]);
    return pointwiseMeta('where', [condition, self, other], dtype);
  },
});

export const lerp = defineOp({
  name: 'lerp',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'end', type: 'Tensor' },
    { name: 'weight', type: 'Tensor|Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, end: TensorMeta, weight: Operand): OutMeta {
    checkTensor('lerp', 'self', self);
    checkTensor('lerp', 'end', end);
    checkOperand('lerp', 'weight', weight);
    if (!isFloating(self.dtype)) throw new TypeError(`lerp: argument 'self' (${describe(self)}) must be a floating tensor`);
    if (end.dtype !== self.dtype) {
      throw new TypeError(`lerp: expected 'end' to have dtype ${self.dtype} like 'self' ${describe(self)}, got ${describe(end)}`);
    }
    if (isTensorMeta(weight) && weight.dtype !== self.dtype) {
      throw new TypeError(`lerp: expected 'weight' to have dtype ${self.dtype} like 'self' ${describe(self)}, got ${describe(weight)}`);
    }
    if (typeof weight === 'boolean') throw new TypeError(`lerp: 'weight' must be a number or a tensor, got boolean ${weight}`);
    return pointwiseMeta('lerp', [self, end, weight], self.dtype);
  },
});

// ---------------------------------------------------------------------------------------------
// fill_, zero_
// ---------------------------------------------------------------------------------------------

export const fill_ = defineOp({
  name: 'fill_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'value', type: 'Tensor|Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['inplace'],
  method: true,
  meta(self: TensorMeta, value: Operand): OutMeta {
    checkTensor('fill_', 'self', self);
    checkOperand('fill_', 'value', value);
    checkWritable('fill_', self);
    // A number that the integer dtype cannot hold is an error, not a wrapped value (torch's checked conversion).
    if (!isTensorMeta(value)) checkIntegerValue('fill_', value as number | bigint | boolean, self.dtype);
    if (isTensorMeta(value) && value.shape.length !== 0) {
      throw new Error(`fill_: only supports a 0-dimension value tensor, but got 'value' ${describe(value)} with ${value.shape.length} dimensions`);
    }
    return self;
  },
});

export const zero_ = defineOp({
  name: 'zero_',
  args: [{ name: 'self', type: 'Tensor', mutated: true }],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['inplace'],
  method: true,
  meta(self: TensorMeta): OutMeta {
    checkTensor('zero_', 'self', self);
    checkWritable('zero_', self);
    return self;
  },
});
