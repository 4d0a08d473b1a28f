/**
 * The messages between the webgpu accelerator (main thread) and the thread that owns the Dawn
 * device (worker.ts). WebGPU answers readbacks, errors and device loss only through promises, and a
 * Node thread cannot wait for its own promises; so the device lives on a worker and the main thread
 * waits for answers with Atomics.wait, which is what makes `toArray()` and `.to('cpu')` synchronous.
 *
 * Work is sent in batches (one postMessage per flush, the commands as one transferred Float64Array
 * and the dispatches' metadata as one Uint32Array: OP_DISPATCH; on the worker one command encoder
 * per batch, split only where an upload must run at its place in the queue, and bind groups reused
 * across batches: bind-groups.ts; a recorded program replays as one command: 'replay');
 * calls (init, compile, read, sync) are answered through a MessagePort and a shared flag. Buffers
 * and pipelines are numbered by the main thread, so a batch never waits for an id.
 */
import type { MessagePort } from 'node:worker_threads';

/** Commands that need no answer, applied in order on the device's one queue. */
export type Command =
  | { readonly k: 'create'; readonly id: number; readonly size: number }
  | { readonly k: 'destroy'; readonly id: number }
  /** Bytes to `id` at `offset`; offset and data length are multiples of 4 (the host pads). */
  | { readonly k: 'write'; readonly id: number; readonly offset: number; readonly data: Uint8Array }
  | { readonly k: 'copy'; readonly src: number; readonly srcOffset: number; readonly dst: number; readonly dstOffset: number; readonly size: number }
  | { readonly k: 'zero'; readonly id: number; readonly offset: number; readonly size: number }
  /**
   * One compute dispatch: the pipeline, the storage buffers in binding order (0..n-1), and the
   * kernel's metadata words, bound read-only at binding n.
   */
  | { readonly k: 'dispatch'; readonly pipeline: number; readonly buffers: readonly number[]; readonly meta: Uint32Array; readonly groups: readonly [number, number, number] }
  /**
   * A device timestamp into slot `slot` of the worker's timestamp query set (an empty compute pass
   * whose beginning is stamped, after the work queued before it): what a recorded Event is.
   */
  | { readonly k: 'stamp'; readonly slot: number }
  /**
   * Starts creating pipeline `id` asynchronously (WGSL that was validated before: the disk cache's
   * sources); a later dispatch of it waits on the worker, never on the main thread. A compile error
   * is a fault reported with the next answer.
   */
  | { readonly k: 'pipeline'; readonly id: number; readonly source: string; readonly label: string }
  /**
   * Recordings (a compiled program's commands, replayed by later calls: compile/codegen/wgsl/replay.ts).
   * Between 'record' and 'record-end' the device thread applies dispatches, copies and clears as
   * usual and also keeps them; 'record-end' with keep makes recording `id` (its own metadata
   * buffer and bind groups), without keep forgets them. 'replay' encodes a recording's commands
   * again at its place in the queue; 'drop-recording' frees it.
   */
  | { readonly k: 'record'; readonly id: number }
  | { readonly k: 'record-end'; readonly id: number; readonly keep: boolean }
  /**
   * `submitEvery` > 0: submit after every that many of its dispatches, so the GPU starts while the
   * rest is encoded. `ahead`: the device thread encodes the recording's next replay while it has
   * nothing else to do (worker.ts, EncodeAhead), so that replay only submits.
   */
  | { readonly k: 'replay'; readonly id: number; readonly submitEvery: number; readonly ahead: boolean; readonly skip?: readonly string[] }
  | { readonly k: 'drop-recording'; readonly id: number };

/** Slots of the timestamp query set (a ring: an event's stamp is good until this many later records). */
export const STAMP_SLOTS = 4096;

export type CommandKind = Command['k'];

/**
 * A command as sent: a dispatch's metadata words travel in the batch's one packed array (`meta` of
 * the batch message, transferred, at word `metaAt`, `metaLen` words, packed without gaps), not as a
 * typed array of its own. Structured-cloning a thousand small typed arrays per decode step was the
 * largest share of the main thread's time in postMessage. The device thread interns the words in
 * its metadata arena (bind-groups.ts), in slots of the storage-offset alignment.
 */
export type WireCommand = Exclude<Command, { k: 'dispatch' }> | { readonly k: 'dispatch'; readonly pipeline: number; readonly buffers: readonly number[]; readonly metaAt: number; readonly metaLen: number; readonly groups: readonly [number, number, number] };

/** Calls: the main thread blocks until the worker answers. */
export type Call =
  | { readonly k: 'init' }
  | { readonly k: 'compile'; readonly id: number; readonly source: string; readonly label: string }
  | { readonly k: 'read'; readonly id: number; readonly offset: number; readonly size: number }
  | { readonly k: 'sync' }
  /** The stamps of these slots, in nanoseconds, as a Float64Array's buffer (after earlier work). */
  | { readonly k: 'stamps'; readonly slots: readonly number[] }
  /** Destroys the device (tests: the device-lost path without a driver reset). */
  | { readonly k: 'lose' }
  /** The device thread's counters (bind-groups.ts: groups made and reused, arena writes), after earlier work. */
  | { readonly k: 'stats' };

export type CallKind = Call['k'];

/** What went wrong on the device since the last answer (uncaptured errors, loss). */
export interface DeviceFault {
  readonly kind: 'validation' | 'out-of-memory' | 'internal' | 'lost';
  readonly message: string;
}

/** The adapter and device the worker opened. */
export interface AdapterReport {
  readonly backend: string;
  readonly vendor: string;
  readonly architecture: string;
  readonly device: string;
  readonly description: string;
  readonly features: readonly string[];
  readonly limits: Readonly<Record<string, number>>;
  readonly toggles: readonly string[];
  /** The adapter's subgroup sizes (0 when it does not say). */
  readonly subgroupMinSize?: number;
  readonly subgroupMaxSize?: number;
  /** Its subgroup matrix shapes where the device has chromium-experimental-subgroup-matrix (Dawn's adapter info). */
  readonly subgroupMatrixConfigs?: readonly SubgroupMatrixConfig[];
}

/** One subgroup matrix shape: C[M, N] (resultComponentType) += A[M, K] B[K, N] (componentType). */
export interface SubgroupMatrixConfig {
  readonly componentType: string;
  readonly resultComponentType: string;
  readonly M: number;
  readonly N: number;
  readonly K: number;
}

export type Answer =
  | { readonly ok: true; readonly faults: readonly DeviceFault[]; readonly adapter?: AdapterReport; readonly data?: ArrayBuffer; readonly stats?: Readonly<Record<string, number>> }
  | { readonly ok: false; readonly faults: readonly DeviceFault[]; readonly error: string };

/**
 * Messages posted to the worker: a batch of commands, or a call to answer. In a browser the caller
 * cannot receive a message while it blocks (no receiveMessageOnPort), so a call carries `reply`, a
 * SharedArrayBuffer the worker writes the answer into (encodeAnswer), and the first message is
 * `start` (a Web Worker has no workerData).
 */
export type ToWorker =
  | { readonly t: 'batch'; readonly ops: Float64Array; readonly others: readonly WireCommand[]; readonly meta?: Uint32Array }
  | { readonly t: 'call'; readonly call: Call; readonly reply?: SharedArrayBuffer }
  | { readonly t: 'start'; readonly init: WorkerInit };

/** Bytes of a reply buffer besides a read's data: the header and the answer's JSON. */
export const REPLY_SLACK = 256 * 1024;

/** Writes `a` into `reply`: [json bytes, data bytes] as two uint32, the JSON (without data), the data. */
export function encodeAnswer(a: Answer, reply: SharedArrayBuffer): void {
  const data = a.ok && a.data ? new Uint8Array(a.data) : new Uint8Array(0);
  let json = new TextEncoder().encode(JSON.stringify({ ...a, data: undefined }));
  if (8 + json.length + data.length > reply.byteLength) {
    json = new TextEncoder().encode(JSON.stringify({ ok: false, faults: a.faults, error: `the answer (${json.length + data.length} bytes) does not fit the reply buffer (${reply.byteLength})` }));
    data.fill(0);
  }
  const head = new Uint32Array(reply, 0, 2);
  head[0] = json.length;
  head[1] = 8 + json.length + data.length <= reply.byteLength ? data.length : 0;
  new Uint8Array(reply, 8, json.length).set(json);
  if (head[1] > 0) new Uint8Array(reply, 8 + json.length, data.length).set(data);
}

/** Reads what encodeAnswer wrote (the data copied out of the shared buffer). */
export function decodeAnswer(reply: SharedArrayBuffer): Answer {
  const head = new Uint32Array(reply, 0, 2);
  const jsonLen = head[0]!;
  const dataLen = head[1]!;
  const a = JSON.parse(new TextDecoder().decode(new Uint8Array(reply, 8, jsonLen).slice())) as Answer;
  if (!a.ok || dataLen === 0) return a;
  const data = new Uint8Array(reply, 8 + jsonLen, dataLen).slice().buffer;
  return { ...a, data };
}

/**
 * A batch's commands in order, as numbers: a dispatch is [1, pipeline, metaAt, metaLen, x, y, z,
 * n, buffer ids x n], any other command [0, its index in `others`] (sent as objects: uploads carry
 * their bytes, pipelines their WGSL). A decode step is about a thousand dispatches: as one
 * transferred Float64Array they cost postMessage nothing to clone.
 */
export const OP_OTHER = 0;
export const OP_DISPATCH = 1;

/** The commands of a batch message, in order (the worker's view of `ops` and `others`). */
export function decodeBatch(ops: Float64Array, others: readonly WireCommand[]): WireCommand[] {
  const out: WireCommand[] = [];
  for (let i = 0; i < ops.length; ) {
    if (ops[i] === OP_OTHER) {
      out.push(others[ops[i + 1]!]!);
      i += 2;
      continue;
    }
    const n = ops[i + 7]!;
    const buffers: number[] = new Array<number>(n);
    for (let j = 0; j < n; j++) buffers[j] = ops[i + 8 + j]!;
    out.push({ k: 'dispatch', pipeline: ops[i + 1]!, metaAt: ops[i + 2]!, metaLen: ops[i + 3]!, groups: [ops[i + 4]!, ops[i + 5]!, ops[i + 6]!], buffers });
    i += 8 + n;
  }
  return out;
}

/** Data the worker starts with. */
export interface WorkerInit {
  /** Int32Array over it: [0] flips to 1 when an answer is posted. */
  readonly flag: SharedArrayBuffer;
  /** Node: where answers are posted (a browser's answers go through each call's reply buffer). */
  readonly port?: MessagePort;
  /** Dawn `create` options: backend and toggles. */
  readonly dawnOptions: readonly string[];
  /** Features requested when the adapter offers them. */
  readonly wantedFeatures: readonly string[];
}
