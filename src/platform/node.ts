/**
 * The platform's Node side: Node's built-in modules, loaded on first use through
 * `process.getBuiltinModule` (Node >= 20.16) rather than imported at top level, so the same module
 * graph loads in a browser. This is the one place that reaches Node's built-ins.
 */

/** Node's process object where Kiln runs in Node; undefined in a browser. */
export const nodeProcess: NodeJS.Process | undefined = (() => {
  const p = (globalThis as { process?: NodeJS.Process }).process;
  return typeof p?.versions?.node === 'string' ? p : undefined;
})();

/** True in Node (and its worker threads). */
export const inNode = nodeProcess !== undefined;

/** A Node-only feature was used outside Node. */
export class NotInBrowserError extends Error {
  constructor(what: string, id: string) {
    super(`${what} needs Node (node:${id}), which this environment (a browser or worker) does not have`);
    this.name = 'NotInBrowserError';
  }
}

function load(id: string, what: string): object {
  if (!nodeProcess) throw new NotInBrowserError(what, id);
  if (typeof nodeProcess.getBuiltinModule !== 'function') {
    throw new Error(`Kiln needs Node >= 20.16 (process.getBuiltinModule), this is ${nodeProcess.version}`);
  }
  const m = nodeProcess.getBuiltinModule(`node:${id}`);
  if (!m) throw new Error(`node:${id} is not a built-in module of Node ${nodeProcess.version}`);
  return m;
}

/**
 * A stand-in for `import x from 'node:<id>'`: property reads load the module on first use (and, in
 * a browser, throw NotInBrowserError naming `what`). Typed as the module itself.
 */
export function builtin<T extends object>(id: string, what: string): T {
  let mod: object | undefined;
  const get = (): object => (mod ??= load(id, what));
  return new Proxy({} as T, {
    get: (_t, k) => Reflect.get(get(), k),
    has: (_t, k) => Reflect.has(get(), k),
    set: (_t, k, v) => Reflect.set(get(), k, v),
  });
}
