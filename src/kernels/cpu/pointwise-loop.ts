/**
 * Broadcasting strided loops for pointwise CPU kernels. Inputs are read through their own strides
 * broadcast to the output shape (stride 0 on broadcast dims); dimensions that are contiguous in
 * every operand are coalesced so most loops run as one tight inner loop. Arity-specialised
 * functions keep V8 on monomorphic, inlinable calls.
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
  drive(out.shape, [o.op, ia], (n, offs, st) => {
    const so = st[0]!;
    const sa = st[1]!;
    let po = offs[0]!;
    let pa = offs[1]!;
    for (let i = 0; i < n; i++, po += so, pa += sa) od[po] = f(ad[pa]!);
  });
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
  drive(out.shape, [o.op, ia, ib], (n, offs, st) => {
    const so = st[0]!;
    const sa = st[1]!;
    const sb = st[2]!;
    let po = offs[0]!;
    let pa = offs[1]!;
    let pb = offs[2]!;
    for (let i = 0; i < n; i++, po += so, pa += sa, pb += sb) od[po] = f(ad[pa]!, bd[pb]!);
  });
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
  drive(out.shape, [o.op, ia, ib, ic], (n, offs, st) => {
    let po = offs[0]!;
    let pa = offs[1]!;
    let pb = offs[2]!;
    let pc = offs[3]!;
    for (let i = 0; i < n; i++, po += st[0]!, pa += st[1]!, pb += st[2]!, pc += st[3]!) {
      od[po] = f(ia.data[pa]!, ib.data[pb]!, ic.data[pc]!);
    }
  });
  o.commit();
  return out;
}

/** Copies src (broadcast to dst's shape) into dst, converting dtype; the engine of copy_ and casts. */
export function copyInto(dst: Tensor, src: Tensor | ScalarValue): void {
  if (dst.dtype === 'bool') mapUnaryInto(dst, src, (x) => (x !== 0 && !Number.isNaN(x) ? 1 : 0));
  else mapUnaryInto(dst, src, (x) => x);
}
