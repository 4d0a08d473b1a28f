/**
 * The main thread's side of the device thread (protocol.ts): starts the worker, queues commands
 * and sends them as one batch per flush, and makes calls that block on Atomics.wait until the
 * worker answers. A flush happens at every call, when the queue is long, and on the next turn of
 * the event loop, so the GPU starts while the host is still issuing work.
 */
import { workerThreads } from '../../platform/index.js';
import type { MessagePort, Worker } from 'node:worker_threads';
import type { AdapterReport, Answer, Call, Command, ToWorker, WorkerInit } from './protocol.js';
import { WebgpuError } from './errors.js';

/** Commands queued before a batch is sent without waiting for a call. */
const BATCH_LIMIT = 256;
/** How long a call may wait for the worker before Kiln gives up on it. */
const CALL_TIMEOUT_MS = 120_000;

export class Bridge {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  private readonly flag = new Int32Array(new SharedArrayBuffer(4));
  private queue: Command[] = [];
  private transfers: ArrayBuffer[] = [];
  private flushScheduled = false;
  private dead: string | undefined;
  readonly adapter: AdapterReport;

  /** Starts the worker and opens the adapter; throws when Dawn finds none. */
  constructor(dawnOptions: readonly string[], wantedFeatures: readonly string[]) {
    const { port1, port2 } = new workerThreads.MessageChannel();
    this.port = port1;
    const data: WorkerInit = { flag: this.flag.buffer as SharedArrayBuffer, port: port2, dawnOptions, wantedFeatures };
    this.worker = new workerThreads.Worker(new URL('./worker.js', import.meta.url), { workerData: data, transferList: [port2] });
    // The worker must never keep a finished program alive.
    this.worker.unref();
    this.worker.on('error', (e) => (this.dead = `the webgpu device thread failed: ${e.message}`));
    this.worker.on('exit', (code) => (this.dead ??= `the webgpu device thread exited (code ${code})`));
    const a = this.call({ k: 'init' }, 'opening the adapter');
    if (!a.ok) {
      void this.worker.terminate();
      throw new WebgpuError(a.error, 'worker');
    }
    this.adapter = a.adapter!;
  }

  /** Queues a command; `transfer` names a buffer the command owns (moved, not copied, to the worker). */
  enqueue(cmd: Command, transfer?: ArrayBuffer): void {
    this.queue.push(cmd);
    if (transfer) this.transfers.push(transfer);
    if (this.queue.length >= BATCH_LIMIT) this.flush();
    else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        this.flush();
      }).unref();
    }
  }

  /** Sends the queued commands as one batch. */
  flush(): void {
    if (this.queue.length === 0 || this.dead !== undefined) return;
    const msg: ToWorker = { t: 'batch', cmds: this.queue };
    this.worker.postMessage(msg, this.transfers);
    this.queue = [];
    this.transfers = [];
  }

  /** Sends what is queued, then `call`, and waits for the answer. */
  call(call: Call, doing: string): Answer {
    if (this.dead !== undefined) throw new WebgpuError(`${this.dead} (while ${doing})`, 'worker');
    this.flush();
    Atomics.store(this.flag, 0, 0);
    const msg: ToWorker = { t: 'call', call };
    this.worker.postMessage(msg);
    const start = Date.now();
    while (Atomics.load(this.flag, 0) === 0) {
      Atomics.wait(this.flag, 0, 0, 1000);
      if (Atomics.load(this.flag, 0) === 0 && Date.now() - start > CALL_TIMEOUT_MS) {
        this.dead = `the webgpu device thread did not answer within ${CALL_TIMEOUT_MS / 1000} s`;
        throw new WebgpuError(`${this.dead} (while ${doing})`, 'worker');
      }
    }
    const got = workerThreads.receiveMessageOnPort(this.port);
    if (!got) throw new WebgpuError(`the webgpu device thread signalled but sent no answer (while ${doing})`, 'worker');
    return got.message as Answer;
  }

  /** Stops the worker (tests; the process exits without it). */
  close(): Promise<number> {
    this.dead ??= 'the webgpu device thread was closed';
    return this.worker.terminate();
  }
}
