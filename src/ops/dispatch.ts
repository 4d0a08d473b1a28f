/**
 * The dispatcher: one entry point for every op call. It checks that inputs are alive and on one
 * device, runs the meta function (validation and output metadata), picks the accelerator's kernel
 * (or the decomposition), and runs hooks that later layers install (autograd recording, the
 * compiler's tracing mode). The hook lists are fixed arrays, not lazy lookups, so nothing on this
 * path breaks capture.
 */
import { Device } from '../runtime/device.js';
import { currentDevice } from '../runtime/guard.js';
import { checkAllocation, Tensor } from '../tensor/tensor.js';
import { fmtShape, numel } from '../tensor/layout.js';
import type { DType } from '../tensor/dtype.js';
import { assertNoInternalOverlap, partiallyOverlaps } from './memory-overlap.js';
import { getOp, type Op } from './registry.js';
import type { MetaResult, RealizeArgs, RealizeResult } from './schema.js';

/** A dispatch mode intercepts every op call (the compiler's tracer, fake-tensor mode). */
export interface DispatchMode {
  /** Returns undefined to let normal dispatch proceed. */
  handle(op: Op<readonly unknown[], MetaResult>, args: readonly unknown[]): unknown;
}

export type PostDispatchHook = (
  op: Op<readonly unknown[], MetaResult>,
  args: readonly unknown[],
  result: Tensor | Tensor[],
  before: unknown,
) => void;

/** Runs before the kernel; its return value reaches the post hooks as `before` (autograd saves
 * the inputs an in-place op is about to overwrite this way). */
export type PreDispatchHook = (op: Op<readonly unknown[], MetaResult>, args: readonly unknown[]) => unknown;

const modes: DispatchMode[] = [];
const postHooks: PostDispatchHook[] = [];
let preHook: PreDispatchHook | undefined;

export function pushDispatchMode(mode: DispatchMode): void {
  modes.push(mode);
}

/**
 * True while a dispatch mode (the compiler's tracer) intercepts op calls: tensors may then be
 * stand-ins without data, so code that would read values on the host (an argument check) skips it.
 */
export function dispatchModeActive(): boolean {
  return modes.length > 0;
}

/**
 * Runs `fn` with no dispatch mode active: its ops run for real even inside a kiln.compile trace.
 * For caches a model keeps across calls (Qwen3's rotary table): made for real the first time,
 * whether that is in eager code or in a trace, so every later trace lifts the same kept tensor
 * instead of one trace recording the ops that build it and the next reading the cache.
 */
export function outsideDispatchModes<T>(fn: () => T): T {
  const saved = modes.splice(0, modes.length);
  try {
    return fn();
  } finally {
    modes.push(...saved);
  }
}

export function popDispatchMode(mode: DispatchMode): void {
  const i = modes.lastIndexOf(mode);
  if (i >= 0) modes.splice(i, 1);
}

/**
 * Rewrites an op's arguments before anything else sees them (autocast's casts at op boundaries);
 * the casts it dispatches are recorded by autograd and traced by kiln.compile like any op. Unset
 * (undefined) outside an autocast region, so ordinary calls pay one comparison.
 */
export type ArgumentHook = (op: Op<readonly unknown[], MetaResult>, args: readonly unknown[]) => readonly unknown[];

let argumentHook: ArgumentHook | undefined;

export function setArgumentHook(hook: ArgumentHook | undefined): void {
  argumentHook = hook;
}

/** Whether a dispatch mode (the compiler's tracer) intercepts op calls now. */
export function isDispatchModeActive(): boolean {
  return modes.length > 0;
}

export function addPostDispatchHook(hook: PostDispatchHook): void {
  postHooks.push(hook);
}

export function setPreDispatchHook(hook: PreDispatchHook | undefined): void {
  preHook = hook;
}

/** The device an op runs on: its first tensor argument's, else the factory's target. */
function opDevice(op: { name: string; args: readonly { name: string; type: string }[]; tags?: readonly string[] }, args: readonly unknown[]): Device | undefined {
  const state: DeviceScan = { device: undefined, first: '', crossDevice: op.tags?.includes('crossDevice') ?? false };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    // Tensor lists may hold nulls (index lists: a null is a full slice).
    if (a instanceof Tensor) checkDevice(op, i, a, state);
    else if (Array.isArray(a)) for (const e of a as unknown[]) if (e instanceof Tensor) checkDevice(op, i, e, state);
  }
  return state.device;
}

interface DeviceScan {
  device: Device | undefined;
  /** The name of the argument the device came from, for the error message. */
  first: string;
  crossDevice: boolean;
}

function checkDevice(op: { name: string; args: readonly { name: string }[] }, i: number, t: Tensor, state: DeviceScan): void {
  t.assertAlive(op.name);
  const spec = op.args[i];
  if (!state.device) {
    state.device = t.device;
    state.first = spec?.name ?? `arg${i}`;
  } else if (!state.crossDevice && t.device !== state.device && !t.device.equals(state.device) && !(t.device.type === 'cpu' && t.ndim === 0)) {
    throw new Error(
      `${op.name}: expected all tensors on the same device, but '${state.first}' is on ${state.device.toString()} and ` +
        `'${spec?.name ?? `arg${i}`}' (${fmtShape(t.shape)}) is on ${t.device.toString()}`,
    );
  }
}

let inputCopies = 0;

/** @internal How many inputs the dispatcher has cloned because they partially overlapped a written
 * argument (tests use it to show that disjoint views are not copied). */
export function overlapInputCopies(): number {
  return inputCopies;
}

/** Errors for written arguments with internal overlap (metadata only, so fake tensors under the
 * compiler's tracer get the same error). */
function checkWrittenArgs(op: { name: string; args: readonly { name: string }[] }, mutated: readonly number[], args: readonly unknown[]): void {
  for (const i of mutated) {
    const a = args[i];
    if (a instanceof Tensor) assertNoInternalOverlap(op.name, op.args[i]!.name, a.shape, a.strides);
  }
}

/**
 * PyTorch's rule for a read input that partially overlaps a written argument: the input is copied
 * first, so the kernel reads the values from before the write. Returns `args` itself when nothing
 * overlaps (the common case allocates nothing).
 */
function copyOverlappingInputs(op: Op<readonly unknown[], MetaResult>, mutated: readonly number[], args: readonly unknown[]): readonly unknown[] {
  let out: unknown[] | undefined;
  for (let j = 0; j < args.length; j++) {
    const b = args[j];
    if (!(b instanceof Tensor) || op.args[j]?.mutated) continue;
    for (const i of mutated) {
      const a = args[i];
      if (a instanceof Tensor && partiallyOverlaps(a, b)) {
        out ??= [...args];
        out[j] = dispatch(getOp('clone') as Op<[Tensor], MetaResult>, b);
        inputCopies++;
        break;
      }
    }
  }
  return out ?? args;
}

export function dispatch<A extends readonly unknown[], R extends MetaResult>(op: Op<A, R>, ...args: RealizeArgs<A>): RealizeResult<R> {
  if (argumentHook !== undefined) args = argumentHook(op as unknown as Op<readonly unknown[], MetaResult>, args) as RealizeArgs<A>;
  const mutated = op.mutatedArgs;
  if (mutated.length > 0) checkWrittenArgs(op, mutated, args);
  if (modes.length > 0) {
    const r = modes[modes.length - 1]!.handle(op as unknown as Op<readonly unknown[], MetaResult>, args);
    if (r !== undefined) return r as RealizeResult<R>;
  }
  const inputDevice = opDevice(op, args);
  // Real tensors satisfy TensorMeta, so the meta function runs on the actual arguments.
  const out = op.meta(...(args as unknown as A));
  const outDevice = Array.isArray(out) ? (out as readonly { device: Device }[])[0]?.device : (out as { device: Device }).device;
  // Factory ops (zerosLike(x, { device })) run where their output lives; others where their inputs are.
  const device = (op.tags?.includes('factory') ? outDevice : inputDevice ?? outDevice) ?? currentDevice();
  if (mutated.length > 0 && args.length > 1) {
    args = copyOverlappingInputs(op as unknown as Op<readonly unknown[], MetaResult>, mutated, args) as RealizeArgs<A>;
  }
  const kernel = op.kernels.get(device.type);
  const before = preHook ? preHook(op as unknown as Op<readonly unknown[], MetaResult>, args) : undefined;
  let result: RealizeResult<R>;
  try {
    if (kernel) result = kernel({ op: op.name, out }, ...args);
    else if (op.decomposition) result = op.decomposition(...args);
    else throw new Error(`${op.name}: no kernel for device ${device.toString()} and no decomposition`);
  } catch (e) {
    throw engineLimitError(op.name, out, e);
  }
  // Mutated inputs get a new version, so autograd can tell when a saved tensor was overwritten.
  for (const i of mutated) {
    const a = args[i];
    if (a instanceof Tensor) a.storage.version++;
  }
  for (const h of postHooks) h(op as unknown as Op<readonly unknown[], MetaResult>, args, result as Tensor | Tensor[], before);
  return result;
}

/** The JS engine's own errors for an allocation beyond its limits (V8 wording). */
const ENGINE_LIMIT = /Invalid typed array length|Array buffer allocation failed|Invalid array buffer length|Invalid array length/;

/**
 * An op whose kernel hit an engine allocation limit gets an error naming the op, its output sizes
 * and the limit instead of V8's bare RangeError (issue #18 item 6); other errors pass through.
 * Checked only after a failure, so the call path pays nothing.
 */
function engineLimitError(opName: string, out: MetaResult, e: unknown): unknown {
  if (!(e instanceof RangeError) || !ENGINE_LIMIT.test(e.message)) return e;
  const outs = (Array.isArray(out) ? out : [out]) as readonly { shape: readonly number[]; dtype: DType; device: Device }[];
  for (const o of outs) {
    try {
      checkAllocation(opName, numel(o.shape), o.dtype, o.device);
    } catch (limit) {
      return Object.assign(limit as Error, { cause: e });
    }
  }
  const sizes = outs.map((o) => `${fmtShape(o.shape)} ${o.dtype}`).join(', ');
  return new RangeError(`${opName}: the JS engine refused an allocation while computing the output ${sizes} (${e.message}): a buffer of this op exceeds the engine's limit or the memory available`, { cause: e });
}
