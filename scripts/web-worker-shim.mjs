/**
 * A Web Worker on node:worker_threads, for peers that start their threads with `new Worker(blobUrl)`
 * and talk through self.onmessage / postMessage (jax-js's Wasm pool). Node 20 has no Worker global,
 * and without one jax-js silently runs single threaded: a thread-count mismatch with the engines it
 * is compared with. The bench-*-peers.sh scripts copy this file next to the scripts that import it.
 * ShimWorker.started counts the workers made, so a run can record that the threads really started.
 */
import { resolveObjectURL } from 'node:buffer';
import { Worker as NodeWorker } from 'node:worker_threads';

const SHIM = `
const { parentPort } = require('node:worker_threads');
globalThis.self = globalThis;
globalThis.postMessage = (d) => parentPort.postMessage(d);
let loaded = false;
parentPort.on('message', (d) => {
  if (!loaded) { loaded = true; (0, eval)(d); return; }
  self.onmessage({ data: d });
});`;

export class ShimWorker {
  static started = 0;
  constructor(url) {
    ShimWorker.started++;
    this.onmessage = null;
    this.onerror = null;
    this.queue = [];
    this.w = new NodeWorker(SHIM, { eval: true });
    this.w.unref();
    this.w.on('message', (d) => this.onmessage?.({ data: d }));
    this.w.on('error', (e) => this.onerror?.(e));
    resolveObjectURL(String(url)).text().then((src) => {
      this.w.postMessage(src);
      for (const m of this.queue) this.w.postMessage(m);
      this.queue = null;
    });
  }
  postMessage(m) {
    if (this.queue) this.queue.push(m);
    else this.w.postMessage(m);
  }
  terminate() {
    return this.w.terminate();
  }
}

/** Makes jax-js see `threads` cores and start its pool on ShimWorker. */
export function installWebWorkers(threads) {
  globalThis.navigator = { ...(globalThis.navigator ?? {}), hardwareConcurrency: threads };
  globalThis.Worker ??= ShimWorker;
}
