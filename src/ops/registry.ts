/**
 * The op registry. Each op is declared once (defineOp) with its schema, meta function, optional
 * decomposition and backward slot; kernels are registered per accelerator by src/kernels, which
 * sits above this layer. The registry rejects conflicting duplicate definitions.
 */
import type { DeviceType } from '../runtime/device.js';
import type { ArgSpec, KernelFn, MetaResult, OpTag, OutputSpec, RealizeArgs, RealizeResult } from './schema.js';

export interface OpDefinition<A extends readonly unknown[], R extends MetaResult> {
  readonly name: string;
  readonly args: readonly ArgSpec[];
  readonly outputs: readonly OutputSpec[];
  readonly tags?: readonly OpTag[];
  /**
   * Shape, strides, dtype and device of the outputs, from metadata only. It also validates the
   * inputs: errors thrown here are the errors users see, in eager mode and under the compiler.
   */
  meta(...args: A): R;
  /** The public function that exposes this op (defaults to `name`). */
  readonly publicName?: string;
  /** Whether a Tensor method of the public name exists (first argument is `this`). */
  readonly method?: boolean;
}

/** Backward formula slot, filled by the autograd layer. */
export type BackwardFn = (...args: never[]) => unknown;

export interface Op<A extends readonly unknown[] = readonly never[], R extends MetaResult = MetaResult>
  extends OpDefinition<A, R> {
  readonly kernels: Map<DeviceType, KernelFn<A, R>>;
  /** Composition of other ops; used when an accelerator has no kernel, and by the compiler. */
  decomposition?: (...args: RealizeArgs<A>) => RealizeResult<R>;
  backward?: BackwardFn;
  /** Indices of the arguments the op writes (schema `mutated`), computed once so the dispatcher's
   * aliasing checks cost nothing for the ops that write nothing. */
  readonly mutatedArgs: readonly number[];
}

// Ops are stored type-erased; callers keep the typed handle that defineOp returned.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyOp = Op<any, any>;
const ops = new Map<string, AnyOp>();

export function defineOp<A extends readonly unknown[], R extends MetaResult>(def: OpDefinition<A, R>): Op<A, R> {
  const existing = ops.get(def.name);
  if (existing) {
    throw new Error(`defineOp: op '${def.name}' is already registered (conflicting duplicate definition)`);
  }
  const seen = new Set<string>();
  for (const a of def.args) {
    if (seen.has(a.name)) throw new Error(`defineOp: op '${def.name}' declares argument '${a.name}' twice`);
    seen.add(a.name);
    if (a.mutated && !a.type.startsWith('Tensor')) {
      throw new Error(`defineOp: op '${def.name}' marks non-tensor argument '${a.name}' as mutated`);
    }
  }
  for (const o of def.outputs) {
    if (o.aliasOf !== undefined && !seen.has(o.aliasOf)) {
      throw new Error(`defineOp: op '${def.name}' output '${o.name}' aliases unknown argument '${o.aliasOf}'`);
    }
  }
  const mutatedArgs = Object.freeze(def.args.flatMap((a, i) => (a.mutated ? [i] : [])));
  const op: Op<A, R> = { ...def, kernels: new Map(), mutatedArgs };
  ops.set(def.name, op);
  return op;
}

export function registerKernel<A extends readonly unknown[], R extends MetaResult>(
  op: Op<A, R>,
  device: DeviceType,
  kernel: KernelFn<A, R>,
): void {
  if (op.kernels.has(device)) throw new Error(`registerKernel: op '${op.name}' already has a ${device} kernel`);
  op.kernels.set(device, kernel);
}

export function setDecomposition<A extends readonly unknown[], R extends MetaResult>(
  op: Op<A, R>,
  fn: (...args: RealizeArgs<A>) => RealizeResult<R>,
): void {
  op.decomposition = fn;
}

export function getOp(name: string): AnyOp {
  const op = ops.get(name);
  if (!op) throw new Error(`unknown op '${name}'`);
  return op;
}

export function hasOp(name: string): boolean {
  return ops.has(name);
}

export function listOps(): AnyOp[] {
  return [...ops.values()];
}
