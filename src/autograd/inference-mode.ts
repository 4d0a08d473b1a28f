/**
 * Inference mode (torch.inference_mode): grad recording off for the call, as noGrad, and the
 * returned tensors guaranteed not to require grad. noGrad alone returns a parameter (or any tensor
 * created before the call) unchanged, still requiring grad; inference mode detaches such outputs
 * (a view on the same storage, no copy) so that code downstream of an inference call cannot
 * accidentally record a graph through them. Outputs are walked through arrays and plain objects
 * ({ logits, cache }), the shapes model forwards return. Kiln has no version counters, so unlike
 * PyTorch there are no "inference tensors" that refuse later autograd use: the guarantee is about
 * grad recording and requiresGrad only.
 */
import { Tensor } from '../tensor/tensor.js';
import { isGradEnabled, setGradEnabled } from './grad-mode.js';

let depth = 0;

/** True inside inferenceMode / inferenceModeScope. */
export function isInferenceModeEnabled(): boolean {
  return depth > 0;
}

function detachOutputs<T>(value: T): T {
  if (value instanceof Tensor) {
    return (value.requiresGrad ? new Tensor(value.storage, value.dtype, value.shape, value.strides, value.offset) : value) as T;
  }
  if (Array.isArray(value)) return value.map((v: unknown) => detachOutputs(v)) as T;
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = detachOutputs(v);
    return out as T;
  }
  return value;
}

/**
 * Runs `fn` with grad recording off and returns its result with every tensor in it (through arrays
 * and plain objects) not requiring grad. `fn` must be synchronous: the mode ends when it returns.
 */
export function inferenceMode<T>(fn: () => T): T {
  const prev = isGradEnabled();
  setGradEnabled(false);
  depth++;
  try {
    const out = fn();
    if (out instanceof Promise) {
      // Nobody will await it now: keep its rejection from surfacing as an unhandled one.
      out.catch(() => undefined);
      throw new TypeError('inferenceMode: fn returned a Promise; the mode would end before it settles (await inside, or use inferenceModeScope in an async block)');
    }
    return detachOutputs(out);
  } finally {
    depth--;
    setGradEnabled(prev);
  }
}

/**
 * `using _ = kiln.inferenceModeScope();` turns recording off until the end of the block (the scope
 * form cannot see the block's results, so nothing is detached: tensors created inside do not
 * require grad because nothing was recorded).
 */
export function inferenceModeScope(): Disposable {
  const prev = isGradEnabled();
  setGradEnabled(false);
  depth++;
  return {
    [Symbol.dispose]() {
      depth--;
      setGradEnabled(prev);
    },
  };
}
