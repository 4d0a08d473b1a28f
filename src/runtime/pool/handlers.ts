/**
 * Loading task handlers from their module URL. Shared by the workers and by the in-process fallback
 * (`KILN_COMPILE_WORKERS=0`), so both run exactly the same code.
 */
import type { HandlerSpec, SerializedError, TaskHandler } from './types.js';

const modules = new Map<string, Promise<Record<string, unknown>>>();

/** Imports `spec.moduleUrl` once per thread and returns its `spec.exportName` export, checked to be a function. */
export async function loadHandler(kind: string, spec: HandlerSpec): Promise<TaskHandler> {
  let mod = modules.get(spec.moduleUrl);
  if (!mod) {
    mod = import(spec.moduleUrl) as Promise<Record<string, unknown>>;
    modules.set(spec.moduleUrl, mod);
    // A failed import is not cached, so a fixed module can be retried.
    mod.catch(() => modules.delete(spec.moduleUrl));
  }
  let m: Record<string, unknown>;
  try {
    m = await mod;
  } catch (e) {
    throw new Error(`compile task '${kind}': cannot import handler module ${spec.moduleUrl}: ${(e as Error).message}`, { cause: e });
  }
  const fn = m[spec.exportName];
  if (typeof fn !== 'function') {
    throw new Error(`compile task '${kind}': module ${spec.moduleUrl} has no exported function '${spec.exportName}' (found ${typeof fn})`);
  }
  return fn as TaskHandler;
}

export function serializeError(e: unknown): SerializedError {
  if (e instanceof Error) return { name: e.name, message: e.message, stack: e.stack ?? `${e.name}: ${e.message}` };
  const message = typeof e === 'string' ? e : safeString(e);
  return { name: 'Error', message, stack: `Error (non-Error value thrown): ${message}` };
}

function safeString(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}
