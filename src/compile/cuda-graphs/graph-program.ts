/**
 * CUDA graphs for compiled programs on cuda (torch's mode='reduce-overhead'): the whole call is
 * captured once per input signature (dtypes, shapes, strides: static shapes, so one graph per size
 * of a dynamic dim) and later calls replay it with one cuGraphLaunch instead of one launch per
 * kernel (about 4.5 us of host time each from Node).
 *
 * Per signature, on its first call:
 *   1. compile: `program.prepare(inputs)` registers every kernel (every candidate in max-autotune)
 *      with the launcher and `flush()` compiles them in parallel in the compile worker pool;
 *   2. inputs: the first graph of a signature reads every input in place, by address; a later call
 *      whose arguments live elsewhere gets a second graph in which each argument has a static
 *      buffer of its own (same shape and strides) that replays copy into; lifted inputs
 *      (parameters, buffers, constants) are always read in place;
 *   3. warm-up: one run with a private stream as the device's default stream. Its allocations come
 *      from that stream's allocator free lists (a pool private to this graph, reserved here, since
 *      the caching allocator keeps free lists per stream) and everything lazy happens now
 *      (NVRTC, module loads, cuBLASLt plans and workspace, autotuning);
 *   4. capture: the same run between cuStreamBeginCapture_v2 / cuStreamEndCapture on that stream.
 *      Every allocation is served by the free lists the warm-up filled, so there is no cuMemAlloc
 *      inside capture (checked: `allocationsInCapture` counts reserved-byte growth);
 *   5. the outputs of the captured run are the static outputs.
 * A replay of the in-place graph needs every input at its captured address (the same buffers
 * each step: no copy at all); otherwise the copying graph copies each argument whose address
 * differs from its static buffer into it (one device-to-device copy), checks that lifted inputs
 * kept their address (else it captures again), and launches on the default stream.
 *
 * Aliasing (as torch's cudagraph trees warn): in mode 'reduce-overhead' the returned tensors share
 * the static output buffers, so the next replay of the same graph overwrites them; clone() what
 * must survive the next call. Mode 'default' (and 'max-autotune') use a graph only where it was
 * measured faster than launching the kernels one by one (timed with kiln.Event on first call),
 * and results never change under the caller: they are lent (Storage.borrow) over the static
 * buffers, and the next replay first gives each one still alive a copy of its own (detach). A
 * caller that disposes results before the next call (a loop under kiln.scope) pays no copy; the
 * old design cloned every output on every replay: an extra read and write of each output, as much
 * memory traffic as elementwise-4096's kernel itself.
 *
 * Calls that cannot be captured (an op that synchronises, e.g. scatterAdd reading indices back to
 * validate them; the gathers check theirs on the device) fail the capture. Where the graph has such a known op (piecewise.ts) the call is then split
 * into captured pieces around it; otherwise the program runs without graphs, with one warning
 * naming the op's error.
 */
import { emitWarning } from '../../platform/index.js';
import type { CudaAccelerator } from '../../runtime/cuda/cuda-accelerator.js';
import { captureOn, type CudaGraphExec, GraphCaptureError, poolStream, withDefaultStream } from '../../runtime/cuda/graph.js';
import type { CudaStream } from '../../runtime/cuda/stream.js';
import { CudaEvent } from '../../runtime/cuda/stream.js';
import { getAccelerator } from '../../runtime/registry.js';
import { itemSize } from '../../tensor/dtype.js';
import { keep, scope } from '../../tensor/scope.js';
import { Storage } from '../../tensor/storage.js';
import { storageSpan, Tensor } from '../../tensor/tensor.js';
import type { CompiledProgram } from '../backend.js';
import type { CudaProgram } from '../codegen/cuda/program.js';
import type { RuntimeLauncher } from '../codegen/cuda/runtime-launcher.js';
import type { DecisionStore } from './decision-store.js';

/** Graphs kept per program (one per input signature); beyond this, new signatures run without one. */
const MAX_GRAPHS = 16;
/** Runs of each way timed on a first call in mode 'default' (after one untimed run of each). */
const DECIDE_REPS = 5;

interface Captured {
  readonly exec: CudaGraphExec;
  /** The private pool's stream (its free lists hold the graph's intermediates). */
  readonly stream: CudaStream;
  /** Per graph input: its static buffer (arguments) or null (lifted: captured in place). */
  readonly statics: readonly (Tensor | null)[];
  /** Per graph input: the device address the graph reads. */
  readonly addresses: readonly number[];
  readonly spans: readonly number[];
  /** The captured call's output structure (tensors over static buffers). */
  readonly output: unknown;
  /** Use the graph for this signature (false: measured slower in mode 'default'). */
  useGraph: boolean;
  /** Storages lent to callers by earlier replays (detached before the next replay if alive). */
  lent: Storage[];
}

export interface CudaGraphStats {
  /** Graphs captured (one per signature, again when a lifted input moved). */
  captures: number;
  replays: number;
  /** Argument copies into static buffers at replay. */
  inputCopies: number;
  /** Results of an earlier replay still alive at the next one, copied out before it overwrote them. */
  detachCopies: number;
  /** Calls run by launching the kernels one by one. */
  plainRuns: number;
  /** Bytes the allocator reserved during captures (0: every allocation came from the warmed pool). */
  allocationsInCapture: number;
  /** Nodes of the last captured graph. */
  lastNodeCount: number;
  /** Set when capture failed and the program runs without graphs: why. */
  disabled: string | null;
  /** Mode 'default' measurements of the last first call (ms per call), or the stored ones it reused. */
  lastDecision: { plainMs: number; graphMs: number } | null;
  /** First calls whose graph-or-plain decision came from disk (decision-store.ts) instead of timing. */
  decisionsLoaded: number;
}

const warned = new Set<string>();

/**
 * Returns `x` with every Tensor inside arrays and plain objects replaced by `f(t)`. A tensor that
 * appears several times maps to ONE result: a joint program returns its loss both as the user's
 * output and among the differentiable outputs, and autograd's node is attached to the latter, so
 * two fresh objects for it would leave the user's loss without a graph (seen on the H200, where
 * 'default' mode chose replay for the conv-stack training step).
 */
function mapTensors(x: unknown, f: (t: Tensor) => Tensor, seen = new Map<Tensor, Tensor>()): unknown {
  if (x instanceof Tensor) {
    let y = seen.get(x);
    if (!y) seen.set(x, (y = f(x)));
    return y;
  }
  if (Array.isArray(x)) return x.map((e) => mapTensors(e, f, seen));
  if (x !== null && typeof x === 'object' && Object.getPrototypeOf(x) === Object.prototype) {
    return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, mapTensors(v, f, seen)]));
  }
  return x;
}

function tensorsOf(x: unknown, out: Tensor[] = []): Tensor[] {
  mapTensors(x, (t) => (out.push(t), t));
  return out;
}

const addressOf = (t: Tensor): number => (t.storage.buffer.handle as number) + t.offset * itemSize(t.dtype);

/** What the signature (`key`) of a call reads of one argument. */
interface ArgMeta {
  readonly dtype: Tensor['dtype'];
  readonly shape: readonly number[];
  readonly strides: readonly number[];
}

const argMeta = (t: Tensor): ArgMeta => ({ dtype: t.dtype, shape: t.shape, strides: t.strides });

function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Whether `inputs` would take `c`, the in-place graph of their signature, in `run`: the same
 * argument signature (`args`: null for lifted inputs, which the signature leaves out) and every
 * input (all on cuda) at the captured address.
 */
function sameCall(c: Captured, args: readonly (ArgMeta | null)[], inputs: readonly Tensor[]): boolean {
  if (inputs.length !== args.length) return false;
  for (let i = 0; i < inputs.length; i++) {
    const t = inputs[i]!;
    const m = args[i];
    if (t.device.type !== 'cuda') return false;
    if (m && (t.dtype !== m.dtype || !sameNumbers(t.shape, m.shape) || !sameNumbers(t.strides, m.strides))) return false;
    if (addressOf(t) !== c.addresses[i]) return false;
  }
  return true;
}

export type GraphPolicy = 'always' | 'measure' | 'off';

export class CudaGraphProgram implements CompiledProgram {
  readonly stats: CudaGraphStats = { captures: 0, replays: 0, inputCopies: 0, detachCopies: 0, plainRuns: 0, allocationsInCapture: 0, lastNodeCount: 0, disabled: null, lastDecision: null, decisionsLoaded: 0 };
  private readonly graphs = new Map<string, Captured>();
  private readonly prepared = new Set<string>();
  /** Set when the whole call could not be captured but pieces of it can (piecewise.ts). */
  private pieces: { readonly program: CompiledProgram; use: boolean } | undefined;
  /**
   * The last call that found its in-place graph with every input at its captured address, and
   * its arguments' metadata: a call that matches both takes the same path without building the
   * signature string or looking anything up (the steady state of a loop over the same buffers).
   */
  private last: { readonly c: Captured; readonly args: readonly (ArgMeta | null)[] } | undefined;
  private accelerator: CudaAccelerator | undefined;
  /** undefined until the first decision asks for it. */
  private decisions: DecisionStore | null | undefined;
  /** The op of the step at which the last capture failed (an extern or view step), if any. */
  private failedOp: string | undefined;

  constructor(
    readonly program: CudaProgram,
    readonly launcher: RuntimeLauncher,
    /** 'always': capture and replay; 'measure': replay where faster, cloning outputs; 'off': never. */
    readonly policy: GraphPolicy,
    /** Graph inputs that are function arguments (copied into static buffers); the rest are lifted. */
    private readonly isArg: readonly boolean[],
    /** Return the static output buffers themselves (mode 'reduce-overhead'), not clones. */
    private readonly aliasOutputs: boolean,
    /**
     * Builds the piecewise program used when the whole call cannot be captured (null: none), given
     * the op of the step at which the capture failed (an extern or view step), if known.
     */
    private readonly split?: (failedOp: string | undefined) => CompiledProgram | null,
    /** Where mode 'default' decisions persist across processes (made at the first decision; null: nowhere). */
    private readonly decisionStore?: () => DecisionStore | null,
  ) {
    if (policy === 'off') this.stats.disabled = 'CUDA graphs are off (KILN_CUDA_GRAPHS=0)';
  }

  /** Looked up at first use, so programs can be built, and inspected, without a device. */
  private get acc(): CudaAccelerator {
    return (this.accelerator ??= getAccelerator('cuda') as unknown as CudaAccelerator);
  }

  /** The piecewise program this one delegates to since the whole call could not be captured. */
  piecewise(): CompiledProgram | null {
    return this.pieces?.program ?? null;
  }

  get kernelCount(): number {
    return this.program.kernelCount;
  }

  describe(): string {
    const g = [...this.graphs.values()];
    const graphs = g.length === 0 ? 'no graph captured yet' : `${g.length} graph(s), ${g.filter((c) => c.useGraph).length} replayed`;
    if (this.pieces) return `${this.pieces.use ? this.pieces.program.describe() : this.program.describe()}\n// cuda graphs: captured in pieces${this.pieces.use ? '' : ' (measured slower: not used)'}`;
    return `${this.program.describe()}\n// cuda graphs (${this.policy}${this.aliasOutputs ? ', outputs alias static buffers' : ''}): ${this.stats.disabled ? `off: ${this.stats.disabled}` : graphs}`;
  }

  /**
   * The signature of a call: the arguments' dtypes, shapes and strides. Lifted inputs are left out
   * (kiln.compile's guards pin their metadata, and their addresses are checked at replay): a model
   * has hundreds, and this runs on every call.
   */
  private key(inputs: readonly Tensor[]): string {
    let k = '';
    inputs.forEach((t, i) => {
      if (this.isArg[i]) k += `${t.dtype}[${t.shape.join(',')}|${t.strides.join(',')}]`;
    });
    return k;
  }

  /** Compiles every kernel this signature needs, in parallel in the compile pool. */
  private prepare(key: string, inputs: readonly Tensor[]): void {
    if (this.prepared.has(key)) return;
    this.prepared.add(key);
    // prepare() is async only for asynchronous launchers; with this one its work is all synchronous.
    // A failure resurfaces (with its message) in the run that follows.
    this.program.prepare(inputs).catch(() => undefined);
    this.launcher.flush();
  }

  run(inputs: readonly Tensor[]): unknown {
    if (this.pieces) return this.pieces.use ? this.pieces.program.run(inputs) : this.plain(inputs);
    const last = this.last;
    if (last !== undefined && this.stats.disabled === null && sameCall(last.c, last.args, inputs)) {
      return last.c.useGraph ? this.replay(last.c, inputs, !this.aliasOutputs) : this.plain(inputs);
    }
    const key = this.key(inputs);
    this.prepare(key, inputs);
    // A cpu tensor among the inputs (a 0-dim scalar) is read by the host at launch: nothing to capture.
    if (this.stats.disabled !== null || inputs.some((t) => t.device.type !== 'cuda')) return this.plain(inputs);
    // The first graph of a signature reads the arguments where they are (no static copies); a
    // replay is valid whenever every input still lives at the captured address, which is the
    // common case of a caller passing the same buffers each step. Calls with other addresses use
    // a second graph that copies the arguments into static buffers.
    const direct = this.graphs.get(`${key}#direct`);
    if (direct && this.allInPlace(direct, inputs)) {
      this.last = { c: direct, args: inputs.map((t, i) => (this.isArg[i] ? argMeta(t) : null)) };
      return direct.useGraph ? this.replay(direct, inputs, !this.aliasOutputs) : this.plain(inputs);
    }
    const slot = direct ? key : `${key}#direct`;
    let c = this.graphs.get(slot);
    if (c && !this.liftedInPlace(c, inputs)) {
      this.release(c);
      this.graphs.delete(slot);
      c = undefined;
    }
    if (!c) {
      if (this.graphs.size >= MAX_GRAPHS) return this.plain(inputs);
      // A program whose whole-call capture failed in an earlier process (a host-sync op) goes
      // straight to its pieces: the failed attempt costs a full run and a capture.
      const knownFailure = this.split ? this.store()?.loadCaptureFailure() : undefined;
      try {
        if (knownFailure !== undefined) throw new GraphCaptureError(`cuda graph: the call cannot be captured (stored from an earlier process): ${knownFailure}`, knownFailure);
        c = this.capture(inputs, slot !== key);
      } catch (e) {
        if (!(e instanceof GraphCaptureError)) throw e;
        this.stats.disabled = knownFailure === undefined ? e.reason : `${e.reason} (stored by an earlier process: not captured again)`;
        const failedOp = knownFailure === undefined ? this.failedOp : this.store()?.loadCaptureFailureOp();
        if (failedOp !== undefined) this.stats.disabled += ` (at ${failedOp})`;
        const piecewise = this.split?.(failedOp) ?? null;
        if (piecewise) {
          if (knownFailure === undefined) this.store()?.storeCaptureFailure(e.reason, failedOp);
          this.pieces = { program: piecewise, use: true };
          if (this.policy === 'measure') this.pieces.use = this.decidePieces(piecewise, inputs, key);
          return this.run(inputs);
        }
        if (!warned.has(e.reason)) {
          warned.add(e.reason);
          emitWarning(`kiln.compile: CUDA graphs are off for this program: ${e.message}; it runs kernel by kernel`, { type: 'KilnCompileWarning', code: 'KILN_CUDA_GRAPH_FALLBACK' });
        }
        return this.plain(inputs);
      }
      this.graphs.set(slot, c);
      if (this.policy === 'measure') c.useGraph = this.decide(c, inputs, slot);
    }
    if (!c.useGraph) return this.plain(inputs);
    return this.replay(c, inputs, !this.aliasOutputs);
  }

  /** Every input (arguments too) at the address the graph reads. */
  private allInPlace(c: Captured, inputs: readonly Tensor[]): boolean {
    return inputs.every((t, i) => addressOf(t) === c.addresses[i]);
  }

  private plain(inputs: readonly Tensor[]): unknown {
    this.stats.plainRuns++;
    return this.program.run(inputs);
  }

  private liftedInPlace(c: Captured, inputs: readonly Tensor[]): boolean {
    return inputs.every((t, i) => this.isArg[i] || addressOf(t) === c.addresses[i]);
  }

  /** Captures one call; `direct`: read every input in place (no static argument buffers). */
  private capture(inputs: readonly Tensor[], direct: boolean): Captured {
    const index = inputs[0]?.device.index ?? this.launcher.deviceIndex;
    const stream = poolStream(index);
    const alloc = this.acc.allocator(index);
    alloc.pinStream(stream);
    const statics: (Tensor | null)[] = [];
    const spans: number[] = [];
    let output: unknown;
    let exec: CudaGraphExec;
    try {
      const graphInputs = withDefaultStream(this.acc, stream, () =>
        inputs.map((t, i) => {
          spans.push(storageSpan(t.shape, t.strides) * itemSize(t.dtype));
          if (direct || !this.isArg[i]) {
            statics.push(null);
            return t;
          }
          const s = keep(Tensor.empty(t.shape, t.dtype, t.device, t.strides));
          statics.push(s);
          this.copyInto(s, t, spans[i]!, stream);
          return s;
        }),
      );
      // Warm-up in the private pool: everything lazy happens here, and the free lists fill.
      // scope() also disposes the views the program made for extern calls, so every block goes back.
      withDefaultStream(this.acc, stream, () => scope(() => void this.program.run(graphInputs)));
      stream.synchronize();
      const reserved = alloc.stats().reservedBytes;
      // Which step a failed capture stopped at: the one after the last step enqueued.
      let lastStep = -1;
      const hook = this.program.onStep;
      this.program.onStep = (i, label) => {
        lastStep = i;
        hook?.(i, label);
      };
      try {
        exec = captureOn(this.acc, stream, () => {
          output = scope(() => this.program.run(graphInputs));
        });
      } catch (e) {
        const s = this.program.sched.steps[lastStep + 1];
        this.failedOp = e instanceof GraphCaptureError && s && s.kind !== 'kernel' ? s.node.op : undefined;
        throw e;
      } finally {
        this.program.onStep = hook;
      }
      this.stats.allocationsInCapture += alloc.stats().reservedBytes - reserved;
    } catch (e) {
      for (const s of statics) s?.dispose();
      alloc.pinStream(stream, false);
      throw e;
    }
    for (const t of tensorsOf(output)) keep(t);
    this.stats.captures++;
    this.stats.lastNodeCount = exec.nodeCount;
    const addresses = inputs.map((t, i) => addressOf(statics[i] ?? t));
    return { exec, stream, statics, addresses, spans, output, useGraph: true, lent: [] };
  }

  private copyInto(dst: Tensor, src: Tensor, bytes: number, stream: CudaStream): void {
    this.acc.copyDeviceToDevice(dst.storage.buffer, dst.offset * itemSize(dst.dtype), src.storage.buffer, src.offset * itemSize(src.dtype), bytes, stream);
  }

  private replay(c: Captured, inputs: readonly Tensor[], lendOutputs: boolean): unknown {
    const d = this.acc.defaultStream(c.stream.deviceIndex);
    if (lendOutputs) this.detachLent(c, d);
    inputs.forEach((t, i) => {
      const s = c.statics[i];
      if (s && addressOf(t) !== c.addresses[i]) {
        this.copyInto(s, t, c.spans[i]!, d);
        this.stats.inputCopies++;
      }
    });
    c.exec.launch(d);
    this.stats.replays++;
    if (!lendOutputs) {
      // New tensor objects over the static storages: disposing them drops only their own reference.
      return mapTensors(c.output, (t) => new Tensor(t.storage, t.dtype, t.shape, t.strides, t.offset));
    }
    // One lent storage per static storage, so views of one output keep sharing memory.
    const byStatic = new Map<Storage, Storage>();
    return mapTensors(c.output, (t) => {
      let s = byStatic.get(t.storage);
      if (!s) {
        s = Storage.borrow(t.device, t.storage.buffer);
        byStatic.set(t.storage, s);
        c.lent.push(s);
      }
      return new Tensor(s, t.dtype, t.shape, t.strides, t.offset);
    });
  }

  /** Gives every result of earlier replays that is still alive a copy of its own, in stream order. */
  private detachLent(c: Captured, d: CudaStream): void {
    for (const s of c.lent) {
      if (s.isFreed || !s.isLent) continue;
      const src = s.buffer;
      s.detach((dst) => this.acc.copyDeviceToDevice(dst, 0, src, 0, src.nbytes, d));
      this.stats.detachCopies++;
    }
    c.lent.length = 0;
  }

  /**
   * Mode 'default': times plain runs against replays (with their input copies; results lent),
   * unless an earlier process stored the decision for this program and call signature (`slot`).
   */
  private decide(c: Captured, inputs: readonly Tensor[], slot: string): boolean {
    return this.decideStored(slot, () => this.faster(c.stream.deviceIndex, inputs, () => this.replay(c, inputs, true)));
  }

  /** Mode 'default' with a call captured in pieces: the pieces against launching everything. */
  private decidePieces(p: CompiledProgram, inputs: readonly Tensor[], key: string): boolean {
    return this.decideStored(`pieces|${key}`, () => this.faster(inputs[0]?.device.index ?? this.launcher.deviceIndex, inputs, () => p.run(inputs)));
  }

  /** A stored decision for `callKey`, else `measure()` (which sets lastDecision), stored. */
  private decideStored(callKey: string, measure: () => boolean): boolean {
    const stored = this.store()?.load(callKey);
    if (stored) {
      this.stats.lastDecision = { ...stored };
      this.stats.decisionsLoaded++;
      return stored.graphMs < stored.plainMs;
    }
    const useGraph = measure();
    if (this.stats.lastDecision) this.store()?.store(callKey, this.stats.lastDecision);
    return useGraph;
  }

  /** The decision store, made at first use (it hashes the program's key). */
  private store(): DecisionStore | null {
    if (this.decisions === undefined) this.decisions = this.decisionStore?.() ?? null;
    return this.decisions;
  }

  /**
   * Whether `graphRun` takes less device time per call than a plain run (records both, the best
   * of each). Graph and plain runs alternate, so clocks still ramping up after compilation (the
   * GPU idles at a low clock) favour neither; plain runs stop once two of them took more than
   * twice the graph's best: a large model's plain runs are host-bound and cost tens of ms each.
   */
  private faster(index: number, inputs: readonly Tensor[], graphRun: () => unknown): boolean {
    const d = this.acc.defaultStream(index);
    const start = new CudaEvent(index, true);
    const end = new CudaEvent(index, true);
    const once = (f: () => unknown): number => {
      start.record(d);
      for (const t of tensorsOf(f())) if (!inputs.includes(t)) t.dispose();
      end.record(d);
      end.synchronize();
      return start.elapsedTime(end);
    };
    const plainRun = (): unknown => this.program.run(inputs);
    once(graphRun); // untimed: first-run work
    once(plainRun);
    let graphMs = Infinity;
    let plainMs = Infinity;
    let slowPlain = 0;
    for (let i = 0; i < DECIDE_REPS; i++) {
      graphMs = Math.min(graphMs, once(graphRun));
      if (slowPlain >= 2) continue;
      const p = once(plainRun);
      plainMs = Math.min(plainMs, p);
      if (p > 2 * graphMs) slowPlain++;
    }
    this.stats.lastDecision = { plainMs, graphMs };
    return graphMs < plainMs;
  }

  private release(c: Captured): void {
    if (this.last?.c === c) this.last = undefined;
    c.exec.destroy();
    for (const s of c.statics) s?.dispose();
    this.detachLent(c, this.acc.defaultStream(c.stream.deviceIndex));
    for (const t of tensorsOf(c.output)) t.dispose();
    this.acc.allocator(c.stream.deviceIndex).pinStream(c.stream, false);
  }
}
