/**
 * Neural-network ops: 2-d convolution, max/avg pooling, scaled dot-product attention and dropout.
 * Output layouts follow PyTorch: convolution is channels_last when the input or the weight
 * suggests channels_last; pooling keeps the input's suggested memory format; attention output is
 * contiguous; dropout preserves the input's layout.
 */
import { isFloating } from '../../tensor/dtype.js';
import {
  broadcastShapes,
  channelsLastStrides,
  contiguousStrides,
  fmtShape,
  preservedStrides,
  shapeEquals,
} from '../../tensor/layout.js';
import type { Generator } from '../../tensor/random.js';
import type { TensorMeta } from '../../tensor/tensor.js';
import { checkTensor, describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';

/**
 * PyTorch's is_channels_last_strides_2d (what suggest_memory_format() reads): strides that order
 * the dims C, W, H, N from innermost to outermost, with its tie-breaking for size-1 dims.
 */
export function stridesLikeChannelsLast(shape: readonly number[], strides: readonly number[]): boolean {
  if (shape.length !== 4) return false;
  if (strides[1] === 0) return false;
  let min = 0;
  for (const d of [1, 3, 2, 0]) {
    if (shape[d] === 0) return false;
    if (strides[d]! < min) return false;
    if (d === 0 && min === strides[1]) return false;
    min = strides[d]!;
    if (shape[d]! > 1) min *= shape[d]!;
  }
  return true;
}

function suggestsChannelsLast(t: TensorMeta): boolean {
  return stridesLikeChannelsLast(t.shape, t.strides);
}

function checkIntList(op: string, name: string, v: unknown, len: number, min: number, what: string): number[] {
  if (!Array.isArray(v) || (v.length !== len && v.length !== 1) || v.some((x) => typeof x !== 'number' || !Number.isInteger(x))) {
    throw new TypeError(`${op}: argument '${name}' must be an integer or a list of ${len} integers, got ${JSON.stringify(v)}`);
  }
  const list = v.length === 1 ? new Array<number>(len).fill(v[0] as number) : [...(v as number[])];
  if (list.some((x) => x < min)) throw new RangeError(`${op}: ${what}, got ${name}=${fmtShape(list)}`);
  return list;
}

function checkFloatingTensor(op: string, name: string, t: TensorMeta): void {
  if (!isFloating(t.dtype)) {
    throw new TypeError(`${op}: argument '${name}' (${describe(t)}) must have a floating dtype (float32, float16 or bfloat16), got ${t.dtype}`);
  }
}

// ---------------------------------------------------------------------------------------------
// conv2d

/**
 * Resolved convolution padding: [top, bottom, left, right]. The op accepts [ph, pw] (symmetric)
 * or the explicit four, which is what padding='same' becomes when the total padding is odd
 * (PyTorch puts the extra row/column at the bottom/right).
 */
export function convPadding(op: string, padding: readonly number[]): [number, number, number, number] {
  if (!Array.isArray(padding) || (padding.length !== 1 && padding.length !== 2 && padding.length !== 4) || padding.some((x) => !Number.isInteger(x))) {
    throw new TypeError(`${op}: argument 'padding' must be an integer, a list of 2 integers, 'same' or 'valid', got ${JSON.stringify(padding)}`);
  }
  if (padding.some((x) => x < 0)) throw new RangeError(`${op}: negative padding is not supported, got padding=${fmtShape(padding)}`);
  if (padding.length === 4) return [padding[0]!, padding[1]!, padding[2]!, padding[3]!];
  const ph = padding[0]!;
  const pw = padding.length === 2 ? padding[1]! : ph;
  return [ph, ph, pw, pw];
}

/** padding='same' for stride 1: total d*(k-1) per dim, the odd extra at the end. */
export function samePadding(op: string, weightShape: readonly number[], stride: readonly number[], dilation: readonly number[]): number[] {
  if (stride.some((s) => s !== 1)) {
    throw new Error(`${op}: padding='same' is not supported for strided convolutions, got stride=${fmtShape(stride)}`);
  }
  const out: number[] = [];
  for (let i = 0; i < 2; i++) {
    const k = weightShape[2 + i] ?? 1;
    const d = dilation.length === 1 ? dilation[0]! : dilation[i]!;
    const total = d * (k - 1);
    const before = Math.floor(total / 2);
    out.push(before, total - before);
  }
  return out;
}

export function convOutputSize(inSize: number, padBefore: number, padAfter: number, k: number, s: number, d: number): number {
  return Math.floor((inSize + padBefore + padAfter - d * (k - 1) - 1) / s) + 1;
}

export const conv2d = defineOp({
  name: 'conv2d',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'weight', type: 'Tensor' },
    { name: 'bias', type: 'Tensor?' },
    { name: 'stride', type: 'int[]' },
    { name: 'padding', type: 'int[]' },
    { name: 'dilation', type: 'int[]' },
    { name: 'groups', type: 'int' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['extern'],
  meta(
    input: TensorMeta,
    weight: TensorMeta,
    bias: TensorMeta | null,
    stride: readonly number[],
    padding: readonly number[],
    dilation: readonly number[],
    groups: number,
  ): OutMeta {
    const op = 'conv2d';
    checkTensor(op, 'input', input);
    checkTensor(op, 'weight', weight);
    if (input.shape.length !== 3 && input.shape.length !== 4) {
      throw new Error(`${op}: expected 3-d (unbatched) or 4-d (batched) input, but got input of size ${fmtShape(input.shape)}`);
    }
    if (weight.shape.length !== 4) {
      throw new Error(
        `${op}: expected 4-d weight [outChannels, inChannels/groups, kH, kW] for input ${fmtShape(input.shape)}, but got ${weight.shape.length}-d weight of size ${fmtShape(weight.shape)}`,
      );
    }
    checkFloatingTensor(op, 'input', input);
    if (weight.dtype !== input.dtype) {
      throw new TypeError(`${op}: input type (${describe(input)}) and weight type (${describe(weight)}) should be the same`);
    }
    if (bias !== null && bias !== undefined) {
      checkTensor(op, 'bias', bias);
      if (bias.dtype !== input.dtype) throw new TypeError(`${op}: input type (${describe(input)}) and bias type (${describe(bias)}) should be the same`);
    }
    if (!Number.isInteger(groups) || groups < 1) throw new RangeError(`${op}: non-positive groups is not supported, got groups=${groups}`);
    const st = checkIntList(op, 'stride', stride, 2, 1, 'non-positive stride is not supported');
    const dil = checkIntList(op, 'dilation', dilation, 2, 1, 'dilation should be greater than zero');
    const [pt, pb, pl, pr] = convPadding(op, padding);
    const batched = input.shape.length === 4;
    const [n, c, h, w] = (batched ? input.shape : [1, ...input.shape]) as [number, number, number, number];
    const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
    if (o % groups !== 0) {
      throw new Error(`${op}: given groups=${groups}, expected weight to be divisible by ${groups} at dimension 0, but got weight of size ${fmtShape(weight.shape)} instead`);
    }
    if (cg * groups !== c) {
      throw new Error(
        `${op}: given groups=${groups}, weight of size ${fmtShape(weight.shape)}, expected input ${fmtShape(input.shape)} to have ${cg * groups} channels, but got ${c} channels instead`,
      );
    }
    if (bias !== null && bias !== undefined && (bias.shape.length !== 1 || bias.shape[0] !== o)) {
      throw new Error(`${op}: given weight of size ${fmtShape(weight.shape)}, expected bias to be 1-dimensional with ${o} elements, but got bias of size ${fmtShape(bias.shape)} instead`);
    }
    const ekh = dil[0]! * (kh - 1) + 1;
    const ekw = dil[1]! * (kw - 1) + 1;
    if (h + pt + pb < ekh || w + pl + pr < ekw) {
      throw new Error(
        `${op}: calculated padded input size per channel: (${h + pt + pb} x ${w + pl + pr}) for input ${fmtShape(input.shape)}; kernel size (with dilation): (${ekh} x ${ekw}); kernel size can't be greater than actual input size`,
      );
    }
    const oh = convOutputSize(h, pt, pb, kh, st[0]!, dil[0]!);
    const ow = convOutputSize(w, pl, pr, kw, st[1]!, dil[1]!);
    const shape4 = [n, o, oh, ow];
    // PyTorch batchifies an unbatched input with unsqueeze(0), whose new stride is size*stride.
    const in4: TensorMeta = batched ? input : { ...input, shape: [1, ...input.shape], strides: [input.shape[0]! * input.strides[0]!, ...input.strides] };
    const cl = suggestsChannelsLast(in4) || suggestsChannelsLast(weight);
    const strides4 = cl ? channelsLastStrides(shape4) : contiguousStrides(shape4);
    if (!batched) return { shape: shape4.slice(1), strides: strides4.slice(1), dtype: input.dtype, device: input.device };
    return { shape: shape4, strides: strides4, dtype: input.dtype, device: input.device };
  },
});

// ---------------------------------------------------------------------------------------------
// pooling

export interface PoolGeometry {
  n: number;
  c: number;
  h: number;
  w: number;
  oh: number;
  ow: number;
  kernel: number[];
  stride: number[];
  padding: number[];
  dilation: number[];
  batched: boolean;
}

/** PyTorch's pooling_output_shape (with the ceil_mode rule that the last window starts inside). */
export function poolOutputSize(inSize: number, k: number, pad: number, s: number, d: number, ceilMode: boolean): number {
  const num = inSize + 2 * pad - d * (k - 1) - 1 + (ceilMode ? s - 1 : 0);
  let out = Math.floor(num / s) + 1;
  if (ceilMode && (out - 1) * s >= inSize + pad) out--;
  return out;
}

function poolGeometry(
  op: string,
  input: TensorMeta,
  kernelSize: readonly number[],
  stride: readonly number[],
  padding: readonly number[],
  dilation: readonly number[],
  ceilMode: boolean,
): PoolGeometry {
  checkTensor(op, 'input', input);
  const rank = input.shape.length;
  if ((rank !== 3 && rank !== 4) || input.shape.slice(rank - 3).some((s) => s === 0)) {
    throw new Error(`${op}: expected 3-d or 4-d (batch mode) input with non-zero channel and spatial sizes (optional 0 batch size), but got ${describe(input)}`);
  }
  const kernel = checkIntList(op, 'kernelSize', kernelSize, 2, 1, 'kernel size should be greater than zero');
  const st = Array.isArray(stride) && stride.length === 0 ? kernel : checkIntList(op, 'stride', stride, 2, 1, 'stride should be greater than zero');
  const pad = checkIntList(op, 'padding', padding, 2, 0, 'padding should be non-negative');
  const dil = checkIntList(op, 'dilation', dilation, 2, 1, 'dilation should be greater than zero');
  if (pad[0]! > Math.floor(kernel[0]! / 2) || pad[1]! > Math.floor(kernel[1]! / 2)) {
    throw new Error(`${op}: pad should be smaller than or equal to half of kernel size, but got padding=${fmtShape(pad)} for kernelSize=${fmtShape(kernel)}`);
  }
  const batched = rank === 4;
  const [n, c, h, w] = (batched ? input.shape : [1, ...input.shape]) as [number, number, number, number];
  const oh = poolOutputSize(h, kernel[0]!, pad[0]!, st[0]!, dil[0]!, ceilMode);
  const ow = poolOutputSize(w, kernel[1]!, pad[1]!, st[1]!, dil[1]!, ceilMode);
  if (oh < 1 || ow < 1) {
    throw new Error(`${op}: given input size (${c}x${h}x${w}) of ${fmtShape(input.shape)}, calculated output size (${c}x${oh}x${ow}) is too small`);
  }
  return { n, c, h, w, oh, ow, kernel, stride: st, padding: pad, dilation: dil, batched };
}

function poolOutMeta(input: TensorMeta, g: PoolGeometry, dtype = input.dtype): OutMeta {
  if (!g.batched) return { shape: [g.c, g.oh, g.ow], strides: contiguousStrides([g.c, g.oh, g.ow]), dtype, device: input.device };
  const shape = [g.n, g.c, g.oh, g.ow];
  const strides = suggestsChannelsLast(input) ? channelsLastStrides(shape) : contiguousStrides(shape);
  return { shape, strides, dtype, device: input.device };
}

export function maxPoolGeometry(
  input: TensorMeta,
  kernelSize: readonly number[],
  stride: readonly number[],
  padding: readonly number[],
  dilation: readonly number[],
  ceilMode: boolean,
  op = 'maxPool2d',
): PoolGeometry {
  checkTensor(op, 'input', input);
  if (input.dtype === 'bool') throw new TypeError(`${op}: argument 'input' (${describe(input)}) has dtype bool, which max pooling does not support`);
  return poolGeometry(op, input, kernelSize, stride, padding, dilation, ceilMode);
}

const poolArgs = [
  { name: 'input', type: 'Tensor' },
  { name: 'kernelSize', type: 'int[]' },
  { name: 'stride', type: 'int[]' },
  { name: 'padding', type: 'int[]' },
  { name: 'dilation', type: 'int[]' },
  { name: 'ceilMode', type: 'bool' },
] as const;

export const maxPool2d = defineOp({
  name: 'maxPool2d',
  args: poolArgs,
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, kernelSize: readonly number[], stride: readonly number[], padding: readonly number[], dilation: readonly number[], ceilMode: boolean): OutMeta {
    return poolOutMeta(input, maxPoolGeometry(input, kernelSize, stride, padding, dilation, ceilMode));
  },
});

export const maxPool2dWithIndices = defineOp({
  name: 'maxPool2dWithIndices',
  args: poolArgs,
  outputs: [
    { name: 'values', type: 'Tensor' },
    { name: 'indices', type: 'Tensor' },
  ],
  meta(input: TensorMeta, kernelSize: readonly number[], stride: readonly number[], padding: readonly number[], dilation: readonly number[], ceilMode: boolean): OutMeta[] {
    const g = maxPoolGeometry(input, kernelSize, stride, padding, dilation, ceilMode, 'maxPool2dWithIndices');
    return [poolOutMeta(input, g), poolOutMeta(input, g, 'int64')];
  },
});

export function avgPoolGeometry(
  input: TensorMeta,
  kernelSize: readonly number[],
  stride: readonly number[],
  padding: readonly number[],
  ceilMode: boolean,
  divisorOverride: number | null,
): PoolGeometry {
  const op = 'avgPool2d';
  checkTensor(op, 'input', input);
  if (!isFloating(input.dtype) && input.dtype !== 'int64') {
    throw new TypeError(`${op}: argument 'input' (${describe(input)}) must be float32, float16, bfloat16 or int64, got ${input.dtype}`);
  }
  if (divisorOverride !== null && divisorOverride !== undefined && (!Number.isInteger(divisorOverride) || divisorOverride === 0)) {
    throw new RangeError(`${op}: divisorOverride must be a non-zero integer, got ${divisorOverride}`);
  }
  return poolGeometry(op, input, kernelSize, stride, padding, [1, 1], ceilMode);
}

export const avgPool2d = defineOp({
  name: 'avgPool2d',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'kernelSize', type: 'int[]' },
    { name: 'stride', type: 'int[]' },
    { name: 'padding', type: 'int[]' },
    { name: 'ceilMode', type: 'bool' },
    { name: 'countIncludePad', type: 'bool' },
    { name: 'divisorOverride', type: 'int?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(
    input: TensorMeta,
    kernelSize: readonly number[],
    stride: readonly number[],
    padding: readonly number[],
    ceilMode: boolean,
    _countIncludePad: boolean,
    divisorOverride: number | null,
  ): OutMeta {
    return poolOutMeta(input, avgPoolGeometry(input, kernelSize, stride, padding, ceilMode, divisorOverride));
  },
});

// ---------------------------------------------------------------------------------------------
// scaled dot-product attention

/** How one operand's batch dims map onto the output's: element offset = sum(floor(i / div) * stride). */
export interface BatchMap {
  strides: number[];
  divisors: number[];
}

export interface AttentionGeometry {
  batch: number[];
  l: number;
  s: number;
  e: number;
  ev: number;
  q: BatchMap;
  k: BatchMap;
  v: BatchMap;
  /** Mask strides over [...batch, L, S] (0 where broadcast), or null. */
  maskStrides: number[] | null;
}

export function attentionGeometry(
  query: TensorMeta,
  key: TensorMeta,
  value: TensorMeta,
  attnMask: TensorMeta | null,
  dropoutP: number,
  isCausal: boolean,
  scale: number | null,
): AttentionGeometry {
  const op = 'scaledDotProductAttention';
  checkTensor(op, 'query', query);
  checkTensor(op, 'key', key);
  checkTensor(op, 'value', value);
  for (const [name, t] of [['query', query], ['key', key], ['value', value]] as const) {
    if (t.shape.length < 2) throw new Error(`${op}: argument '${name}' must have at least 2 dims [..., seq, embed], got shape ${fmtShape(t.shape)}`);
  }
  checkFloatingTensor(op, 'query', query);
  if (key.dtype !== query.dtype || value.dtype !== query.dtype) {
    throw new TypeError(`${op}: expected query, key and value to have the same dtype, but got query ${describe(query)}, key ${describe(key)} and value ${describe(value)}`);
  }
  const qr = query.shape.length;
  const kr = key.shape.length;
  const vr = value.shape.length;
  const l = query.shape[qr - 2]!;
  const e = query.shape[qr - 1]!;
  const s = key.shape[kr - 2]!;
  const ek = key.shape[kr - 1]!;
  const ev = value.shape[vr - 1]!;
  if (ek !== e) {
    throw new Error(`${op}: query ${fmtShape(query.shape)} and key ${fmtShape(key.shape)} must have the same embedding dim (last), got ${e} and ${ek}`);
  }
  if (value.shape[vr - 2] !== s) {
    throw new Error(`${op}: key ${fmtShape(key.shape)} and value ${fmtShape(value.shape)} must have the same sequence length (dim -2), got ${s} and ${value.shape[vr - 2]}`);
  }
  if (typeof dropoutP !== 'number' || !(dropoutP >= 0 && dropoutP <= 1)) throw new RangeError(`${op}: dropoutP must be in [0, 1], got ${dropoutP}`);
  if (scale !== null && scale !== undefined && typeof scale !== 'number') throw new TypeError(`${op}: scale must be a number, got ${String(scale)}`);
  if (isCausal && attnMask !== null && attnMask !== undefined) {
    throw new Error(`${op}: an explicit attnMask ${fmtShape(attnMask.shape)} should not be set when isCausal=true`);
  }
  // Heads (dim -3): equal, broadcast (1), or grouped-query (kv heads divide query heads).
  const hasHeads = qr >= 3 || kr >= 3 || vr >= 3;
  const hq = qr >= 3 ? query.shape[qr - 3]! : 1;
  const hk = kr >= 3 ? key.shape[kr - 3]! : 1;
  const hv = vr >= 3 ? value.shape[vr - 3]! : 1;
  const hOut = hq !== 1 ? hq : Math.max(hk, hv);
  for (const [name, t, hx] of [['key', key, hk], ['value', value, hv]] as const) {
    if (hx !== hOut && hx !== 1 && (hx === 0 || hOut % hx !== 0)) {
      throw new Error(
        `${op}: number of heads in ${name} ${fmtShape(t.shape)} (${hx}, dim -3) must divide the number of heads in query ${fmtShape(query.shape)} (${hOut}) for grouped-query attention`,
      );
    }
  }
  const lead = (t: TensorMeta): number[] => t.shape.slice(0, Math.max(0, t.shape.length - 3));
  let outer: number[];
  try {
    outer = broadcastShapes(op, lead(query), lead(key), lead(value));
  } catch {
    throw new Error(`${op}: batch dims of query ${fmtShape(query.shape)}, key ${fmtShape(key.shape)} and value ${fmtShape(value.shape)} cannot be broadcast together`);
  }
  const batch = hasHeads ? [...outer, hOut] : outer;
  const mapFor = (t: TensorMeta, hx: number): BatchMap => {
    const r = t.shape.length;
    const strides = new Array<number>(batch.length).fill(0);
    const divisors = new Array<number>(batch.length).fill(1);
    const nOuter = outer.length;
    const tOuter = Math.max(0, r - 3);
    for (let i = 0; i < tOuter; i++) {
      const od = nOuter - tOuter + i;
      strides[od] = t.shape[i] === 1 ? 0 : t.strides[i]!;
    }
    if (hasHeads && r >= 3) {
      strides[nOuter] = hx === 1 ? 0 : t.strides[r - 3]!;
      divisors[nOuter] = hx === 1 ? 1 : hOut / hx;
    }
    return { strides, divisors };
  };
  let maskStrides: number[] | null = null;
  if (attnMask !== null && attnMask !== undefined) {
    checkTensor(op, 'attnMask', attnMask);
    if (attnMask.dtype !== 'bool' && !isFloating(attnMask.dtype)) {
      throw new TypeError(`${op}: attnMask (${describe(attnMask)}) must be bool or floating, got ${attnMask.dtype}`);
    }
    const target = [...batch, l, s];
    let ok = attnMask.shape.length <= target.length;
    if (ok) {
      try {
        ok = shapeEquals(broadcastShapes(op, attnMask.shape, target), target);
      } catch {
        ok = false;
      }
    }
    if (!ok) throw new Error(`${op}: attnMask ${fmtShape(attnMask.shape)} is not broadcastable to the attention weights shape ${fmtShape(target)}`);
    maskStrides = new Array<number>(target.length).fill(0);
    const off = target.length - attnMask.shape.length;
    for (let i = 0; i < attnMask.shape.length; i++) maskStrides[off + i] = attnMask.shape[i] === 1 ? 0 : attnMask.strides[i]!;
  }
  return { batch, l, s, e, ev, q: mapFor(query, hq), k: mapFor(key, hk), v: mapFor(value, hv), maskStrides };
}

/**
 * Output strides of scaled_dot_product_attention: contiguous, except on cuda for outputs of rank 4
 * or more ([..., H, L, E]), whose memory is [..., L, H, E] (FlashAttention's layout, as PyTorch's
 * flash path returns): the usual `o.transpose(-3, -2).reshape([..., L, H * E])` after attention is
 * then a view instead of a copy kernel. The cpu kernels keep the contiguous layout.
 */
export function attentionOutStrides(shape: readonly number[], device: TensorMeta['device']): number[] {
  const r = shape.length;
  if (device.type !== 'cuda' || r < 4) return contiguousStrides(shape);
  const mem = contiguousStrides([...shape.slice(0, r - 3), shape[r - 2]!, shape[r - 3]!, shape[r - 1]!]);
  return [...mem.slice(0, r - 3), mem[r - 2]!, mem[r - 3]!, mem[r - 1]!];
}

export const scaledDotProductAttention = defineOp({
  name: 'scaledDotProductAttention',
  args: [
    { name: 'query', type: 'Tensor' },
    { name: 'key', type: 'Tensor' },
    { name: 'value', type: 'Tensor' },
    { name: 'attnMask', type: 'Tensor?' },
    { name: 'dropoutP', type: 'float' },
    { name: 'isCausal', type: 'bool' },
    { name: 'scale', type: 'float?' },
    { name: 'enableGqa', type: 'bool' },
    { name: 'generator', type: 'Generator?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['extern', 'random'],
  meta(
    query: TensorMeta,
    key: TensorMeta,
    value: TensorMeta,
    attnMask: TensorMeta | null,
    dropoutP: number,
    isCausal: boolean,
    scale: number | null,
    _enableGqa: boolean,
    _generator: Generator | null,
  ): OutMeta {
    const g = attentionGeometry(query, key, value, attnMask, dropoutP, isCausal, scale);
    const shape = [...g.batch, g.l, g.ev];
    return { shape, strides: attentionOutStrides(shape, query.device), dtype: query.dtype, device: query.device };
  },
});

// ---------------------------------------------------------------------------------------------
// dropout

export const dropout = defineOp({
  name: 'dropout',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'p', type: 'float' },
    { name: 'training', type: 'bool' },
    { name: 'generator', type: 'Generator?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['random'],
  meta(input: TensorMeta, p: number, training: boolean, _generator: Generator | null): OutMeta {
    const op = 'dropout';
    checkTensor(op, 'input', input);
    if (typeof p !== 'number' || !(p >= 0 && p <= 1)) throw new RangeError(`${op}: dropout probability has to be between 0 and 1, but got p=${p}`);
    if (training && p > 0 && p < 1 && !isFloating(input.dtype)) {
      throw new TypeError(`${op}: argument 'input' (${describe(input)}) must have a floating dtype when training with 0 < p < 1, got ${input.dtype}`);
    }
    return { shape: input.shape, strides: preservedStrides(input.shape, input.shape, input.strides), dtype: input.dtype, device: input.device };
  },
});
