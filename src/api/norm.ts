/**
 * torch.norm and torch.allclose / torch.isclose, written over differentiable ops (abs, mul, pow,
 * sum, amax, amin, sqrt; comparisons for the closeness tests) like torch's composite ops, so
 * autograd, kiln.compile and every device get them through their parts.
 * norm: p = 'fro' or 2 (sqrt of the sum of squares), 1, Infinity (max |x|), -Infinity (min |x|),
 * 0 (count of nonzeros) or any other number (sum |x|^p)^(1/p); over all dims or `dim`.
 * The gradient of the 2-norm at an all-zero input is NaN (torch takes the subgradient 0).
 */
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import { isFloating } from '../tensor/dtype.js';
import { fmtShape } from '../tensor/layout.js';
import type { Tensor } from '../tensor/tensor.js';
import { add, to } from './core.js';
import { installMethods } from './install.js';
import { abs, eq, isfinite, isnan, le, logicalAnd, logicalOr, mul, ne, pow, sqrt, sub } from './pointwise.js';
import { all, amax, amin, sum, type Dims } from './reduction.js';

export type NormP = number | 'fro';

export interface NormOptions {
  p?: NormP;
  dim?: Dims | null;
  keepdim?: boolean;
}
const NORM_KEYS = keysOf<NormOptions>({ p: true, dim: true, keepdim: true });

/**
 * torch.norm(input, p = 'fro', dim = null, keepdim = false), positionally or as
 * `norm(x, { p, dim, keepdim })`.
 */
export function norm(input: Tensor, p?: NormP | NormOptions, dim?: Dims | null, keepdim?: boolean): Tensor {
  let opts: NormOptions;
  if (typeof p === 'object' && p !== null) {
    checkOptionKeys('norm', p, NORM_KEYS);
    opts = p;
  } else {
    opts = { p: p ?? 'fro', dim: dim ?? null, keepdim: keepdim ?? false };
  }
  const pv = opts.p ?? 'fro';
  const d = opts.dim ?? null;
  const kd = opts.keepdim ?? false;
  if (!isFloating(input.dtype)) throw new TypeError(`norm: input dtype should be floating point, got ${fmtShape(input.shape)} ${input.dtype}`);
  if (pv === 'fro' || pv === 2) return sqrt(sum(mul(input, input), d, kd));
  if (typeof pv !== 'number' || Number.isNaN(pv)) throw new TypeError(`norm: p must be a number or 'fro', got ${String(pv)}`);
  if (pv === 1) return sum(abs(input), d, kd);
  if (pv === Infinity) return amax(abs(input), d, kd);
  if (pv === -Infinity) return amin(abs(input), d, kd);
  if (pv === 0) return to(sum(ne(input, 0), d, kd), input.dtype);
  return pow(sum(pow(abs(input), pv), d, kd), 1 / pv);
}

export interface CloseOptions {
  rtol?: number;
  atol?: number;
  equalNan?: boolean;
}
const CLOSE_KEYS = keysOf<CloseOptions>({ rtol: true, atol: true, equalNan: true });

function closeArgs(fn: string, a: unknown, b: unknown, c: unknown, d: unknown): Required<CloseOptions> {
  if (typeof a === 'object' && a !== null) {
    checkOptionKeys(fn, a, CLOSE_KEYS);
    const o = a as CloseOptions;
    return { rtol: o.rtol ?? 1e-5, atol: o.atol ?? 1e-8, equalNan: o.equalNan ?? false };
  }
  const r = { rtol: (a as number | undefined) ?? 1e-5, atol: (b as number | undefined) ?? 1e-8, equalNan: (c as boolean | undefined) ?? false };
  if (d !== undefined) throw new TypeError(`${fn}: too many arguments`);
  if (r.rtol < 0 || r.atol < 0) throw new RangeError(`${fn}: rtol (${r.rtol}) and atol (${r.atol}) must be non-negative`);
  return r;
}

/**
 * torch.isclose: |a - b| <= atol + rtol * |b| elementwise (a bool tensor), with equal infinities
 * close and NaNs close to each other only with equalNan. Inputs broadcast.
 */
export function isclose(self: Tensor, other: Tensor, rtol?: number | CloseOptions, atol?: number, equalNan?: boolean): Tensor {
  const o = closeArgs('isclose', rtol, atol, equalNan, undefined);
  if (self.dtype !== other.dtype) {
    throw new TypeError(`isclose: 'self' ${fmtShape(self.shape)} ${self.dtype} and 'other' ${fmtShape(other.shape)} ${other.dtype} must have the same dtype`);
  }
  let close = eq(self, other);
  if (o.equalNan) close = logicalOr(close, logicalAnd(isnan(self), isnan(other)));
  if (!isFloating(self.dtype)) return close;
  const diff = abs(sub(self, other));
  const tol = o.rtol === 0 ? o.atol : add(mul(abs(other), o.rtol), o.atol);
  // Only finite differences compare against the tolerance (inf - inf is NaN, never close here).
  return logicalOr(close, logicalAnd(isfinite(diff), le(diff, tol)));
}

/** torch.allclose: whether isclose holds everywhere (a JS boolean, read from the device). */
export function allclose(self: Tensor, other: Tensor, rtol?: number | CloseOptions, atol?: number, equalNan?: boolean): boolean {
  return all(isclose(self, other, rtol, atol, equalNan)).item() as boolean;
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    norm(p?: NormP | NormOptions, dim?: Dims | null, keepdim?: boolean): Tensor;
    isclose(other: Tensor, rtol?: number | CloseOptions, atol?: number, equalNan?: boolean): Tensor;
    allclose(other: Tensor, rtol?: number | CloseOptions, atol?: number, equalNan?: boolean): boolean;
  }
}

installMethods({ norm, isclose, allclose });
