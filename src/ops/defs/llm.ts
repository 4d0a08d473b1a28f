/**
 * LLM library ops, part 1: normalisation, gated activations and rotary embeddings, with vLLM's
 * semantics. Ops are named `llm.<name>` (public as kiln.llm.<name> and kiln.ops.llm.<name>).
 *
 *   llm.rmsNorm(x, weight, eps)                 x * rsqrt(mean(x^2, -1) + eps) * weight
 *   llm.fusedAddRmsNorm(x, residual, w, eps)    in place: residual = x + residual; x = rmsNorm(residual)
 *   llm.addRmsNorm(x, residual, w, eps)         out of place: [rmsNorm(x + residual), x + residual]
 *   llm.siluAndMul(x) / llm.geluAndMul(x, a)    act(x[..., :d]) * x[..., d:]
 *   llm.rotaryEmbedding(pos, q, k, hs, cache, neox)  in place on q (and k)
 *
 * Outputs of out-of-place ops are contiguous; in-place ops return the very tensors they wrote.
 * Inputs may have any strides.
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { fmtShape } from '../../tensor/layout.js';
import { checkTensor, describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { dense, floatTensor, intTensor, oneOf, positiveFloat, posInt, sameDevice, sameDtype, sameView, shapeIs } from './llm-common.js';

function normArgs(op: string, x: TensorMeta, weight: TensorMeta, eps: number): number {
  floatTensor(op, 'input', x);
  floatTensor(op, 'weight', weight);
  const h = x.shape[x.shape.length - 1]!;
  shapeIs(op, 'weight', weight, [h], () => `the last dim of input ${fmtShape(x.shape)}`);
  sameDtype(op, ['input', x], ['weight', weight]);
  sameDevice(op, ['input', x], ['weight', weight]);
  positiveFloat(op, 'eps', eps);
  return h;
}

export const rmsNorm = defineOp({
  name: 'llm.rmsNorm',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'weight', type: 'Tensor' },
    { name: 'eps', type: 'float' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, weight: TensorMeta, eps: number): OutMeta {
    normArgs('llm.rmsNorm', input, weight, eps);
    return dense(input.shape, input.dtype, input.device);
  },
});

function addNormArgs(op: string, x: TensorMeta, residual: TensorMeta, weight: TensorMeta, eps: number): void {
  normArgs(op, x, weight, eps);
  floatTensor(op, 'residual', residual);
  if (residual.shape.length !== x.shape.length || residual.shape.some((s, i) => s !== x.shape[i])) {
    throw new Error(`${op}: argument 'residual' (${describe(residual)}) must have the shape of 'input' (${describe(x)})`);
  }
  sameDtype(op, ['input', x], ['residual', residual]);
  sameDevice(op, ['input', x], ['residual', residual]);
}

export const fusedAddRmsNorm = defineOp({
  name: 'llm.fusedAddRmsNorm',
  args: [
    { name: 'input', type: 'Tensor', mutated: true },
    { name: 'residual', type: 'Tensor', mutated: true },
    { name: 'weight', type: 'Tensor' },
    { name: 'eps', type: 'float' },
  ],
  outputs: [
    { name: 'input', type: 'Tensor', aliasOf: 'input' },
    { name: 'residual', type: 'Tensor', aliasOf: 'residual' },
  ],
  tags: ['inplace'],
  meta(input: TensorMeta, residual: TensorMeta, weight: TensorMeta, eps: number): OutMeta[] {
    addNormArgs('llm.fusedAddRmsNorm', input, residual, weight, eps);
    return [sameView(input), sameView(residual)];
  },
});

export const addRmsNorm = defineOp({
  name: 'llm.addRmsNorm',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'residual', type: 'Tensor' },
    { name: 'weight', type: 'Tensor' },
    { name: 'eps', type: 'float' },
  ],
  outputs: [
    { name: 'out', type: 'Tensor' },
    { name: 'residualOut', type: 'Tensor' },
  ],
  meta(input: TensorMeta, residual: TensorMeta, weight: TensorMeta, eps: number): OutMeta[] {
    addNormArgs('llm.addRmsNorm', input, residual, weight, eps);
    return [dense(input.shape, input.dtype, input.device), dense(input.shape, input.dtype, input.device)];
  },
});

function gatedMeta(op: string, input: TensorMeta): OutMeta {
  floatTensor(op, 'input', input);
  const last = input.shape[input.shape.length - 1]!;
  if (last % 2 !== 0) throw new Error(`${op}: the last dim of 'input' must be even (two halves: gate, then up), got ${describe(input)}`);
  return dense([...input.shape.slice(0, -1), last / 2], input.dtype, input.device);
}

export const siluAndMul = defineOp({
  name: 'llm.siluAndMul',
  args: [{ name: 'input', type: 'Tensor' }],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta): OutMeta {
    return gatedMeta('llm.siluAndMul', input);
  },
});

export const GELU_APPROXIMATIONS = ['none', 'tanh'] as const;
export type GeluApproximate = (typeof GELU_APPROXIMATIONS)[number];

export const geluAndMul = defineOp({
  name: 'llm.geluAndMul',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'approximate', type: 'str' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, approximate: GeluApproximate): OutMeta {
    oneOf('llm.geluAndMul', 'approximate', approximate, GELU_APPROXIMATIONS);
    return gatedMeta('llm.geluAndMul', input);
  },
});

/** Token count, heads and rotary dim of a rotaryEmbedding call (validated). */
export interface RopeGeometry {
  tokens: number;
  qHeads: number;
  kHeads: number;
  headSize: number;
  rotDim: number;
}

function ropeHeads(op: string, name: string, t: TensorMeta, tokens: number, headSize: number): number {
  const r = t.shape.length;
  if (r !== 2 && r !== 3) throw new Error(`${op}: argument '${name}' must be [tokens, heads * headSize] or [tokens, heads, headSize], got ${describe(t)}`);
  if (t.shape[0] !== tokens) throw new Error(`${op}: argument '${name}' (${describe(t)}) must have ${tokens} tokens (the length of 'positions') in dim 0`);
  if (r === 3) {
    if (t.shape[2] !== headSize) throw new Error(`${op}: argument '${name}' (${describe(t)}) must have headSize ${headSize} in dim 2`);
    return t.shape[1]!;
  }
  if (t.shape[1]! % headSize !== 0) throw new Error(`${op}: the last dim of '${name}' (${describe(t)}) must be a multiple of headSize ${headSize}`);
  return t.shape[1]! / headSize;
}

export function ropeGeometry(positions: TensorMeta, query: TensorMeta, key: TensorMeta | null, headSize: number, cache: TensorMeta, isNeox: boolean): RopeGeometry {
  const op = 'llm.rotaryEmbedding';
  intTensor(op, 'positions', positions);
  if (positions.shape.length !== 1) throw new Error(`${op}: argument 'positions' must be 1-d [tokens], got ${describe(positions)}`);
  floatTensor(op, 'query', query, 2);
  posInt(op, 'headSize', headSize, 2);
  if (typeof isNeox !== 'boolean') throw new TypeError(`${op}: argument 'isNeox' must be a boolean, got ${String(isNeox)}`);
  const tokens = positions.shape[0]!;
  const qHeads = ropeHeads(op, 'query', query, tokens, headSize);
  let kHeads = 0;
  if (key !== null && key !== undefined) {
    checkTensor(op, 'key', key);
    sameDtype(op, ['query', query], ['key', key]);
    sameDevice(op, ['query', query], ['key', key]);
    kHeads = ropeHeads(op, 'key', key, tokens, headSize);
  }
  floatTensor(op, 'cosSinCache', cache, 2);
  if (cache.shape.length !== 2) throw new Error(`${op}: argument 'cosSinCache' must be 2-d [maxPosition, rotaryDim], got ${describe(cache)}`);
  const rotDim = cache.shape[1]!;
  if (rotDim % 2 !== 0 || rotDim < 2 || rotDim > headSize) {
    throw new Error(`${op}: the rotary dim (last dim of 'cosSinCache' ${describe(cache)}) must be even and in [2, headSize=${headSize}], got ${rotDim}`);
  }
  sameDevice(op, ['query', query], ['cosSinCache', cache]);
  sameDevice(op, ['query', query], ['positions', positions]);
  return { tokens, qHeads, kHeads, headSize, rotDim };
}

export const rotaryEmbedding = defineOp({
  name: 'llm.rotaryEmbedding',
  args: [
    { name: 'positions', type: 'Tensor' },
    { name: 'query', type: 'Tensor', mutated: true },
    { name: 'key', type: 'Tensor?', mutated: true },
    { name: 'headSize', type: 'int' },
    { name: 'cosSinCache', type: 'Tensor' },
    { name: 'isNeox', type: 'bool' },
  ],
  outputs: [
    { name: 'query', type: 'Tensor', aliasOf: 'query' },
    { name: 'key', type: 'Tensor', aliasOf: 'key' },
  ],
  tags: ['inplace'],
  meta(positions: TensorMeta, query: TensorMeta, key: TensorMeta | null, headSize: number, cosSinCache: TensorMeta, isNeox: boolean): OutMeta[] {
    ropeGeometry(positions, query, key, headSize, cosSinCache, isNeox);
    return key === null || key === undefined ? [sameView(query)] : [sameView(query), sameView(key)];
  },
});
