/**
 * The default collate (torch.utils.data.default_collate): a list of samples of one structure
 * becomes one batch of that structure. Tensors are stacked along a new dim 0, numbers and booleans
 * become a tensor (numbers float32 as kiln.tensor makes them: JS cannot tell 1 from 1.0, so store
 * integer labels as int64 tensors), bigints int64; arrays (tuples) and plain objects are collated
 * position by position and key by key; strings are kept as a list. Anything else is an error
 * naming the path into the sample, since a silent pass-through would surface far from the cause.
 */
import { tensor } from '../api/data.js';
import { stack } from '../api/indexing.js';
import { fmtShape, shapeEquals } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';

/** The batch type the default collate makes from samples of type T. */
export type Collated<T> = T extends Tensor
  ? Tensor
  : T extends number | boolean | bigint
    ? Tensor
    : T extends string
      ? string[]
      : T extends readonly unknown[]
        ? { [K in keyof T]: Collated<T[K]> }
        : T extends object
          ? { [K in keyof T]: Collated<T[K]> }
          : never;

function describe(v: unknown): string {
  if (v instanceof Tensor) return `Tensor ${fmtShape(v.shape)} ${v.dtype}`;
  if (v === null) return 'null';
  if (Array.isArray(v)) return `array of ${v.length}`;
  return typeof v;
}

function collateAt(items: readonly unknown[], where: string): unknown {
  const first = items[0];
  const mismatch = (i: number): never => {
    throw new TypeError(`DataLoader collate: sample ${i} has ${describe(items[i])} at ${where}, sample 0 has ${describe(first)}`);
  };
  if (first instanceof Tensor) {
    items.forEach((t, i) => {
      if (!(t instanceof Tensor)) mismatch(i);
      const u = t as Tensor;
      if (!shapeEquals(u.shape, first.shape) || u.dtype !== first.dtype || !u.device.equals(first.device)) {
        throw new Error(`DataLoader collate: cannot stack ${where}: sample 0 is ${fmtShape(first.shape)} ${first.dtype} on ${first.device.toString()}, sample ${i} is ${fmtShape(u.shape)} ${u.dtype} on ${u.device.toString()} (pass a collateFn to pad or keep a list)`);
      }
    });
    return stack(items as Tensor[]);
  }
  if (typeof first === 'number' || typeof first === 'boolean' || typeof first === 'bigint') {
    items.forEach((v, i) => typeof v !== typeof first && mismatch(i));
    return tensor(items as number[]);
  }
  if (typeof first === 'string') {
    items.forEach((v, i) => typeof v !== 'string' && mismatch(i));
    return [...(items as string[])];
  }
  if (Array.isArray(first)) {
    items.forEach((v, i) => (!Array.isArray(v) || v.length !== first.length) && mismatch(i));
    return first.map((_, k) => collateAt(items.map((v) => (v as unknown[])[k]), `${where}[${k}]`));
  }
  if (first !== null && typeof first === 'object' && Object.getPrototypeOf(first) === Object.prototype) {
    const keys = Object.keys(first);
    const out: Record<string, unknown> = {};
    items.forEach((v, i) => {
      if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Tensor) mismatch(i);
      const vk = Object.keys(v as object);
      if (vk.length !== keys.length || !keys.every((k) => k in (v as object))) {
        throw new TypeError(`DataLoader collate: sample ${i} has keys {${vk.join(', ')}} at ${where}, sample 0 has {${keys.join(', ')}}`);
      }
    });
    for (const k of keys) out[k] = collateAt(items.map((v) => (v as Record<string, unknown>)[k]), `${where}.${k}`);
    return out;
  }
  throw new TypeError(`DataLoader collate: cannot collate ${describe(first)} at ${where} (tensors, numbers, booleans, bigints, strings, arrays and plain objects are supported; pass a collateFn)`);
}

/** Collates samples into one batch (see the header); `samples` must be non-empty. */
export function defaultCollate<T>(samples: readonly T[]): Collated<T> {
  if (samples.length === 0) throw new Error('DataLoader collate: no samples to collate');
  return collateAt(samples, 'sample') as Collated<T>;
}
