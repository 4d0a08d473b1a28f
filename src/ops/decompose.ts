/**
 * The decomposition table: composite ops written once as compositions of other ops, against a
 * builder that either runs them (eager: dispatch) or records them (the compiler's decompose pass,
 * compile/passes/decompose.ts, through its GraphBuilder). Every entry is both
 * - the op's eager fallback: an accelerator without a kernel for the op runs the composition
 *   (op.decomposition, which dispatch calls; an op that already has one keeps it), and
 * - the compiler's rewrite of the op into core ops its code generators fuse.
 * An entry gets the op's arguments (values as the builder's values, constants as themselves, lists
 * as arrays) and returns the values replacing the op's outputs, or null where it does not apply
 * (the compiler keeps the node; eager fallback fails, naming the op). The entries are in
 * decompositions.ts. Decompositions that depend on compile-time choices (the LLM library's
 * reference compositions under its dispatch policy) stay graph rewrites of the compiler
 * (registerDecomposition in compile/passes/decompose.ts).
 */
import type { Device } from '../runtime/device.js';
import type { DType } from '../tensor/dtype.js';
import { isContiguousStrides } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';
import { dispatch } from './dispatch.js';
import { getOp, setDecomposition } from './registry.js';
import type { OutMeta } from './schema.js';

/** What a decomposition may ask of a value. */
export interface ValueMeta {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly device: Device;
}

/** Runs or records ops for a decomposition; `V` is a tensor (eager) or a graph value (compiler). */
export interface DecompositionBuilder<V> {
  /** op `name` over values and constants, as dispatch takes them: its (first) output. */
  op(name: string, ...args: unknown[]): V;
  meta(v: V): ValueMeta;
  isValue(x: unknown): x is V;
}

export type OpDecomposition = <V>(b: DecompositionBuilder<V>, args: readonly unknown[]) => V[] | null;

const table = new Map<string, OpDecomposition>();

/** Eager ops: dispatch runs them (each on whatever kernel or fallback its device has). */
const EAGER: DecompositionBuilder<Tensor> = {
  op: (name, ...args) => {
    const r = dispatch(getOp(name), ...(args as never[])) as Tensor | Tensor[];
    return Array.isArray(r) ? r[0]! : r;
  },
  meta: (t) => t,
  isValue: (x): x is Tensor => x instanceof Tensor,
};

/**
 * The eager fallback of `name`: its composition, with a contiguous copy where the op's meta is
 * contiguous and the composition's result is not (as the compiler's pass does).
 */
function eagerFallback(name: string, fn: OpDecomposition): (...args: unknown[]) => Tensor | Tensor[] {
  return (...args) => {
    const outs = fn(EAGER, args);
    const op = getOp(name);
    if (outs === null) throw new Error(`${name}: no kernel for this device, and its decomposition does not apply to these arguments`);
    const metas = op.meta(...(args as never[])) as OutMeta | OutMeta[];
    const list = Array.isArray(metas) ? metas : [metas];
    const fixed = outs.map((t, k) => {
      const m = list[k];
      return m && isContiguousStrides(m.shape, m.strides) && !t.isContiguous() ? EAGER.op('contiguous', t, 'contiguous') : t;
    });
    return op.outputs.length === 1 ? fixed[0]! : fixed;
  };
}

/** A one-output decomposition from a function of the builder that returns its value (or null: no rewrite). */
export const single =
  (fn: <V>(b: DecompositionBuilder<V>, args: readonly unknown[]) => V | null): OpDecomposition =>
  (b, args) => {
    const r = fn(b, args);
    return r === null ? null : [r];
  };

/** Adds op `name`'s decomposition to the table and, unless the op has its own, as its eager fallback. */
export function defineDecomposition(name: string, fn: OpDecomposition): void {
  if (table.has(name)) throw new Error(`defineDecomposition: '${name}' already has a decomposition`);
  table.set(name, fn);
  const op = getOp(name);
  if (!op.decomposition) setDecomposition(op, eagerFallback(name, fn) as never);
}

export function tableDecomposition(name: string): OpDecomposition | undefined {
  return table.get(name);
}

export function tableDecompositionNames(): string[] {
  return [...table.keys()];
}
