/**
 * cuda softmax, logSoftmax, layerNorm and rmsNorm: their reduce groups (reduce-programs.ts) through
 * reduce-run.ts, each one kernel making a pass over the row per reduction level and a last pass
 * writing the full-size result, in float32 (float64 for float64) whatever the storage dtype,
 * rounded once at the store. eps is a kernel argument (one kernel serves every eps). Inputs,
 * weights and biases of any strides; results as the meta functions lay them out.
 */
import { finfoEps, layerNorm, rmsNorm } from '../../ops/defs/linalg.js';
import * as R from '../../ops/defs/reduction.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { normalizeDim } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut } from './device.js';
import { normProgram, softmaxProgram } from './reduce-programs.js';
import { runReduce } from './reduce-run.js';

/** softmax / logSoftmax of x along `dim` into `out` (x's shape, any strides); `cast`: the dtype to cast x to first. */
export function softmaxInto(kind: 'softmax' | 'logSoftmax', out: Tensor, x: Tensor, dim: number, cast?: DType): Tensor {
  if (x.numel() === 0) return out;
  const dims = x.ndim === 0 ? [] : [normalizeDim(kind, dim, x.ndim)];
  const key = `${kind}|${x.dtype}|${cast ?? ''}|${out.dtype}|${x.ndim === 0 ? '0d' : 'nd'}`;
  runReduce({ label: kind, key, program: () => softmaxProgram(kind, x, dims, out.dtype, cast), x, dims, outs: [{ t: out, row: false }] });
  return out;
}

function softmaxKernel(kind: 'softmax' | 'logSoftmax', meta: OutMeta, x: Tensor, dim: number, dtype: unknown): Tensor {
  return softmaxInto(kind, allocOut(meta), x, dim, (dtype ?? undefined) as DType | undefined);
}
registerKernel(R.softmax, 'cuda', (ctx, self, dim, dtype) => softmaxKernel('softmax', ctx.out, self, dim as number, dtype));
registerKernel(R.logSoftmax, 'cuda', (ctx, self, dim, dtype) => softmaxKernel('logSoftmax', ctx.out, self, dim as number, dtype));

/** layerNorm / rmsNorm over the trailing `normalizedShape` dims; weight and bias broadcast over the rows. */
function norm(kind: 'layerNorm' | 'rmsNorm', meta: OutMeta, x: Tensor, normalizedShape: readonly number[], weight: Tensor | null, bias: Tensor | null, eps: number): Tensor {
  const out = allocOut(meta);
  if (x.numel() === 0) return out;
  const dims = normalizedShape.map((_, i) => x.ndim - normalizedShape.length + i);
  const extra = [weight, bias].filter((t): t is Tensor => t !== null);
  const ct = out.dtype === 'float64' ? 'double' : 'float';
  const key = `${kind}|${x.dtype}|${weight?.dtype ?? ''}|${bias?.dtype ?? ''}|${out.dtype}`;
  runReduce({ label: kind, key, program: () => normProgram(kind, x, dims, out.dtype, weight, bias), x, dims, outs: [{ t: out, row: false }], extra, params: { ct, values: [eps] } });
  return out;
}

registerKernel(layerNorm, 'cuda', (ctx, input, normalizedShape, weight, bias, eps) => norm('layerNorm', ctx.out, input, normalizedShape as number[], weight ?? null, bias ?? null, Number(eps)));
registerKernel(rmsNorm, 'cuda', (ctx, input, normalizedShape, weight, eps) =>
  norm('rmsNorm', ctx.out, input, normalizedShape as number[], weight ?? null, null, eps === null || eps === undefined ? finfoEps(input.dtype) : Number(eps)),
);
