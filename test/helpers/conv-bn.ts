/**
 * conv2dBatchNorm cases and their float64 reference for the webgpu tests of the fused float16 route
 * (kernels/webgpu/conv-bn.ts): the reference is conv2d in float64, then the BatchNorm written out
 * with tensor ops ((y - mean) / sqrt(var + eps) * gamma + beta, per channel) and the ReLU, on the
 * same float16-rounded inputs, so it shares no code with the fold it checks.
 */
import * as kiln from '../../src/index.js';
import type { Tensor } from '../../src/tensor/tensor.js';
import { randnF16 } from './webgpu.js';

export interface ConvBnCase {
  readonly label: string;
  readonly x: number[];
  readonly w: number[];
  readonly stride: number;
  readonly padding: number;
  readonly convBias: boolean;
  readonly affine: boolean;
  readonly relu: boolean;
  /** The BatchNorm tensors' dtype (the module's parameters may stay float32 under a float16 input). */
  readonly stats: 'float16' | 'float32';
}

export const CONV_BN_CASES: readonly ConvBnCase[] = [
  { label: 'C8 3x3 pad 1, conv bias, affine, relu, float16 stats', x: [2, 8, 9, 7], w: [16, 8, 3, 3], stride: 1, padding: 1, convBias: true, affine: true, relu: true, stats: 'float16' },
  { label: 'C3 7x7 stride 2 pad 3, no conv bias, affine, relu, float32 stats', x: [1, 3, 15, 13], w: [24, 3, 7, 7], stride: 2, padding: 3, convBias: false, affine: true, relu: true, stats: 'float32' },
  { label: 'C16 1x1, conv bias, no affine, no relu, float32 stats', x: [3, 16, 5, 6], w: [8, 16, 1, 1], stride: 1, padding: 0, convBias: true, affine: false, relu: false, stats: 'float32' },
];

export interface ConvBnInputs {
  readonly x: Tensor;
  readonly w: Tensor;
  readonly b: Tensor | null;
  readonly mean: Tensor;
  readonly variance: Tensor;
  readonly gamma: Tensor | null;
  readonly beta: Tensor | null;
  readonly eps: number;
}

/** Random inputs of a case (float16 data; variances positive, means and shifts of the output's scale). */
export function convBnInputs(c: ConvBnCase): ConvBnInputs {
  const o = c.w[0]!;
  const stat = (t: Tensor): Tensor => t.to(c.stats);
  return {
    x: randnF16(c.x),
    w: randnF16(c.w),
    b: c.convBias ? randnF16([o]) : null,
    mean: stat(kiln.randn([o]).mul(2)),
    variance: stat(kiln.rand([o]).mul(3).add(0.5)),
    gamma: c.affine ? stat(kiln.randn([o])) : null,
    beta: c.affine ? stat(kiln.randn([o])) : null,
    eps: 1e-3,
  };
}

/** The float64 reference of a case's inputs. */
export function convBnReference(c: ConvBnCase, i: ConvBnInputs): Tensor {
  const f = (t: Tensor): Tensor => t.to('float64');
  const col = (t: Tensor): Tensor => f(t).reshape([1, -1, 1, 1]);
  const y = kiln.nn.functional.conv2d(f(i.x), f(i.w), i.b ? f(i.b) : null, c.stride, c.padding);
  let z = y.sub(col(i.mean)).div(col(i.variance).add(i.eps).sqrt());
  if (i.gamma) z = z.mul(col(i.gamma));
  if (i.beta) z = z.add(col(i.beta));
  return c.relu ? kiln.relu(z) : z;
}

/** The case run on webgpu with a channels_last input (the fused route's layout). */
export function convBnWebgpu(c: ConvBnCase, i: ConvBnInputs): Tensor {
  const g = (t: Tensor | null): Tensor | null => (t ? t.to('webgpu') : null);
  return kiln.nn.functional.conv2dBatchNorm(i.x.to('webgpu').contiguous('channelsLast'), i.w.to('webgpu'), g(i.b), { runningMean: g(i.mean)!, runningVar: g(i.variance)!, weight: g(i.gamma), bias: g(i.beta), eps: i.eps }, { stride: c.stride, padding: c.padding, relu: c.relu });
}
