/**
 * torch.nn.functional.interpolate (modes 'nearest' and 'bilinear', 4-d NCHW) and
 * adaptive_avg_pool2d, written over differentiable ops so autograd, kiln.compile and every device
 * come with them. Both are separable along H and W:
 * - nearest reads source row floor(dst * scale), a gather (indexSelect) per axis;
 * - bilinear blends two gathered rows per axis, lerp-style, with the weights as constants;
 * - adaptive average pooling is P_h @ x @ P_w^T with averaging matrices (bin i covers
 *   [floor(i * in / out), ceil((i + 1) * in / out)), as torch), two matmuls.
 * Source coordinates follow torch: with a scaleFactor (and no size) the scale is 1 / scaleFactor,
 * not in / out; alignCorners maps the corner pixels' centres onto each other.
 */
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import { isFloating } from '../tensor/dtype.js';
import { fmtShape } from '../tensor/layout.js';
import type { Tensor } from '../tensor/tensor.js';
import { add } from './core.js';
import { tensor } from './data.js';
import { indexSelect } from './indexing.js';
import { matmul } from './linalg.js';
import { mul, sub } from './pointwise.js';
import { reshape } from './views.js';

export interface InterpolateOptions {
  /** Output [H, W] (a number for both); give this or scaleFactor. */
  size?: number | readonly number[] | null;
  /** Multiplier for [H, W] (a number for both); the output size is floor(in * scale). */
  scaleFactor?: number | readonly number[] | null;
  mode?: 'nearest' | 'bilinear';
  /** bilinear only (torch's default false). */
  alignCorners?: boolean | null;
}
const INTERP_KEYS = keysOf<InterpolateOptions>({ size: true, scaleFactor: true, mode: true, alignCorners: true });

function describe(t: Tensor): string {
  return `${fmtShape(t.shape)} ${t.dtype}`;
}

function two(fn: string, name: string, v: number | readonly number[]): [number, number] {
  const r = typeof v === 'number' ? [v, v] : [...v];
  if (r.length !== 2 || r.some((x) => typeof x !== 'number' || !(x > 0) || !Number.isFinite(x))) {
    throw new Error(`${fn}: '${name}' must be a positive number or a pair of them for 4-d input, got ${String(v)}`);
  }
  return r as [number, number];
}

/** Source coordinate of each output index along one axis (float), torch's area_pixel_compute_source_index. */
function sourceCoords(inSize: number, outSize: number, scale: number | null, alignCorners: boolean, nearest: boolean): Float64Array {
  const r = new Float64Array(outSize);
  if (nearest) {
    const s = scale !== null ? 1 / scale : inSize / outSize;
    for (let i = 0; i < outSize; i++) r[i] = Math.min(Math.floor(i * s), inSize - 1);
    return r;
  }
  if (alignCorners) {
    const s = outSize > 1 ? (inSize - 1) / (outSize - 1) : 0;
    for (let i = 0; i < outSize; i++) r[i] = i * s;
    return r;
  }
  const s = scale !== null ? 1 / scale : inSize / outSize;
  for (let i = 0; i < outSize; i++) r[i] = Math.max((i + 0.5) * s - 0.5, 0);
  return r;
}

/** Linear blend along `dim` of x at fractional source coordinates. */
function linearAxis(x: Tensor, dim: number, coords: Float64Array): Tensor {
  const inSize = x.shape[dim]!;
  const i0 = Array.from(coords, (c) => Math.min(Math.floor(c), inSize - 1));
  const i1 = i0.map((i) => Math.min(i + 1, inSize - 1));
  const lam = Array.from(coords, (c, k) => c - i0[k]!);
  const dev = { device: x.device };
  const lo = indexSelect(x, dim, tensor(i0, { dtype: 'int64', ...dev }));
  const hi = indexSelect(x, dim, tensor(i1, { dtype: 'int64', ...dev }));
  const shape = x.shape.map((_, k) => (k === dim ? coords.length : 1));
  const w = reshape(tensor(lam, { dtype: x.dtype, ...dev }), shape);
  return add(lo, mul(sub(hi, lo), w));
}

/** torch.nn.functional.interpolate for 4-d NCHW input: `interpolate(x, { size | scaleFactor, mode, alignCorners })`. */
export function interpolate(input: Tensor, options: InterpolateOptions): Tensor {
  checkOptionKeys('interpolate', options, INTERP_KEYS);
  const mode = options.mode ?? 'nearest';
  if (mode !== 'nearest' && mode !== 'bilinear') throw new Error(`interpolate: mode must be 'nearest' or 'bilinear', got '${String(mode)}'`);
  if (input.ndim !== 4) throw new Error(`interpolate: expected 4-d (N, C, H, W) input, got ${describe(input)}`);
  if (!isFloating(input.dtype)) throw new TypeError(`interpolate: input must be floating point, got ${describe(input)}`);
  const alignCorners = options.alignCorners ?? null;
  if (mode === 'nearest' && alignCorners !== null) throw new Error(`interpolate: alignCorners option can only be set with the interpolating modes (bilinear), not '${mode}'`);
  const hasSize = options.size !== undefined && options.size !== null;
  const hasScale = options.scaleFactor !== undefined && options.scaleFactor !== null;
  if (hasSize === hasScale) throw new Error(`interpolate: exactly one of 'size' and 'scaleFactor' must be given (input ${describe(input)})`);
  const [h, w] = [input.shape[2]!, input.shape[3]!];
  let out: [number, number];
  let scales: [number | null, number | null] = [null, null];
  if (hasSize) {
    out = two('interpolate', 'size', options.size!);
    if (!out.every(Number.isInteger)) throw new Error(`interpolate: 'size' must be integers, got [${out.join(', ')}]`);
  } else {
    const sf = two('interpolate', 'scaleFactor', options.scaleFactor!);
    scales = sf;
    out = [Math.floor(h * sf[0]), Math.floor(w * sf[1])];
    if (out[0] < 1 || out[1] < 1) throw new Error(`interpolate: scaleFactor [${sf.join(', ')}] gives an empty output [${out.join(', ')}] for input ${describe(input)}`);
  }
  if (h === 0 || w === 0) throw new Error(`interpolate: input ${describe(input)} has an empty spatial dim`);
  const nearest = mode === 'nearest';
  const ac = alignCorners === true;
  const ch = sourceCoords(h, out[0], scales[0], ac, nearest);
  const cw = sourceCoords(w, out[1], scales[1], ac, nearest);
  if (nearest) {
    const ih = tensor(Array.from(ch), { dtype: 'int64', device: input.device });
    const iw = tensor(Array.from(cw), { dtype: 'int64', device: input.device });
    return indexSelect(indexSelect(input, 2, ih), 3, iw);
  }
  return linearAxis(linearAxis(input, 2, ch), 3, cw);
}

/** [out, in] averaging matrix of adaptive pooling along one axis. */
function poolMatrix(inSize: number, outSize: number): number[][] {
  return Array.from({ length: outSize }, (_, i) => {
    const start = Math.floor((i * inSize) / outSize);
    const end = Math.ceil(((i + 1) * inSize) / outSize);
    return Array.from({ length: inSize }, (_, j) => (j >= start && j < end ? 1 / (end - start) : 0));
  });
}

/** torch.nn.functional.adaptive_avg_pool2d on (N, C, H, W) or (C, H, W); a null entry keeps that size. */
export function adaptiveAvgPool2d(input: Tensor, outputSize: number | readonly (number | null)[]): Tensor {
  if (input.ndim !== 3 && input.ndim !== 4) throw new Error(`adaptiveAvgPool2d: expected 3-d or 4-d input, got ${describe(input)}`);
  if (!isFloating(input.dtype)) throw new TypeError(`adaptiveAvgPool2d: input must be floating point, got ${describe(input)}`);
  const [h, w] = input.shape.slice(-2) as [number, number];
  const req = typeof outputSize === 'number' ? [outputSize, outputSize] : [...outputSize];
  if (req.length !== 2) throw new Error(`adaptiveAvgPool2d: 'outputSize' must be a number or a pair, got [${req.join(', ')}]`);
  const [oh, ow] = [req[0] ?? h, req[1] ?? w];
  if (![oh, ow].every((s) => Number.isInteger(s) && s > 0)) throw new Error(`adaptiveAvgPool2d: 'outputSize' must be positive integers, got [${req.join(', ')}]`);
  if (h === 0 || w === 0) throw new Error(`adaptiveAvgPool2d: input ${describe(input)} has an empty spatial dim`);
  const dev = { dtype: input.dtype, device: input.device };
  const ph = tensor(poolMatrix(h, oh), dev);
  const pwT = tensor(poolMatrix(w, ow), dev).t();
  return matmul(matmul(ph, input), pwT);
}
