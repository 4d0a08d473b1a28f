/**
 * conv1d and convTranspose2d as compositions over conv2d (torch.nn.functional.conv1d,
 * conv_transpose2d), so they run wherever conv2d runs (cpu, cuda, kiln.compile) and get its
 * gradients.
 * - conv1d is conv2d over a unit H dim.
 * - convTranspose2d is the gradient of conv2d with respect to its input, written forward: insert
 *   stride - 1 zeros between input pixels, pad by dilation * (k - 1) - padding on each side (plus
 *   outputPadding at the bottom/right; negative amounts crop), and convolve with stride 1 and the
 *   kernel flipped and its in/out channels swapped per group. The zero insertion costs stride^2
 *   in work, the price of reusing the conv2d kernels.
 */
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import { fmtShape } from '../tensor/layout.js';
import type { Tensor } from '../tensor/tensor.js';
import { conv2d, type ConvPadding, type IntPair } from './nn.js';
import { pad } from './pad.js';
import { flip } from './shape-extra.js';
import { reshape, squeeze, transpose, unsqueeze } from './views.js';

function one(fn: string, name: string, v: number | readonly number[]): number {
  const x = typeof v === 'number' ? v : v.length === 1 ? v[0]! : NaN;
  if (!Number.isInteger(x)) throw new TypeError(`${fn}: '${name}' must be an integer (or a 1-element list) for 1-d convolution, got ${String(v)}`);
  return x;
}

function pair(fn: string, name: string, v: IntPair): [number, number] {
  const r = typeof v === 'number' ? [v, v] : [...v];
  if (r.length !== 2 || !r.every(Number.isInteger)) throw new TypeError(`${fn}: '${name}' must be an integer or a pair of integers, got ${String(v)}`);
  return r as [number, number];
}

/** torch.nn.functional.conv1d: input (N, C, L) or (C, L), weight (O, C / groups, K). */
export function conv1d(
  input: Tensor,
  weight: Tensor,
  bias: Tensor | null = null,
  stride: number | readonly number[] = 1,
  padding: number | readonly number[] | 'same' | 'valid' = 0,
  dilation: number | readonly number[] = 1,
  groups = 1,
): Tensor {
  if (input.ndim !== 2 && input.ndim !== 3) throw new Error(`conv1d: expected 2-d (unbatched) or 3-d (batched) input, got ${fmtShape(input.shape)} ${input.dtype}`);
  if (weight.ndim !== 3) throw new Error(`conv1d: expected 3-d weight [outChannels, inChannels/groups, kW], got ${fmtShape(weight.shape)} ${weight.dtype}`);
  const p: ConvPadding = typeof padding === 'string' ? padding : [0, one('conv1d', 'padding', padding)];
  const out = conv2d(unsqueeze(input, -2), unsqueeze(weight, -2), bias, [1, one('conv1d', 'stride', stride)], p, [1, one('conv1d', 'dilation', dilation)], groups);
  return squeeze(out, [-2]);
}

export interface ConvTranspose2dOptions {
  stride?: IntPair;
  padding?: IntPair;
  outputPadding?: IntPair;
  groups?: number;
  dilation?: IntPair;
}

const CT_KEYS = keysOf<ConvTranspose2dOptions>({ stride: true, padding: true, outputPadding: true, groups: true, dilation: true });

/**
 * torch.nn.functional.conv_transpose2d(input, weight, bias, stride, padding, output_padding,
 * groups, dilation): input (N, Cin, H, W) or (Cin, H, W), weight (Cin, Cout / groups, kH, kW).
 * The flags may also come as one options object after bias.
 */
export function convTranspose2d(
  input: Tensor,
  weight: Tensor,
  bias: Tensor | null = null,
  stride: IntPair | ConvTranspose2dOptions = 1,
  padding: IntPair = 0,
  outputPadding: IntPair = 0,
  groups = 1,
  dilation: IntPair = 1,
): Tensor {
  const fn = 'convTranspose2d';
  if (typeof stride === 'object' && !Array.isArray(stride)) {
    const o = stride as ConvTranspose2dOptions;
    checkOptionKeys(fn, o, CT_KEYS);
    return convTranspose2d(input, weight, bias, o.stride ?? 1, o.padding ?? 0, o.outputPadding ?? 0, o.groups ?? 1, o.dilation ?? 1);
  }
  const desc = (t: Tensor): string => `${fmtShape(t.shape)} ${t.dtype}`;
  if (input.ndim !== 3 && input.ndim !== 4) throw new Error(`${fn}: expected 3-d (unbatched) or 4-d (batched) input, got ${desc(input)}`);
  if (input.ndim === 3) return squeeze(convTranspose2d(unsqueeze(input, 0), weight, bias, stride, padding, outputPadding, groups, dilation), [0]);
  if (weight.ndim !== 4) throw new Error(`${fn}: expected 4-d weight [inChannels, outChannels/groups, kH, kW], got ${desc(weight)}`);
  if (!Number.isInteger(groups) || groups < 1) throw new Error(`${fn}: groups must be a positive integer, got ${groups}`);
  const [n, cin, h, w] = input.shape as [number, number, number, number];
  const [wcin, coutG, kh, kw] = weight.shape as [number, number, number, number];
  if (wcin !== cin || cin % groups !== 0) {
    throw new Error(`${fn}: weight ${desc(weight)} expects ${wcin} input channels (divisible by groups = ${groups}), but input ${desc(input)} has ${cin}`);
  }
  if (weight.dtype !== input.dtype) throw new TypeError(`${fn}: input type (${desc(input)}) and weight type (${desc(weight)}) should be the same`);
  const s = pair(fn, 'stride', stride as IntPair);
  const p = pair(fn, 'padding', padding);
  const op = pair(fn, 'outputPadding', outputPadding);
  const d = pair(fn, 'dilation', dilation);
  if (s.some((x) => x < 1) || d.some((x) => x < 1) || p.some((x) => x < 0) || op.some((x) => x < 0)) {
    throw new Error(`${fn}: stride [${s}] and dilation [${d}] must be positive, padding [${p}] and outputPadding [${op}] non-negative`);
  }
  for (let i = 0; i < 2; i++) {
    if (op[i]! >= s[i]! && op[i]! >= d[i]!) throw new Error(`${fn}: output padding must be smaller than either stride or dilation, got outputPadding [${op}], stride [${s}], dilation [${d}]`);
  }
  const outH = (h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1;
  const outW = (w - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1;
  if (outH <= 0 || outW <= 0) throw new Error(`${fn}: output size [${outH}, ${outW}] is too small for input ${desc(input)}, weight ${desc(weight)}, stride [${s}], padding [${p}], dilation [${d}]`);
  // Zero insertion: (N, C, H, 1, W, 1) padded to (N, C, H, sH, W, sW), then merged.
  let x = input;
  if (s[0] > 1 || s[1] > 1) {
    x = pad(reshape(input, [n, cin, h, 1, w, 1]), [0, s[1] - 1, 0, 0, 0, s[0] - 1]);
    x = reshape(x, [n, cin, h * s[0], w * s[1]]);
  }
  // Border: d (k - 1) - p before; after, the same plus outputPadding minus the s - 1 trailing zeros.
  const before = [d[0] * (kh - 1) - p[0], d[1] * (kw - 1) - p[1]];
  const after = [before[0]! + op[0] - (s[0] - 1), before[1]! + op[1] - (s[1] - 1)];
  if (before.some((v) => v !== 0) || after.some((v) => v !== 0)) x = pad(x, [before[1]!, after[1]!, before[0]!, after[0]!]);
  // Weight (Cin, Cout/g, kH, kW) -> per group swap in/out -> (Cout, Cin/g, kH, kW), flipped spatially.
  const cinG = cin / groups;
  let wt = transpose(reshape(weight, [groups, cinG, coutG, kh, kw]), 1, 2);
  wt = flip(reshape(wt, [groups * coutG, cinG, kh, kw]), [2, 3]);
  return conv2d(x, wt, bias, 1, 0, d, groups);
}
