/** Grad mode: whether ops record the graph. `noGrad(fn)` and `using _ = noGradScope()` switch it off. */

let enabled = true;

export function isGradEnabled(): boolean {
  return enabled;
}

export function setGradEnabled(on: boolean): void {
  enabled = on;
}

function withGradMode<T>(on: boolean, fn: () => T): T {
  const prev = enabled;
  enabled = on;
  try {
    return fn();
  } finally {
    enabled = prev;
  }
}

/** Runs `fn` without recording gradients (torch.no_grad). */
export function noGrad<T>(fn: () => T): T {
  return withGradMode(false, fn);
}

/** Runs `fn` with gradient recording on, even inside noGrad (torch.enable_grad). */
export function enableGrad<T>(fn: () => T): T {
  return withGradMode(true, fn);
}

/** `using _ = kiln.noGradScope();` turns recording off until the end of the block. */
export function noGradScope(): Disposable {
  const prev = enabled;
  enabled = false;
  return {
    [Symbol.dispose]() {
      enabled = prev;
    },
  };
}
