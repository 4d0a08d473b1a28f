/** Compile task handlers for the pool tests; loaded by the workers through their module URL. */
import { threadId } from 'node:worker_threads';

export function echo(payload: unknown): { threadId: number; payload: unknown } {
  return { threadId, payload };
}

/** Waits `ms`, reporting when it started and ended (epoch ms, comparable across threads). */
export async function slowEcho(payload: unknown): Promise<{ threadId: number; payload: unknown; start: number; end: number }> {
  const { ms } = payload as { ms: number };
  const start = performance.timeOrigin + performance.now();
  await new Promise((r) => setTimeout(r, ms));
  return { threadId, payload, start, end: performance.timeOrigin + performance.now() };
}

export function fail(payload: unknown): never {
  throw new RangeError(`handler refused payload ${JSON.stringify(payload)}`);
}

/** Ends the worker thread abruptly. */
export function exitWorker(): never {
  process.exit(7);
}

/** Throws outside the task's promise chain: an uncaught error kills the worker. */
export function uncaught(): Promise<never> {
  setTimeout(() => {
    throw new Error('uncaught explosion in a timer');
  }, 0);
  return new Promise<never>(() => {});
}

export function returnsFunction(): () => void {
  return () => {};
}

export const notAFunction = 42;

/** Fails only in a worker thread (the in-process retry of the same kind succeeds). */
export function failInWorker(): never {
  throw new Error(`worker thread ${threadId} is sick`);
}

/** Never settles: its worker times out. */
export function hang(): Promise<never> {
  return new Promise<never>(() => {});
}
