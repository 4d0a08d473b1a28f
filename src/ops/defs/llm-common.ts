/** Argument checks shared by the LLM library ops' meta functions (errors name op, argument, shape, dtype). */
import { isFloating } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape, shapeEquals } from '../../tensor/layout.js';
import type { TensorMeta } from '../../tensor/tensor.js';
import { checkTensor, describe } from '../meta-helpers.js';
import type { OutMeta } from '../schema.js';

export function floatTensor(op: string, name: string, t: unknown, minRank = 1): TensorMeta {
  checkTensor(op, name, t);
  if (!isFloating(t.dtype)) {
    throw new TypeError(`${op}: argument '${name}' (${describe(t)}) must be float32, float16, bfloat16 or float64, got ${t.dtype}`);
  }
  if (t.shape.length < minRank) throw new Error(`${op}: argument '${name}' must have at least ${minRank} dims, got ${describe(t)}`);
  return t;
}

export function intTensor(op: string, name: string, t: unknown): TensorMeta {
  checkTensor(op, name, t);
  if (t.dtype !== 'int32' && t.dtype !== 'int64') throw new TypeError(`${op}: argument '${name}' (${describe(t)}) must be int32 or int64, got ${t.dtype}`);
  return t;
}

export function sameDtype(op: string, a: [string, TensorMeta], b: [string, TensorMeta]): void {
  if (a[1].dtype !== b[1].dtype) {
    throw new TypeError(`${op}: arguments '${a[0]}' (${describe(a[1])}) and '${b[0]}' (${describe(b[1])}) must have the same dtype`);
  }
}

export function sameDevice(op: string, a: [string, TensorMeta], b: [string, TensorMeta]): void {
  if (!a[1].device.equals(b[1].device)) {
    throw new Error(`${op}: arguments '${a[0]}' (${describe(a[1])}) on ${a[1].device.toString()} and '${b[0]}' on ${b[1].device.toString()} must be on the same device`);
  }
}

export function positiveFloat(op: string, name: string, v: unknown, allowZero = false): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (!allowZero && v === 0)) {
    throw new RangeError(`${op}: argument '${name}' must be a finite number ${allowZero ? '>= 0' : '> 0'}, got ${String(v)}`);
  }
  return v;
}

export function posInt(op: string, name: string, v: unknown, min = 1): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw new RangeError(`${op}: argument '${name}' must be an integer >= ${min}, got ${String(v)}`);
  return v;
}

export function oneOf<T extends string>(op: string, name: string, v: unknown, options: readonly T[]): T {
  if (typeof v !== 'string' || !(options as readonly string[]).includes(v)) {
    throw new TypeError(`${op}: argument '${name}' must be one of ${options.map((o) => `'${o}'`).join(', ')}, got ${JSON.stringify(v)}`);
  }
  return v as T;
}

/** `what` explains the expected shape; a function builds it only when the check fails (hot path). */
export function shapeIs(op: string, name: string, t: TensorMeta, expected: readonly number[], what: string | (() => string)): void {
  if (!shapeEquals(t.shape, expected)) {
    throw new Error(`${op}: argument '${name}' must have shape ${fmtShape(expected)} (${typeof what === 'string' ? what : what()}), got ${describe(t)}`);
  }
}

export function dense(shape: readonly number[], dtype: TensorMeta['dtype'], device: TensorMeta['device']): OutMeta {
  return { shape: [...shape], strides: contiguousStrides(shape), dtype, device };
}

/** Meta of a tensor argument an op writes in place and returns (same view). */
export function sameView(t: TensorMeta & { offset?: number }): OutMeta {
  return { shape: [...t.shape], strides: [...t.strides], dtype: t.dtype, device: t.device, offset: t.offset ?? 0 };
}

/** dtype that float math results are reported in: float64 stays float64, the rest compute in float32. */
export function computeDtype(t: TensorMeta): 'float32' | 'float64' {
  return t.dtype === 'float64' ? 'float64' : 'float32';
}

/**
 * Runs `fn` (the meta of ops that `op` composes) and re-labels its errors with `op`'s name: the
 * first name matching `parts` in the message becomes `op`, and the error keeps its class
 * (TypeError, RangeError or Error).
 */
export function relabelErrors<T>(op: string, parts: RegExp, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    const err = e as Error;
    const msg = err.message.replace(parts, op);
    throw err instanceof TypeError ? new TypeError(msg) : err instanceof RangeError ? new RangeError(msg) : new Error(msg);
  }
}
