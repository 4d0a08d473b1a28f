/**
 * Gradient checkpointing (torch.utils.checkpoint): `checkpoint(fn, ...inputs)` runs `fn` without
 * recording it, so none of its intermediates stay alive for backward; its outputs hang off one
 * function node whose backward recomputes `fn` with grad mode on and backpropagates through the
 * recomputation. Memory for activations drops to the checkpointed segments' inputs and outputs,
 * at the price of a second forward.
 *
 * - Tensors `fn` reads that require grad but are not among `inputs` (module parameters, closed-over
 *   tensors) are found during the forward (a post-dispatch hook sees every op's arguments; under
 *   noGrad nothing created inside `fn` requires grad, so any such argument comes from outside).
 *   The recomputation replaces every one of them, and every input, by a detached stand-in (a
 *   dispatch mode swaps the arguments), so its backward stops at the stand-ins, whose gradients the
 *   node returns: the engine then delivers them as for any node (accumulation into .grad, or on
 *   into the outer graph), and nothing is counted twice.
 * - The default generator's state is saved before the forward and restored for the recompute
 *   (dropout draws the same mask), then put back (torch's preserve_rng_state); the recompute runs
 *   under the forward's autocast dtype (backward itself runs with autocast off).
 * - The forward runs in a kiln.scope, so its intermediates are disposed when it returns (tensors
 *   `fn` means to keep beyond the call, it passes to kiln.keep, as in any scope).
 * - Gradients are exactly those of the plain call: the same ops run on the same values.
 * - Under kiln.compile's tracer the call is traced as a plain call (the compiled joint program
 *   decides what to save), and with grad mode off or nothing requiring grad it is just `fn(...)`.
 */
import { dispatch, addPostDispatchHook, isDispatchModeActive, popDispatchMode, pushDispatchMode, type DispatchMode } from '../ops/dispatch.js';
import { autocastDtype, setAutocastDtype, type AutocastDtype } from '../api/autocast.js';
import { isFloating } from '../tensor/dtype.js';
import { defaultGenerator, type GeneratorState } from '../tensor/random.js';
import { scope } from '../tensor/scope.js';
import { Tensor } from '../tensor/tensor.js';
import { runBackward } from './engine.js';
import { enableGrad, isGradEnabled, noGrad } from './grad-mode.js';
import { attachFunctionNode } from './graph.js';

/** Outputs of a checkpointed function: one tensor or a list of them. */
export type CheckpointOutput = Tensor | readonly Tensor[];

// Set while a checkpointed forward runs: every grad-requiring tensor its ops read.
let collecting: Set<Tensor> | null = null;

addPostDispatchHook((_op, args) => {
  if (collecting === null) return;
  for (const a of args) {
    if (a instanceof Tensor) {
      if (a.requiresGrad) collecting.add(a);
    } else if (Array.isArray(a)) {
      for (const e of a as unknown[]) if (e instanceof Tensor && e.requiresGrad) collecting.add(e);
    }
  }
});

/** A dispatch mode that swaps tensors (and tensors in lists) for their stand-ins, then dispatches. */
class Substitute implements DispatchMode {
  constructor(private readonly map: ReadonlyMap<Tensor, Tensor>) {}

  handle(op: Parameters<DispatchMode['handle']>[0], args: readonly unknown[]): unknown {
    let changed = false;
    const sub = (a: unknown): unknown => {
      if (a instanceof Tensor) {
        const s = this.map.get(a);
        if (s) changed = true;
        return s ?? a;
      }
      return Array.isArray(a) ? a.map(sub) : a;
    };
    const mapped = args.map(sub);
    if (!changed) return undefined;
    popDispatchMode(this);
    try {
      return (dispatch as (op: unknown, ...a: unknown[]) => unknown)(op, ...mapped);
    } finally {
      pushDispatchMode(this);
    }
  }
}

/** What a checkpoint's backward needs to run its segment again. */
interface Recompute {
  readonly fn: (...inputs: never[]) => CheckpointOutput;
  readonly inputs: readonly unknown[];
  /** The tensors requiring grad that the segment reads; gradients are returned for these. */
  readonly sources: readonly Tensor[];
  readonly rng: GeneratorState;
  readonly autocast: AutocastDtype | null;
}

/** Runs the segment again with grad on, over stand-ins, and backpropagates `grads` through it. */
function recomputeGrads(r: Recompute, grads: readonly (Tensor | null)[]): (Tensor | null)[] {
  const standIns = new Map(r.sources.map((t) => [t, t.detach().requiresGrad_()] as const));
  const rngNow = defaultGenerator.getState();
  defaultGenerator.setState(r.rng);
  const restoreAutocast = setAutocastDtype(r.autocast);
  const mode = new Substitute(standIns);
  let again: readonly Tensor[];
  pushDispatchMode(mode);
  try {
    again = outputList(enableGrad(() => r.fn(...(r.inputs as never[]))), r.fn.name || 'fn').filter((t) => isFloating(t.dtype));
  } finally {
    popDispatchMode(mode);
    restoreAutocast();
    defaultGenerator.setState(rngNow);
  }
  const roots: Tensor[] = [];
  const seeds: Tensor[] = [];
  again.forEach((t, k) => {
    const g = grads[k];
    if (t.requiresGrad && g) {
      roots.push(t);
      seeds.push(g);
    }
  });
  if (roots.length > 0) runBackward(roots, seeds);
  return r.sources.map((t) => standIns.get(t)!.grad);
}

function outputList(out: CheckpointOutput, fnName: string): readonly Tensor[] {
  const list = out instanceof Tensor ? [out] : out;
  if (!Array.isArray(list) || !list.every((t) => t instanceof Tensor)) {
    throw new TypeError(`checkpoint: '${fnName}' must return a tensor or an array of tensors`);
  }
  return list;
}

/**
 * Runs `fn(...inputs)` without saving its intermediates for backward; backward recomputes them.
 * `inputs` may hold non-tensor values too (passed through as they are).
 */
export function checkpoint<T extends CheckpointOutput>(fn: (...inputs: never[]) => T, ...inputs: unknown[]): T {
  if (!isGradEnabled() || isDispatchModeActive()) return fn(...(inputs as never[]));
  const rng = defaultGenerator.getState();
  const autocastAtForward = autocastDtype();
  const found = new Set<Tensor>();
  const outer = collecting;
  collecting = found;
  let out: T;
  try {
    // In a scope: the segment's intermediates are freed as it returns, not when the GC gets to them.
    out = noGrad(() => scope(() => fn(...(inputs as never[]))));
  } finally {
    collecting = outer;
  }
  if (outer) for (const t of found) outer.add(t); // a nested checkpoint's outer one needs them too
  const tensorInputs = inputs.filter((a): a is Tensor => a instanceof Tensor);
  for (const t of tensorInputs) if (t.requiresGrad) found.add(t);
  const sources = [...found];
  if (sources.length === 0) return out;
  const list = outputList(out, fn.name || 'fn');
  // New tensor objects over the same storage: an output that is an input (or a parameter) must
  // not get this node as its gradFn.
  const outs = list.map((t) => t.detach());
  const floating = outs.filter((t) => isFloating(t.dtype));
  const again: Recompute = { fn, inputs, sources, rng, autocast: autocastAtForward };
  // In a scope: the recomputed segment is freed once its gradients are out (those are kept).
  attachFunctionNode('CheckpointBackward', sources, floating, tensorInputs, (_saved, grads) => scope(() => recomputeGrads(again, grads)));
  return (out instanceof Tensor ? outs[0]! : outs) as unknown as T;
}
