/**
 * Broadcasting strided loops for pointwise CPU kernels. Inputs are read through their own strides
 * broadcast to the output shape (stride 0 on broadcast dims); dimensions that are contiguous in
 * every operand are coalesced so most loops run as one tight inner loop. Arity-specialised
 * functions keep V8 on monomorphic, inlinable calls.
 *
 * A bool output holds 0 or 1 whatever the element function returns: the loops writing one store
 * nonzero-ness (NaN is False, as bool's encoder), so arithmetic that torch allows on bool (add_ is
 * logical or: True + True is True) can never leave a 2 in a bool tensor's storage byte.
 */
import type { ScalarValue } from '../../ops/schema.js';
import { broadcastStrides, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut, type NumArray, readable, writable } from './numeric.js';
import type { OutMeta } from '../../ops/schema.js';

interface Operand {
  data: NumArray;
  offset: number;
  strides: number[];
}


function operand(x: Tensor | ScalarValue, shape: readonly number[]): Operand {
  if (typeof x === 'number' || typeof x === 'boolean') {
    const data = new Float64Array(1);
    data[0] = Number(x);
    return { data, offset: 0, strides: new Array<number>(shape.length).fill(0) };
  }
  const r = readable(x);
  return { data: r.data, offset: r.offset, strides: broadcastStrides(x.shape, x.strides, shape) };
}

/** Merges adjacent dims where every operand steps uniformly; returns the reduced shape/strides. */
function coalesce(shape: readonly number[], ops: Operand[]): { shape: number[]; strides: number[][] } {
  const outShape: number[] = [];
  const outStrides: number[][] = ops.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    const size = shape[d]!;
    if (size === 1) continue;
    const last = outShape.length - 1;
    if (last >= 0 && ops.every((o, k) => outStrides[k]![last] === o.strides[d]! * size)) {
      outShape[last]! *= size;
      ops.forEach((o, k) => (outStrides[k]![last] = o.strides[d]!));
    } else {
      outShape.push(size);
      ops.forEach((o, k) => outStrides[k]!.push(o.strides[d]!));
    }
  }
  if (outShape.length === 0) {
    outShape.push(1);
    ops.forEach((_, k) => outStrides[k]!.push(0));
  }
  return { shape: outShape, strides: outStrides };
}

/**
 * Drives a loop over `shape`, calling `inner(count, offsets, innerStrides)` for each run of the
 * innermost dimension. Offsets are per operand.
 */
function drive(
  shape: readonly number[],
  ops: Operand[],
  inner: (count: number, offs: number[], strides: number[]) => void,
): void {
  if (numel(shape) === 0) return;
  const c = coalesce(shape, ops);
  const rank = c.shape.length;
  const innerN = c.shape[rank - 1]!;
  const innerStrides = c.strides.map((s) => s[rank - 1]!);
  const offs = ops.map((o) => o.offset);
  const idx = new Array<number>(rank).fill(0);
  const total = numel(c.shape);
  for (let done = 0; done < total; done += innerN) {
    inner(innerN, offs, innerStrides);
    for (let k = rank - 2; k >= 0; k--) {
      idx[k]!++;
      for (let j = 0; j < ops.length; j++) offs[j]! += c.strides[j]![k]!;
      if (idx[k]! < c.shape[k]!) break;
      for (let j = 0; j < ops.length; j++) offs[j]! -= c.strides[j]![k]! * c.shape[k]!;
      idx[k] = 0;
    }
  }
}

/**
 * Inner loops specialised per element function. One shared loop calling many different `f`s makes
 * that call site megamorphic, so V8 stops inlining and a 1M-element add costs 5-10x a plain loop.
 * Each element function therefore gets its own copy of the loop source (a distinct function
 * literal with its own type feedback), keyed by the function object, or by its source text for
 * closures made per call (same literal, different captured values). Where code generation is not
 * allowed (a strict Content-Security-Policy), the generic loop is used.
 */
type Inner = (f: unknown, n: number, od: NumArray, po: number, so: number, ...rest: (NumArray | number)[]) => void;

const byFunction = new WeakMap<object, Inner>();
const byFunctionBool = new WeakMap<object, Inner>();
const bySource = new Map<string, Inner>();
// Bounded so that closures built from ever-changing source text cannot grow the cache forever.
const MAX_SOURCES = 512;

/** `store(call)`: the stored expression; a bool output stores the call's nonzero-ness. */
const store = (call: string, bool: boolean): string => (bool ? `((r = ${call}) !== 0 && r === r ? 1 : 0)` : call);

function buildInner(arity: number, bool: boolean): Inner | undefined {
  const ins = Array.from({ length: arity }, (_, k) => k);
  const params = ['f', 'n', 'od', 'po', 'so', ...ins.flatMap((k) => [`d${k}`, `p${k}`, `s${k}`])];
  const call = `f(${ins.map((k) => `d${k}[p${k}]`).join(', ')})`;
  const steps = ['po += so', ...ins.map((k) => `p${k} += s${k}`)].join('; ');
  const body = `"use strict"; let r = 0; for (let i = 0; i < n; i++) { od[po] = ${store(call, bool)}; ${steps}; }`;
  try {
    return new Function(...params, body) as Inner;
  } catch {
    return undefined;
  }
}

function genericInner(arity: number, bool: boolean): Inner {
  return (f, n, od, po, so, ...rest) => {
    const fn = f as (...xs: number[]) => number;
    const ds = rest.filter((_, i) => i % 3 === 0) as NumArray[];
    const ps = rest.filter((_, i) => i % 3 === 1) as number[];
    const ss = rest.filter((_, i) => i % 3 === 2) as number[];
    const xs = new Array<number>(arity);
    for (let i = 0; i < n; i++) {
      for (let k = 0; k < arity; k++) xs[k] = ds[k]![ps[k]! + i * ss[k]!]!;
      const r = fn(...xs);
      od[po + i * so] = bool ? (r !== 0 && r === r ? 1 : 0) : r;
    }
  };
}

function innerFor(f: object, arity: number, bool: boolean): Inner {
  const cache = bool ? byFunctionBool : byFunction;
  const hit = cache.get(f);
  if (hit) return hit;
  const src = Function.prototype.toString.call(f);
  // Native functions (Math.exp) all print alike, so only their identity can key them.
  const key = src.includes('[native code]') ? undefined : `${arity}:${bool ? 'bool:' : ''}${src}`;
  let inner = key === undefined ? undefined : bySource.get(key);
  if (!inner) {
    inner = buildInner(arity, bool) ?? genericInner(arity, bool);
    if (key !== undefined && bySource.size < MAX_SOURCES) bySource.set(key, inner);
  }
  cache.set(f, inner);
  return inner;
}

function outOperand(t: Tensor): { op: Operand; commit: () => void } {
  const w = writable(t);
  return { op: { data: w.data, offset: w.offset, strides: [...t.strides] }, commit: w.commit };
}

/** out[i] = f(a[i]) with out allocated from meta. */
export function mapUnary(meta: OutMeta, a: Tensor | ScalarValue, f: (x: number) => number): Tensor {
  const out = allocOut(meta);
  mapUnaryInto(out, a, f);
  return out;
}

export function mapUnaryInto(out: Tensor, a: Tensor | ScalarValue, f: (x: number) => number): void {
  const o = outOperand(out);
  const ia = operand(a, out.shape);
  const od = o.op.data;
  const ad = ia.data;
  const inner = innerFor(f, 1, out.dtype === 'bool');
  drive(out.shape, [o.op, ia], (n, offs, st) => inner(f, n, od, offs[0]!, st[0]!, ad, offs[1]!, st[1]!));
  o.commit();
}

export function mapBinary(meta: OutMeta, a: Tensor | ScalarValue, b: Tensor | ScalarValue, f: (x: number, y: number) => number): Tensor {
  const out = allocOut(meta);
  mapBinaryInto(out, a, b, f);
  return out;
}

export function mapBinaryInto(out: Tensor, a: Tensor | ScalarValue, b: Tensor | ScalarValue, f: (x: number, y: number) => number): void {
  const o = outOperand(out);
  const ia = operand(a, out.shape);
  const ib = operand(b, out.shape);
  const od = o.op.data;
  const ad = ia.data;
  const bd = ib.data;
  const inner = innerFor(f, 2, out.dtype === 'bool');
  drive(out.shape, [o.op, ia, ib], (n, offs, st) => inner(f, n, od, offs[0]!, st[0]!, ad, offs[1]!, st[1]!, bd, offs[2]!, st[2]!));
  o.commit();
}

export function mapTernary(
  meta: OutMeta,
  a: Tensor | ScalarValue,
  b: Tensor | ScalarValue,
  c: Tensor | ScalarValue,
  f: (x: number, y: number, z: number) => number,
): Tensor {
  const out = allocOut(meta);
  const o = outOperand(out);
  const ia = operand(a, out.shape);
  const ib = operand(b, out.shape);
  const ic = operand(c, out.shape);
  const od = o.op.data;
  const inner = innerFor(f, 3, out.dtype === 'bool');
  drive(out.shape, [o.op, ia, ib, ic], (n, offs, st) =>
    inner(f, n, od, offs[0]!, st[0]!, ia.data, offs[1]!, st[1]!, ib.data, offs[2]!, st[2]!, ic.data, offs[3]!, st[3]!),
  );
  o.commit();
  return out;
}

/** Copies src (broadcast to dst's shape) into dst, converting dtype; the engine of copy_ and casts. */
export function copyInto(dst: Tensor, src: Tensor | ScalarValue): void {
  // A bool dst stores nonzero-ness: the loop itself normalises every bool output.
  mapUnaryInto(dst, src, (x) => x);
}
