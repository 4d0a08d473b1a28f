/**
 * Scopes for temporaries: `kiln.scope(fn)` disposes every tensor created while fn runs, except the
 * ones fn returns (found in nested arrays and plain objects) and the ones passed to `kiln.keep()`.
 * Like TensorFlow.js's tidy: it makes eager loops release device memory deterministically instead
 * of waiting for the garbage collector. Gradient tensors that autograd stores on leaves are kept.
 */

interface Disposable_ {
  dispose(): void;
  readonly isDisposed: boolean;
}

const stack: Set<Disposable_>[] = [];

/** Called by the Tensor constructor. */
export function trackTensor(t: Disposable_): void {
  if (stack.length === 0) return; // the common case outside kiln.scope; no out-of-bounds read
  stack[stack.length - 1]!.add(t);
}

/**
 * Excludes `t` from every enclosing scope's cleanup: it lives until disposed (or collected). For
 * long-lived state created inside scopes: optimizer moments, leaf gradients, caches.
 */
export function keep<T extends Disposable_>(t: T): T {
  for (const s of stack) s.delete(t);
  return t;
}

function collectResult(x: unknown, out: Set<unknown>, depth = 0): void {
  if (x === null || typeof x !== 'object' || depth > 8 || out.has(x)) return;
  out.add(x);
  if (Array.isArray(x)) for (const e of x) collectResult(e, out, depth + 1);
  else if (Object.getPrototypeOf(x) === Object.prototype) for (const e of Object.values(x)) collectResult(e, out, depth + 1);
}

/** Runs fn and disposes the tensors it created that it does not return. Async functions are not supported. */
export function scope<T>(fn: () => T): T {
  const mine = new Set<Disposable_>();
  stack.push(mine);
  let result: T;
  try {
    result = fn();
    if (result instanceof Promise) throw new Error('kiln.scope: fn returned a Promise; scopes only work with synchronous functions');
  } catch (e) {
    stack.pop();
    for (const t of mine) t.dispose();
    throw e;
  }
  stack.pop();
  const kept = new Set<unknown>();
  collectResult(result, kept);
  const outer = stack[stack.length - 1];
  for (const t of mine) {
    if (kept.has(t)) outer?.add(t);
    else t.dispose();
  }
  return result;
}
