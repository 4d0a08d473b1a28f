/**
 * Compile worker entry. Runs one task at a time: imports the handler module named in the message
 * (cached per worker), calls the export with the payload and posts back the value or the error.
 */
import { workerThreads } from '../../platform/index.js';
import { loadHandler, serializeError } from './handlers.js';
import type { ResultMessage, TaskMessage } from './types.js';

const port = workerThreads.parentPort;
if (!port) throw new Error('kiln compile worker: must be started as a worker thread');

port.on('message', (msg: TaskMessage) => {
  void run(msg);
});

async function run(msg: TaskMessage): Promise<void> {
  let reply: ResultMessage;
  try {
    const handler = await loadHandler(msg.kind, msg.handler);
    const value = await handler(msg.payload);
    reply = { id: msg.id, ok: true, value };
  } catch (e) {
    reply = { id: msg.id, ok: false, error: serializeError(e) };
  }
  const out = msg.replyPort ?? port!;
  try {
    out.postMessage(reply);
  } catch (e) {
    // The handler returned something structured clone cannot copy (a function, a class with private state...).
    out.postMessage({
      id: msg.id,
      ok: false,
      error: serializeError(new Error(`compile task '${msg.kind}': the handler's result cannot be sent back to the main thread: ${(e as Error).message}`)),
    } satisfies ResultMessage);
  }
  if (msg.done) {
    Atomics.store(msg.done, 0, 1);
    Atomics.notify(msg.done, 0);
  }
}
