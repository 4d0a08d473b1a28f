/**
 * The main thread's side of the device thread (protocol.ts): starts the worker, queues commands
 * and sends them as one batch per flush, and makes calls that block on Atomics.wait until the
 * worker answers. A flush happens at every call, when the queue is long, and on the next turn of
 * the event loop, so the GPU starts while the host is still issuing work. Between beginRecording
 * and endRecording it notes what a replay could not repeat (compile/codegen/wgsl/replay.ts).
 */
import { inNode, workerExecArgv, workerThreads } from '../../platform/index.js';
import type { MessagePort } from 'node:worker_threads';
import { decodeAnswer, REPLY_SLACK, type AdapterReport, type Answer, type Call, type Command, type ToWorker, type WireCommand, type WorkerInit, OP_DISPATCH, OP_OTHER } from './protocol.js';
import { WebgpuError } from './errors.js';

/** Commands queued before a batch is sent without waiting for a call. */
const BATCH_LIMIT = 256;
/** How long a call may wait for the worker before Kiln gives up on it. */
const CALL_TIMEOUT_MS = 120_000;
/**
 * How long the process's exit waits for queued GPU work. Node kills a worker thread at exit even
 * inside a Dawn call, and Dawn then aborts the process (napi_throw, exit code 134): a program that
 * queued thousands of dispatches without reading a result crashed after printing its output.
 */
const EXIT_DRAIN_MS = 30_000;

/** What the bridge needs of a Node worker thread or a browser's Web Worker. */
interface DeviceWorker {
  postMessage(msg: ToWorker, transfer?: ArrayBuffer[]): void;
  terminate(): unknown;
}

/** The browser's Worker constructor (the DOM types are not in this project's lib). */
type WebWorkerCtor = new (url: URL, options: { type: 'module'; name: string }) => DeviceWorker & { onerror: ((e: { message: string }) => void) | null };

/**
 * Browser: the device worker's bundle (esbuild builds src/runtime/webgpu/worker.ts as
 * dist/browser/webgpu-device.js next to kiln.js).
 */
const BROWSER_WORKER = './webgpu-device.js';

export class Bridge {
  private readonly worker: DeviceWorker;
  private readonly port: MessagePort | undefined;
  private readonly flag = new Int32Array(new SharedArrayBuffer(4));
  /** The queued commands as numbers (protocol.ts: OP_*), and the ones sent as objects. */
  private ops = new Float64Array(1 << 14);
  private opsUsed = 0;
  private queued = 0;
  private others: WireCommand[] = [];
  /** The queued dispatches' metadata words, packed one after another. */
  private meta = new Uint32Array(1 << 14);
  private metaUsed = 0;
  private transfers: ArrayBuffer[] = [];
  private flushScheduled = false;
  private dead: string | undefined;
  /**
   * The recording being made (between 'record' and 'record-end'), and why it cannot be replayed if
   * something enqueued or called since would not repeat: a host-to-device write (its bytes are the
   * host's of this call), a destroyed buffer, or a read of device data (the host decided on it).
   */
  private recording: { readonly id: number; broken?: string } | undefined;
  readonly adapter: AdapterReport;

  /** Starts the worker and opens the adapter; throws when Dawn finds none. Node only: a browser uses Bridge.openInBrowser. */
  constructor(dawnOptions: readonly string[], wantedFeatures: readonly string[], browser?: { worker: DeviceWorker; adapter: AdapterReport; flag: Int32Array<SharedArrayBuffer> }) {
    if (browser) {
      this.worker = browser.worker;
      this.flag = browser.flag;
      this.port = undefined;
      this.adapter = browser.adapter;
      return;
    }
    const { port1, port2 } = new workerThreads.MessageChannel();
    this.port = port1;
    const data: WorkerInit = { flag: this.flag.buffer as SharedArrayBuffer, port: port2, dawnOptions, wantedFeatures };
    // Explicit options: inherited ones can kill the worker before it runs (`node -e`: worker-argv.ts),
    // and a worker that never answers is only found out after CALL_TIMEOUT_MS.
    const start = (execArgv: string[]): InstanceType<typeof workerThreads.Worker> =>
      new workerThreads.Worker(new URL('./worker.js', import.meta.url), { workerData: data, transferList: [port2], execArgv });
    let worker: InstanceType<typeof workerThreads.Worker>;
    try {
      worker = start(workerExecArgv());
    } catch {
      // Options Node refuses per worker (V8 flags) are process-wide: the worker has them anyway.
      worker = start([]);
    }
    this.worker = worker;
    // The worker must never keep a finished program alive.
    worker.unref();
    worker.on('error', (e) => (this.dead = `the webgpu device thread failed: ${e.message}`));
    worker.on('exit', (code) => (this.dead ??= `the webgpu device thread exited (code ${code})`));
    const a = this.call({ k: 'init' }, 'opening the adapter');
    if (!a.ok) {
      void worker.terminate();
      throw new WebgpuError(a.error, 'worker');
    }
    this.adapter = a.adapter!;
    // 'exit' also runs on process.exit(); its handlers may only block, which call() does.
    process.once('exit', () => this.drainAtExit());
  }

  /** Waits (bounded) until the worker has applied every batch, so exit never kills it inside Dawn. */
  private drainAtExit(): void {
    if (this.dead !== undefined) return;
    try {
      this.call({ k: 'sync' }, 'finishing queued work at exit', EXIT_DRAIN_MS);
    } catch {
      // A device lost or a worker that does not answer: nothing left to protect.
    }
  }

  /**
   * Browser: starts the device worker (a module Web Worker that owns navigator.gpu's device) and
   * opens the adapter, asynchronously: a browser starts a worker only when the thread that made it
   * returns to its event loop, so the first answer cannot be waited for with Atomics.wait. Later
   * calls block in Atomics.wait, which a browser allows in a worker only: Kiln's webgpu device is
   * usable from a Web Worker of a cross-origin isolated page (SharedArrayBuffer).
   */
  static async openInBrowser(wantedFeatures: readonly string[]): Promise<Bridge> {
    const Ctor = (globalThis as { Worker?: WebWorkerCtor }).Worker;
    if (!Ctor) throw new WebgpuError('webgpu in a browser runs from a Web Worker that can start workers (no Worker here)', 'worker');
    if (typeof SharedArrayBuffer !== 'function' || (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated === false) {
      throw new WebgpuError('webgpu in a browser needs SharedArrayBuffer: serve the page cross-origin isolated (COOP: same-origin, COEP: require-corp)', 'worker');
    }
    const flag = new Int32Array(new SharedArrayBuffer(4));
    const worker = new Ctor(new URL(BROWSER_WORKER, import.meta.url), { type: 'module', name: 'kiln-webgpu' });
    let failed: string | undefined;
    worker.onerror = (e) => (failed = `the webgpu device worker failed: ${e.message}`);
    worker.postMessage({ t: 'start', init: { flag: flag.buffer as SharedArrayBuffer, dawnOptions: [], wantedFeatures } });
    const reply = new SharedArrayBuffer(REPLY_SLACK);
    worker.postMessage({ t: 'call', call: { k: 'init' }, reply });
    const start = Date.now();
    while (Atomics.load(flag, 0) === 0) {
      if (failed !== undefined) break;
      if (Date.now() - start > CALL_TIMEOUT_MS) failed = `the webgpu device worker did not answer within ${CALL_TIMEOUT_MS / 1000} s`;
      else await new Promise((r) => setTimeout(r, 2));
    }
    if (failed !== undefined) {
      worker.terminate();
      throw new WebgpuError(failed, 'worker');
    }
    const a = decodeAnswer(reply);
    if (!a.ok) {
      worker.terminate();
      throw new WebgpuError(a.error, 'worker');
    }
    return new Bridge([], wantedFeatures, { worker, adapter: a.adapter!, flag });
  }

  /** Starts recording `id` (protocol.ts: 'record'); endRecording says whether it can be replayed. */
  beginRecording(id: number): void {
    if (this.recording) throw new WebgpuError(`recording ${id} started while recording ${this.recording.id}`, 'worker');
    this.enqueue({ k: 'record', id });
    this.recording = { id };
  }

  /** Ends the recording: kept on the device thread unless something in it cannot be replayed (returned). */
  endRecording(): { id: number; broken?: string } {
    const r = this.recording;
    if (!r) throw new WebgpuError('endRecording without beginRecording', 'worker');
    this.recording = undefined;
    this.enqueue({ k: 'record-end', id: r.id, keep: r.broken === undefined });
    return r;
  }

  /** Queues a command; `transfer` names a buffer the command owns (moved, not copied, to the worker). */
  enqueue(cmd: Command, transfer?: ArrayBuffer): void {
    if (this.recording && this.recording.broken === undefined) {
      if (cmd.k === 'write') this.recording.broken = 'a host-to-device write';
      else if (cmd.k === 'destroy') this.recording.broken = 'a buffer destroyed';
      // The device thread keeps what it applies, not what another recording replays.
      else if (cmd.k === 'replay') this.recording.broken = 'a replay of another recording';
    }
    if (cmd.k === 'dispatch') {
      const size = cmd.meta.length;
      if (this.metaUsed + size > this.meta.length) {
        const grown = new Uint32Array(Math.max(2 * this.meta.length, this.metaUsed + size));
        grown.set(this.meta.subarray(0, this.metaUsed));
        this.meta = grown;
      }
      this.meta.set(cmd.meta, this.metaUsed);
      const n = cmd.buffers.length;
      const at = this.reserveOps(8 + n);
      const o = this.ops;
      o[at] = OP_DISPATCH;
      o[at + 1] = cmd.pipeline;
      o[at + 2] = this.metaUsed;
      o[at + 3] = size;
      o[at + 4] = cmd.groups[0];
      o[at + 5] = cmd.groups[1];
      o[at + 6] = cmd.groups[2];
      o[at + 7] = n;
      for (let j = 0; j < n; j++) o[at + 8 + j] = cmd.buffers[j]!;
      this.metaUsed += size;
    } else {
      const at = this.reserveOps(2);
      this.ops[at] = OP_OTHER;
      this.ops[at + 1] = this.others.length;
      this.others.push(cmd);
    }
    this.queued++;
    if (transfer) this.transfers.push(transfer);
    if (this.queued >= BATCH_LIMIT) this.flush();
    else if (!this.flushScheduled) {
      this.flushScheduled = true;
      const later = (): void => {
        this.flushScheduled = false;
        this.flush();
      };
      if (inNode) setImmediate(later).unref();
      else setTimeout(later, 0);
    }
  }

  /** The index of `n` free numbers at the end of the queued ops (grown as needed). */
  private reserveOps(n: number): number {
    if (this.opsUsed + n > this.ops.length) {
      const grown = new Float64Array(Math.max(2 * this.ops.length, this.opsUsed + n));
      grown.set(this.ops.subarray(0, this.opsUsed));
      this.ops = grown;
    }
    const at = this.opsUsed;
    this.opsUsed += n;
    return at;
  }

  /** Sends the queued commands as one batch. */
  flush(): void {
    if (this.queued === 0 || this.dead !== undefined) return;
    const meta = this.metaUsed > 0 ? this.meta.slice(0, this.metaUsed) : undefined;
    if (meta) this.transfers.push(meta.buffer);
    const ops = this.ops.slice(0, this.opsUsed);
    this.transfers.push(ops.buffer);
    const msg: ToWorker = { t: 'batch', ops, others: this.others, meta };
    this.worker.postMessage(msg, this.transfers);
    this.others = [];
    this.transfers = [];
    this.metaUsed = 0;
    this.opsUsed = 0;
    this.queued = 0;
  }

  /** Sends what is queued, then `call`, and waits for the answer. */
  call(call: Call, doing: string, timeoutMs = CALL_TIMEOUT_MS): Answer {
    if (this.dead !== undefined) throw new WebgpuError(`${this.dead} (while ${doing})`, 'worker');
    if (this.recording && this.recording.broken === undefined && (call.k === 'read' || call.k === 'stamps')) this.recording.broken = `a read of device data (${doing})`;
    this.flush();
    Atomics.store(this.flag, 0, 0);
    const reply = this.port ? undefined : new SharedArrayBuffer(REPLY_SLACK + (call.k === 'read' ? call.size : call.k === 'stamps' ? call.slots.length * 8 : 0));
    const msg: ToWorker = { t: 'call', call, reply };
    this.worker.postMessage(msg);
    const start = Date.now();
    while (Atomics.load(this.flag, 0) === 0) {
      Atomics.wait(this.flag, 0, 0, Math.min(1000, timeoutMs));
      if (Atomics.load(this.flag, 0) === 0 && Date.now() - start > timeoutMs) {
        this.dead = `the webgpu device thread did not answer within ${timeoutMs / 1000} s`;
        throw new WebgpuError(`${this.dead} (while ${doing})`, 'worker');
      }
    }
    if (reply) return decodeAnswer(reply);
    const got = workerThreads.receiveMessageOnPort(this.port!);
    if (!got) throw new WebgpuError(`the webgpu device thread signalled but sent no answer (while ${doing})`, 'worker');
    return got.message as Answer;
  }

  /** Stops the worker (tests; the process exits without it). */
  close(): Promise<number> {
    this.dead ??= 'the webgpu device thread was closed';
    return Promise.resolve(this.worker.terminate() as number | Promise<number>);
  }
}
