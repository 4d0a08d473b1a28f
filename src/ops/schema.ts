/**
 * Op schemas: the declared signature of every op (argument kinds, which inputs an op mutates, which
 * outputs alias which inputs, and tags the compiler reads). Schemas are data so that the compiler,
 * the API checks and the validators can reason about ops without running them.
 */
import type { DType } from '../tensor/dtype.js';
import type { Device } from '../runtime/device.js';
import type { Tensor, TensorMeta } from '../tensor/tensor.js';

export type ArgType =
  | 'Tensor'
  | 'Tensor?'
  | 'Tensor[]'
  | 'Tensor?[]'
  | 'Tensor|Scalar'
  | 'Scalar'
  | 'Scalar?'
  | 'int'
  | 'int?'
  | 'int[]'
  | 'int[]?'
  | 'float'
  | 'float?'
  | 'bool'
  | 'bool?'
  | 'str'
  | 'str?'
  | 'dtype?'
  | 'device?'
  | 'Generator?';

export interface ArgSpec {
  readonly name: string;
  readonly type: ArgType;
  /** The op writes into this tensor argument. */
  readonly mutated?: boolean;
}

export interface OutputSpec {
  readonly name: string;
  readonly type: 'Tensor' | 'Tensor[]';
  /** Name of the input this output shares storage with (views and in-place ops). */
  readonly aliasOf?: string;
}

export type OpTag =
  | 'pointwise'
  | 'reduction'
  | 'view'
  | 'factory'
  | 'inplace'
  | 'random'
  | 'extern' // GEMM, convolution, attention: lowered as library calls by the compiler
  | 'dataDependent' // output shape depends on values (a graph break for the compiler)
  | 'crossDevice'; // its tensor arguments may live on different devices (copies, device moves)

/** Metadata of an op output: a TensorMeta plus, for views, the storage offset in elements. */
export interface OutMeta extends TensorMeta {
  readonly offset?: number;
}

export type MetaResult = OutMeta | readonly OutMeta[];

export type ScalarValue = number | boolean;

/** Replaces TensorMeta with Tensor in an argument tuple (what kernels receive). */
// Tuple-wrapped conditionals keep unions like `Generator | null` from distributing.
export type Realize<T> = [T] extends [TensorMeta]
  ? Tensor
  : [T] extends [readonly TensorMeta[]]
    ? Tensor[]
    : [T] extends [TensorMeta | null]
      ? Tensor | null
      : [T] extends [TensorMeta | ScalarValue]
        ? Tensor | ScalarValue
        : [T] extends [readonly (TensorMeta | null)[]]
          ? readonly (Tensor | null)[]
          : T;

export type RealizeArgs<A extends readonly unknown[]> = { [K in keyof A]: Realize<A[K]> };

export type RealizeResult<R> = R extends readonly OutMeta[] ? Tensor[] : Tensor;

export interface KernelContext<R extends MetaResult = MetaResult> {
  readonly op: string;
  /** The meta function's result for this call: kernels allocate outputs from it. */
  readonly out: R;
}

export type KernelFn<A extends readonly unknown[], R extends MetaResult> = (
  ctx: KernelContext<R>,
  ...args: RealizeArgs<A>
) => RealizeResult<R>;

export interface FactoryOptions {
  dtype?: DType;
  device?: Device | string;
}
