/**
 * Automatic mixed precision (torch.autocast): inside `kiln.autocast(dtype, fn)` (or a
 * `using _ = kiln.autocastScope(dtype)` block) the ops that are fast and safe in low precision run
 * in `dtype` (bfloat16 or float16) and the ops that need range or accumulation run in float32,
 * whatever their inputs' dtype; master weights stay float32. It works at op boundaries, like
 * torch's per-op lists: the dispatcher's argument hook casts each eligible tensor argument before
 * the op sees it. The casts are ordinary `toDtype` ops, so autograd differentiates through them
 * (gradients reach float32 parameters in float32) and kiln.compile traces them (the autocast dtype
 * is part of a compiled function's guards).
 *
 * - LOWER (cast float32 -> dtype): matrix products, linear, conv2d (and conv1d / convTranspose2d,
 *   which are conv2d), attention.
 * - FLOAT32 (cast float16/bfloat16 -> float32): softmax, logSoftmax, the norms (layerNorm,
 *   rmsNorm, groupNorm, batchNorm), sum/prod/cumsum/cumprod/logsumexp/var/std, and the pointwise
 *   functions torch lists for range (exp, log, pow, rsqrt, reciprocal, ...). The losses in
 *   kiln.nn.functional upcast their inputs under autocast (torch lists mse_loss, cross entropy...).
 * - Everything else runs in its inputs' dtype (pointwise ops promote mixed inputs as usual).
 * float64 tensors are never cast (not eligible, as in torch). Casts are not cached across ops.
 */
import { dispatch, setArgumentHook } from '../ops/dispatch.js';
import * as core from '../ops/defs/core.js';
import type { Op } from '../ops/registry.js';
import type { MetaResult } from '../ops/schema.js';
import type { DType } from '../tensor/dtype.js';
import { Tensor } from '../tensor/tensor.js';

export type AutocastDtype = 'bfloat16' | 'float16';

/** Ops run in the autocast dtype. */
export const AUTOCAST_LOWER: ReadonlySet<string> = new Set(['matmul', 'mm', 'bmm', 'addmm', 'linear', 'conv2d', 'scaledDotProductAttention']);

/** Ops run in float32. */
export const AUTOCAST_FLOAT32: ReadonlySet<string> = new Set([
  'softmax',
  'logSoftmax',
  'layerNorm',
  'rmsNorm',
  'groupNorm',
  'batchNorm',
  'sum',
  'prod',
  'cumsum',
  'cumprod',
  'logsumexp',
  'var',
  'std',
  'exp',
  'expm1',
  'log',
  'log1p',
  'log2',
  'log10',
  'pow',
  'rsqrt',
  'reciprocal',
]);

let current: AutocastDtype | null = null;

/** The dtype of the enclosing autocast region, or null outside one (or where it is disabled). */
export function autocastDtype(): AutocastDtype | null {
  return current;
}

function castArg(a: unknown, from: (d: DType) => boolean, to: DType): unknown {
  if (a instanceof Tensor) return from(a.dtype) ? dispatch(core.toDtype, a, to) : a;
  if (Array.isArray(a) && a.some((e) => e instanceof Tensor && from(e.dtype))) return a.map((e) => castArg(e, from, to));
  return a;
}

const isFloat32 = (d: DType): boolean => d === 'float32';
const isLow = (d: DType): boolean => d === 'float16' || d === 'bfloat16';

function hook(op: Op<readonly unknown[], MetaResult>, args: readonly unknown[]): readonly unknown[] {
  const dt = current;
  if (dt === null) return args;
  let from: ((d: DType) => boolean) | undefined;
  let to: DType = 'float32';
  if (AUTOCAST_LOWER.has(op.name)) {
    // Mixed low-precision inputs (float16 and bfloat16) are brought to the region's dtype too.
    from = (d) => isFloat32(d) || (isLow(d) && d !== dt);
    to = dt;
  } else if (AUTOCAST_FLOAT32.has(op.name)) {
    from = isLow;
  }
  if (from === undefined) return args;
  let out: unknown[] | undefined;
  for (let i = 0; i < args.length; i++) {
    const c = castArg(args[i], from, to);
    if (c !== args[i]) (out ??= [...args])[i] = c;
  }
  return out ?? args;
}

/** Enters a region with `dtype` (null: autocast off inside); returns what restores the outer one. */
export function setAutocastDtype(dtype: AutocastDtype | null): () => void {
  if (dtype !== null && dtype !== 'bfloat16' && dtype !== 'float16') {
    throw new TypeError(`autocast: dtype must be 'bfloat16' or 'float16' (or null to disable), got ${JSON.stringify(dtype)}`);
  }
  const prev = current;
  current = dtype;
  setArgumentHook(dtype === null ? undefined : hook);
  return () => {
    current = prev;
    setArgumentHook(prev === null ? undefined : hook);
  };
}

/**
 * Runs `fn` with matrix products and convolutions in `dtype` and precision-sensitive ops in
 * float32 (torch.autocast). `null` turns autocast off inside an enclosing region.
 */
export function autocast<T>(dtype: AutocastDtype | null, fn: () => T): T {
  const restore = setAutocastDtype(dtype);
  try {
    return fn();
  } finally {
    restore();
  }
}

/** `using _ = kiln.autocastScope('bfloat16')`: autocast until the end of the block. */
export function autocastScope(dtype: AutocastDtype | null): Disposable {
  const restore = setAutocastDtype(dtype);
  return { [Symbol.dispose]: restore };
}

/** Under autocast, a low-precision tensor in float32 (for losses: torch runs them in float32). */
export function autocastFloat32(t: Tensor): Tensor {
  return current !== null && isLow(t.dtype) ? dispatch(core.toDtype, t, 'float32') : t;
}
