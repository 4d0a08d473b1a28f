/**
 * webgpu kernels for the pointwise ops, all from one source: every op the WGSL math table
 * (kernels/math/wgsl.ts) has an entry for is registered here by name, its kernel rendering the
 * entry over the op's own arguments into a one-node WGSL program (pointwise-run.ts). An op the
 * table gains is a webgpu kernel without a line here; the in-place forms reuse their base entry
 * with the output being `self`. Integer division by zero raises as on the other devices (reading
 * the divisor costs a sync, as on cuda). add and sub with an int64 result (BatchNorm's counter)
 * run as word arithmetic with a carry (int64.ts): WGSL has no 64-bit integers.
 */
import * as P from '../../ops/defs/pointwise.js';
import { add_ } from '../../ops/defs/core.js';
import { getOp, hasOp, registerKernel } from '../../ops/registry.js';
import type { KernelContext, OutMeta, ScalarValue } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { isFloating } from '../../tensor/dtype.js';
import { fmtShape } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { WGSL_TEMPLATES } from '../math/wgsl.js';
import { allocOut } from './device.js';
import { int64AddSub } from './int64.js';
import { runPointwise } from './pointwise-run.js';

/** Table entries that are not pointwise ops of their own name (copies are in core.ts). */
const NOT_OPS = new Set(['toDtype', 'clone']);

/** Ops whose divisor is argument 1 and which raise on an integer zero divisor (with a mode, for div). */
function checkIntegerDivisor(op: string, args: readonly unknown[], out: DType): void {
  if (isFloating(out)) return;
  if (op.startsWith('div') && (args[2] === null || args[2] === undefined)) return;
  const d = args[1];
  const values = d instanceof Tensor ? d.toFlatArray() : [Number(d)];
  if (values.includes(0)) {
    const what = d instanceof Tensor ? `${fmtShape(d.shape)} ${d.dtype} tensor` : `scalar ${String(d)}`;
    throw new RangeError(`${op}: ZeroDivisionError: integer division by zero (divisor 'other' ${what} contains 0)`);
  }
}
const DIVIDING = new Set(['div', 'div_', 'remainder']);

type Kernel = (ctx: KernelContext<OutMeta>, ...args: unknown[]) => Tensor;

/** Ops with an int64 form (int64.ts: word arithmetic with a carry), by their sign. */
const INT64: ReadonlyMap<string, 1 | -1> = new Map([
  ['add', 1],
  ['add_', 1],
  ['sub', -1],
  ['sub_', -1],
]);

/** out = self ± alpha * other in int64 words (args: self, other, alpha). */
function int64Form(name: string, out: Tensor, args: readonly unknown[]): Tensor {
  return int64AddSub(name, out, args[0] as Tensor, args[1] as Tensor | ScalarValue, (args[2] ?? 1) as ScalarValue, INT64.get(name)!);
}

function outOfPlace(name: string, entry: string): Kernel {
  const template = WGSL_TEMPLATES.get(entry)!;
  return (ctx, ...args) => {
    if (DIVIDING.has(name)) checkIntegerDivisor(name, args, ctx.out.dtype);
    if (ctx.out.dtype === 'int64' && INT64.has(name)) return int64Form(name, allocOut(ctx.out), args);
    return runPointwise(name, allocOut(ctx.out), args, (m) => template(m, { out: ctx.out.dtype }));
  };
}

function inPlace(name: string, entry: string): Kernel {
  const template = WGSL_TEMPLATES.get(entry)!;
  return (_ctx, ...args) => {
    const self = args[0] as Tensor;
    if (DIVIDING.has(name)) checkIntegerDivisor(name, args, self.dtype);
    if (self.dtype === 'int64' && INT64.has(name)) return int64Form(name, self, args);
    return runPointwise(name, self, args, (m) => template(m, { out: self.dtype }));
  };
}

/** The ops this file registers, with the table entry each renders (tests enumerate it). */
export const WEBGPU_POINTWISE: ReadonlyMap<string, string> = new Map<string, string>([
  ...[...WGSL_TEMPLATES.keys()].filter((k) => !NOT_OPS.has(k) && hasOp(k)).map((k): [string, string] => [k, k]),
  ['remainderScalar', 'remainder'],
  ...(
    [
      [add_, 'add'],
      [P.sub_, 'sub'],
      [P.mul_, 'mul'],
      [P.div_, 'div'],
      [P.relu_, 'relu'],
      [P.neg_, 'neg'],
      [P.exp_, 'exp'],
      [P.sigmoid_, 'sigmoid'],
      [P.tanh_, 'tanh'],
      [P.clamp_, 'clamp'],
      [P.clampTensor_, 'clampTensor'],
    ] as const
  ).map(([op, entry]): [string, string] => [op.name, entry]),
]);

for (const [name, entry] of WEBGPU_POINTWISE) {
  const op = getOp(name);
  const inplace = name.endsWith('_');
  registerKernel(op as never, 'webgpu', (inplace ? inPlace(name, entry) : outOfPlace(name, entry)) as never);
}
