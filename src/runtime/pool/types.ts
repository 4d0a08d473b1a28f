/** Messages between the compile pool and its workers (structured clone only). */

/** A unit of compile work: `kind` selects the registered handler, `payload` must be structured-cloneable. */
export interface CompileTask {
  kind: string;
  payload: unknown;
}

/** Where a worker finds the handler for a task kind: a module URL and the name of an exported function. */
export interface HandlerSpec {
  moduleUrl: string;
  exportName: string;
}

/** Parent -> worker. The handler spec travels with every task so workers need no registry of their own. */
export interface TaskMessage {
  id: number;
  kind: string;
  handler: HandlerSpec;
  payload: unknown;
  /**
   * Synchronous tasks: the reply goes to this port instead of the worker's parent port, and the
   * worker then sets `done[0]` to 1 and notifies, so a main thread blocked in Atomics.wait wakes
   * and reads the reply with receiveMessageOnPort.
   */
  replyPort?: import('node:worker_threads').MessagePort;
  done?: Int32Array;
}

export interface SerializedError {
  name: string;
  message: string;
  stack: string;
}

/** Worker -> parent. */
export type ResultMessage =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: SerializedError };

export type TaskHandler = (payload: unknown) => unknown;
