/**
 * Building the nodes of an eager reduce group (reduce-run.ts) in program order: math-table
 * pointwise nodes, reductions, arg reductions and expression nodes (the eager kernel's own C over
 * a, b and the host scalars s0..), each value with its dtype and its shape (the input's, or one per
 * row). Value ids follow reduce-run.ts: the input X, further inputs X + 1.., results OUT + k; the
 * values in between are internal.
 */
import type { DType } from '../../tensor/dtype.js';
import { storeAs } from './codegen/ctypes.js';
import type { FusedArg, FusedNode, FusedReduceKind, FusedValue } from './fused/group.js';
import { OUT, X } from './codegen/reduce.js';

/** What a group needs to know of a tensor: its shape and dtype (the layout comes at run time). */
export interface ValueMeta {
  readonly shape: readonly number[];
  readonly dtype: DType;
}

/** A node argument: a value id, or a constant. */
export type Arg = number | { readonly c: unknown };

export class ReduceGroup {
  readonly values = new Map<number, FusedValue>();
  readonly nodes: FusedNode[] = [];
  private next: number;
  private readonly rowShape: readonly number[];

  /** `x`: the reduced input (value X); `extra`: further inputs X + 1, X + 2, ... */
  constructor(
    readonly x: ValueMeta,
    dims: readonly number[],
    extra: readonly ValueMeta[] = [],
  ) {
    this.values.set(X, { dtype: x.dtype, shape: x.shape });
    extra.forEach((t, k) => this.values.set(X + 1 + k, { dtype: t.dtype, shape: t.shape }));
    this.next = X + 1 + extra.length;
    this.rowShape = x.shape.map((s, d) => (dims.includes(d) ? 1 : s));
  }

  /** A fresh id, or result k's (OUT + k). */
  private id(dtype: DType, row: boolean, out?: number): number {
    const id = out === undefined ? this.next++ : OUT + out;
    if (id >= OUT && out === undefined) throw new Error('kiln cuda: too many values in a reduce group');
    this.values.set(id, { dtype, shape: row ? this.rowShape : this.x.shape });
    return id;
  }

  /** Math-table op `op` (kernels/math/cuda.ts) over `args`; `row`: a per-row value (its shape). */
  pointwise(op: string, args: readonly Arg[], dtype: DType, opts: { row?: boolean; out?: number; cast?: boolean } = {}): number {
    const fargs = args.map((a): FusedArg => (typeof a === 'number' ? { kind: 'value', id: a } : { kind: 'const', value: a.c }));
    const inputs = args.filter((a): a is number => typeof a === 'number');
    const o = this.id(dtype, opts.row === true, opts.out);
    this.nodes.push({ kind: 'pointwise', op, args: fargs, inputs, outputs: [o], ...(opts.cast ? { cast: true } : {}) });
    return o;
  }

  /** `input` cast to `dtype` (rounded to it, as PyTorch casts before reducing). */
  cast(input: number, dtype: DType): number {
    return this.pointwise('toDtype', [input], dtype, { cast: true });
  }

  reduction(kind: Exclude<FusedReduceKind, 'argmax' | 'argmin'>, input: number, dtype: DType, out?: number): number {
    const o = this.id(dtype, true, out);
    this.nodes.push({ kind: 'reduction', op: kind, args: [], inputs: [input], outputs: [o], reduce: { kind, input } });
    return o;
  }

  /** The extreme value (dtype of the input) and its int64 index; `outs` places either among the results. */
  arg(kind: 'argmax' | 'argmin', input: number, outs: { value?: number; index?: number }): [number, number] {
    const v = this.id(this.values.get(input)!.dtype, true, outs.value);
    const i = this.id('int64', true, outs.index);
    this.nodes.push({ kind: 'reduction', op: kind, args: [], inputs: [input], outputs: [v, i], reduce: { kind, input } });
    return [v, i];
  }

  /**
   * The eager kernel's own expression over a, b (the value args, in `ct`) and s0.. (the run's host
   * scalars), stored as `dtype` holds it (floating dtypes: storeAs of a bool needs the eager
   * prelude). Only the compiler's prelude helpers may appear in it.
   */
  expr(args: readonly number[], expr: string, ct: 'float' | 'double', dtype: DType, opts: { row?: boolean; out?: number } = {}): number {
    const o = this.id(dtype, opts.row === true, opts.out);
    this.nodes.push({
      kind: 'pointwise',
      op: 'expr',
      args: args.map((id) => ({ kind: 'value', id })),
      inputs: [...args],
      outputs: [o],
      expr: { expr, ct, store: (e) => storeAs(dtype, e, ct) },
    });
    return o;
  }
}

/** The dtype a floating op computes in: float64 stays, everything else runs in float32. */
export function computeDtype(d: DType): 'float32' | 'float64' {
  return d === 'float64' ? 'float64' : 'float32';
}
