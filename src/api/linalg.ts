/** Public functions and Tensor methods for matrix products and normalisation layers. */
import type { Tensor } from '../tensor/tensor.js';
import { dispatch } from '../ops/dispatch.js';
import * as L from '../ops/defs/linalg.js';
import type { ScalarValue } from '../ops/schema.js';
import { installMethods } from './install.js';
import { parseRmsNormArgs, type RmsNormArgs, type RmsNormOptions } from './rms-norm-args.js';
import { fmtShape } from '../tensor/layout.js';

type OptTensor = Tensor | null | undefined;

/** torch.matmul: dot, matrix-vector, vector-matrix, matrix and batched (broadcast) products. */
export function matmul(self: Tensor, other: Tensor): Tensor {
  return dispatch(L.matmul, self, other);
}
/** torch.mm: 2-d x 2-d. */
export function mm(self: Tensor, mat2: Tensor): Tensor {
  return dispatch(L.mm, self, mat2);
}
/** torch.bmm: [b, n, m] x [b, m, p] -> [b, n, p]. */
export function bmm(self: Tensor, mat2: Tensor): Tensor {
  return dispatch(L.bmm, self, mat2);
}
/** torch.dot: 1-d x 1-d -> 0-d. */
export function dot(self: Tensor, tensor: Tensor): Tensor {
  return dispatch(L.dot, self, tensor);
}
/** torch.nn.functional.linear: input @ weight^T + bias over any leading dims. */
export function linear(input: Tensor, weight: Tensor, bias: OptTensor = null): Tensor {
  return dispatch(L.linear, input, weight, bias ?? null);
}
/** torch.addmm: beta * self + alpha * (mat1 @ mat2); beta = 0 ignores self (NaN included). */
export function addmm(self: Tensor, mat1: Tensor, mat2: Tensor, beta: ScalarValue = 1, alpha: ScalarValue = 1): Tensor {
  return dispatch(L.addmm, self, mat1, mat2, beta, alpha);
}

function shapeArg(s: number | readonly number[]): number[] {
  return typeof s === 'number' ? [s] : [...s];
}

/** torch.nn.functional.layer_norm over the trailing `normalizedShape` dims. */
export function layerNorm(input: Tensor, normalizedShape: number | readonly number[], weight: OptTensor = null, bias: OptTensor = null, eps = 1e-5): Tensor {
  return dispatch(L.layerNorm, input, shapeArg(normalizedShape), weight ?? null, bias ?? null, eps);
}
/** torch.nn.functional.rms_norm; eps defaults to finfo(input.dtype).eps. */
/**
 * torch.nn.functional.rms_norm over the trailing `normalizedShape` dims; eps defaults to the dtype's
 * machine epsilon. Also takes llm.rmsNorm's (input, weight, eps) and an options object (api/rms-norm-args.ts).
 */
export function rmsNorm(input: Tensor, normalizedShape: number | readonly number[], weight?: OptTensor, eps?: number | null): Tensor;
export function rmsNorm(input: Tensor, weight: Tensor, eps?: number | null): Tensor;
export function rmsNorm(input: Tensor, options: RmsNormOptions): Tensor;
export function rmsNorm(input: Tensor, ...args: RmsNormArgs): Tensor {
  const a = parseRmsNormArgs('rmsNorm', args);
  if (a.normalizedShape === null) throw new TypeError(`rmsNorm: give 'normalizedShape' or a 'weight' to take it from (input ${fmtShape(input.shape)} ${input.dtype})`);
  return dispatch(L.rmsNorm, input, a.normalizedShape, a.weight, a.eps ?? L.finfoEps(input.dtype));
}
/** torch.nn.functional.group_norm on (N, C, *) input. */
export function groupNorm(input: Tensor, numGroups: number, weight: OptTensor = null, bias: OptTensor = null, eps = 1e-5): Tensor {
  return dispatch(L.groupNorm, input, numGroups, weight ?? null, bias ?? null, eps);
}
/**
 * torch.nn.functional.batch_norm on (N, C, *) input. In training mode the batch statistics are
 * used and, when given, runningMean/runningVar are updated in place (unbiased running variance).
 */
export function batchNorm(
  input: Tensor,
  runningMean: OptTensor = null,
  runningVar: OptTensor = null,
  weight: OptTensor = null,
  bias: OptTensor = null,
  training = false,
  momentum = 0.1,
  eps = 1e-5,
): Tensor {
  return dispatch(L.batchNorm, input, runningMean ?? null, runningVar ?? null, weight ?? null, bias ?? null, training, momentum, eps);
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    matmul(other: Tensor): Tensor;
    mm(mat2: Tensor): Tensor;
    bmm(mat2: Tensor): Tensor;
    dot(tensor: Tensor): Tensor;
    addmm(mat1: Tensor, mat2: Tensor, beta?: ScalarValue, alpha?: ScalarValue): Tensor;
  }
}

installMethods({ matmul, mm, bmm, dot, addmm });
