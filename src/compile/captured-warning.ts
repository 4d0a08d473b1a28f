/**
 * The captured-constant warning. A tensor that a compiled function reads but that is neither an
 * argument nor held by a module (`const w = kiln.randn([4]); kiln.compile((x) => x.mul(w))`) is
 * lifted into the program as that very tensor object: writes into it are seen at every call, but
 * JS cannot tell kiln.compile that the variable `w` now holds another tensor, so a reassigned
 * closure variable leaves the old tensor baked in. Nothing can guard that; we say so once per
 * compiled function, at trace time, with the remedies. Tensors created during the trace (a
 * kiln.tensor([...]) inside the function) are part of the function's code and do not warn.
 */
import { emitWarning } from '../platform/index.js';
import type { Tensor } from '../tensor/tensor.js';
import type { Trace } from './capture.js';

/** What to do about captured constant tensors (CompileOptions.capturedTensors). */
export type CapturedTensorsPolicy = 'warn' | 'allow';

/** The captured constants of a trace: lifted, pre-existing, not Parameters, held by no module. */
export function capturedConstants(t: Trace, owned: ReadonlySet<Tensor>): { tensor: Tensor; at: string | undefined }[] {
  return [...t.liftedAt].filter(([x]) => !owned.has(x)).map(([tensor, at]) => ({ tensor, at }));
}

const describe = (t: Tensor): string => `${t.dtype}[${t.shape.join(', ')}]`;

/** The warning's text for the captured constants of function `fnName`. */
export function capturedWarningText(fnName: string, found: readonly { tensor: Tensor; at: string | undefined }[]): string {
  const first = found[0]!;
  const more = found.length > 1 ? ` (and ${found.length - 1} more)` : '';
  return (
    `kiln.compile: '${fnName}' reads a tensor ${describe(first.tensor)}${first.at ? ` at ${first.at}` : ''}${more} that is neither an argument ` +
    `nor a parameter or buffer of a module: it is baked into the compiled program as that tensor object. In-place writes to it are seen; ` +
    `assigning another tensor to the variable that holds it is not (the program keeps the old one). Pass it as an argument ` +
    `(f(x, w) instead of closing over w) or register it on a module (registerBuffer); silence this warning with ` +
    `kiln.compile(fn, { capturedTensors: 'allow' }).`
  );
}

/** Emits the warning (type KilnCompileWarning, code KILN_CAPTURED_TENSOR). */
export function warnCaptured(fnName: string, found: readonly { tensor: Tensor; at: string | undefined }[]): void {
  emitWarning(capturedWarningText(fnName, found), { type: 'KilnCompileWarning', code: 'KILN_CAPTURED_TENSOR' });
}
