/**
 * Capture: runs the user's function once on fake tensors (metadata only) with a dispatch mode that
 * records every op call into the graph IR instead of running kernels. Real tensors the function
 * reaches (module parameters, closed-over constants) become lifted graph inputs. Reading a fake
 * tensor's values (item, toArray, printing) cannot be traced: it raises a GraphBreak that names
 * the user code that asked; so does a kernel that reaches for a fake's memory directly
 * (cpuArrayBuffer), instead of silently computing on the empty stand-in storage.
 *
 * Hooks (TraceHooks) let the compiler's joint forward+backward capture (joint.ts) watch every
 * recorded op and keep tracing after the function returns, under the same tracer.
 */
import { popDispatchMode, pushDispatchMode, type DispatchMode } from '../ops/dispatch.js';
import type { Op } from '../ops/registry.js';
import type { MetaResult, OutMeta } from '../ops/schema.js';
import type { Device } from '../runtime/device.js';
import { Storage } from '../tensor/storage.js';
import { Parameter } from '../nn/module.js';
import { nextTensorId, Tensor } from '../tensor/tensor.js';
import { keep } from '../tensor/scope.js';
import type { Graph, GraphInput, InputSource, IRArg, IRNode, OutputTree, ValueId, ValueInfo } from './ir.js';

/** Thrown when tracing needs a tensor's data (data-dependent control flow). */
export class GraphBreak extends Error {
  constructor(
    readonly reason: string,
    readonly userFrame: string | undefined,
  ) {
    super(`graph break: ${reason}${userFrame ? ` at ${userFrame}` : ''}`);
    this.name = 'GraphBreak';
  }
}

/** The first stack frame outside kiln's own sources: where the user's code asked for data. */
function userFrame(): string | undefined {
  const here = new URL('..', import.meta.url).pathname;
  const lines = (new Error().stack ?? '').split('\n').slice(1);
  for (const l of lines) {
    const m = /\((.*):(\d+):(\d+)\)$/.exec(l) ?? /at (.*):(\d+):(\d+)$/.exec(l);
    if (!m) continue;
    const file = m[1]!.replace(/^file:\/\//, '');
    if (file.startsWith(here) || file.startsWith('node:')) continue;
    return `${file}:${m[2]}:${m[3]}`;
  }
  return undefined;
}

const fakeStorages = new Map<string, Storage>();
/** The shared stand-in storage of placeholders on `device` (fakes here, lazy tensors in segments.ts). */
export function fakeStorage(device: Device): Storage {
  const key = device.toString();
  let s = fakeStorages.get(key);
  if (!s) {
    // Fakes never touch memory; one empty host allocation stands in for every fake's storage.
    s = Storage.allocate(device, 0);
    // A permanent holder: fakes may be disposed (by scopes, by user code) without ever freeing it.
    s.retain();
    // Code outside the dispatcher (a kernel called directly, e.g. by a backward formula) must not
    // read or write the stand-in memory: that would compute garbage silently.
    Object.defineProperty(s, 'cpuArrayBuffer', {
      value: (): never => {
        throw new GraphBreak('a kernel outside the dispatcher accessed the memory of a traced tensor', userFrame());
      },
    });
    fakeStorages.set(key, s);
  }
  return s;
}

/** A tensor with metadata only, standing for graph value `valueId` during tracing. */
export class FakeTensor extends Tensor {
  constructor(
    public valueId: ValueId,
    meta: OutMeta,
  ) {
    super(fakeStorage(meta.device), meta.dtype, meta.shape, meta.strides, meta.offset ?? 0);
    // Fakes hold no memory; a kiln.scope around a compiled call must not count or dispose them.
    keep(this);
  }

  override toFlatArray(): number[] {
    throw new GraphBreak(`reading the values of a traced tensor [${this.shape.join(', ')}] (item/toArray/toString)`, userFrame());
  }

  // detach() would build a plain Tensor over the stand-in storage, which the tracer would then lift
  // as a constant with no data; and in a joint trace it must cut the gradient. Not traced yet.
  override detach(): Tensor {
    throw new GraphBreak(`detach() of a traced tensor [${this.shape.join(', ')}]`, userFrame());
  }
}

/** What a hook may do while tracing: map tensors to values, add inputs, read value metadata. */
export interface TraceContext {
  /** The value a tensor stands for (a real tensor is lifted as a graph input on first use). */
  valueOf(t: Tensor): ValueId;
  /** A fake for an existing value (a snapshot that later in-place ops on other fakes do not move). */
  fakeOf(id: ValueId): FakeTensor;
  /** A new graph input with the given metadata and source. */
  addInput(meta: OutMeta, source: InputSource): FakeTensor;
  info(id: ValueId): ValueInfo;
  /** Graph inputs so far (in order) and nodes recorded so far. */
  readonly inputs: readonly GraphInput[];
  readonly nodes: readonly IRNode[];
}

export interface TraceHooks {
  /** After each recorded op: the op, its arguments as IR (value ids before any in-place update), and the result fakes. */
  onOp?(op: Op<readonly unknown[], MetaResult>, irArgs: readonly IRArg[], results: readonly FakeTensor[], ctx: TraceContext): void;
  /** Runs after the function returns, still under the tracer; its return value becomes the graph output. */
  finish?(result: unknown, ctx: TraceContext): unknown;
}

export interface Trace {
  graph: Graph;
  /** Nodes recorded, for diagnostics. */
  opCount: number;
  /** Tensors with this id or above were created during the trace (not closed over). */
  startTensorId: number;
  /**
   * Where user code first read each lifted tensor that existed before the trace and is not a
   * Parameter (candidates for the captured-constant warning; undefined: no user frame).
   */
  liftedAt: ReadonlyMap<Tensor, string | undefined>;
}

/**
 * Records op calls into a graph. Exported for the segment recorder (segments.ts), which overrides
 * the two placeholder hooks so that its lazy tensors, not fakes, stand for graph values.
 */
export class Tracer implements DispatchMode, TraceContext {
  constructor(private readonly hooks: TraceHooks = {}) {}

  readonly startTensorId = nextTensorId();
  readonly liftedAt = new Map<Tensor, string | undefined>();

  private nextValue = 0;
  private nextNode = 0;
  readonly values = new Map<ValueId, ValueInfo>();
  readonly nodes: IRNode[] = [];
  readonly inputs: GraphInput[] = [];
  private readonly lifted = new Map<Tensor, ValueId>();

  newValue(meta: OutMeta, aliasOf?: ValueId): ValueId {
    const id = this.nextValue++;
    this.values.set(id, { id, shape: [...meta.shape], strides: [...meta.strides], dtype: meta.dtype, device: meta.device, offset: meta.offset ?? 0, aliasOf });
    return id;
  }

  argInput(t: Tensor, path: (string | number)[]): FakeTensor {
    const id = this.newValue(t);
    this.inputs.push({ id, source: { kind: 'arg', path } });
    const fake = new FakeTensor(id, { shape: t.shape, strides: t.strides, dtype: t.dtype, device: t.device, offset: 0 });
    // Code that branches on x.requiresGrad sees what it would see eagerly.
    fake.requiresGrad = t.requiresGrad;
    return fake;
  }

  addInput(meta: OutMeta, source: InputSource): FakeTensor {
    const id = this.newValue(meta);
    this.inputs.push({ id, source });
    return new FakeTensor(id, { ...meta, offset: meta.offset ?? 0 });
  }

  fakeOf(id: ValueId): FakeTensor {
    return new FakeTensor(id, this.info(id));
  }

  info(id: ValueId): ValueInfo {
    const v = this.values.get(id);
    if (!v) throw new Error(`compile: unknown value %${id}`);
    return v;
  }

  /** The value a placeholder stands for; undefined for a real tensor (lifted as an input). */
  protected placeholderId(t: Tensor): ValueId | undefined {
    return t instanceof FakeTensor ? t.valueId : undefined;
  }

  /** The placeholder a new op result is represented by. */
  protected placeholder(id: ValueId, meta: OutMeta): Tensor & { valueId: ValueId } {
    return new FakeTensor(id, meta);
  }

  valueOf(t: Tensor): ValueId {
    const ph = this.placeholderId(t);
    if (ph !== undefined) return ph;
    let id = this.lifted.get(t);
    if (id === undefined) {
      t.assertAlive('compile');
      id = this.newValue(t);
      this.lifted.set(t, id);
      this.inputs.push({ id, source: { kind: 'lifted', tensor: t } });
      // The stack is read only for tensors that may be captured constants (rarely more than a few).
      if (t.id < this.startTensorId && !(t instanceof Parameter)) this.liftedAt.set(t, userFrame());
    }
    return id;
  }

  toIR(a: unknown): IRArg {
    if (a instanceof Tensor) return { kind: 'value', id: this.valueOf(a) };
    if (Array.isArray(a)) return { kind: 'list', items: a.map((x) => this.toIR(x)) };
    return { kind: 'const', value: a };
  }

  handle(op: Op<readonly unknown[], MetaResult>, args: readonly unknown[]): unknown {
    if (op.tags?.includes('dataDependent')) throw new GraphBreak(`op '${op.name}' is data dependent (eager only)`, userFrame());
    const irArgs = args.map((a) => this.toIR(a));
    const meta = op.meta(...(args as never[]));
    const metas: readonly OutMeta[] = Array.isArray(meta) ? meta : [meta as OutMeta];
    const results: (Tensor & { valueId: ValueId })[] = [];
    const outputs: ValueId[] = [];
    metas.forEach((m, k) => {
      const spec = op.outputs[Math.min(k, op.outputs.length - 1)];
      const aliasArg = spec?.aliasOf === undefined ? -1 : op.args.findIndex((a) => a.name === spec.aliasOf);
      const src = aliasArg >= 0 ? args[aliasArg] : undefined;
      const aliasOf = src instanceof Tensor ? this.valueOf(src) : undefined;
      const id = this.newValue(m, aliasOf);
      outputs.push(id);
      const mutatesSrc = aliasArg >= 0 && op.args[aliasArg]!.mutated === true && src instanceof Tensor && this.placeholderId(src) !== undefined;
      if (mutatesSrc) {
        // In-place: the same tensor object now stands for the post-mutation value.
        const ph = src as Tensor & { valueId: ValueId };
        ph.valueId = id;
        results.push(ph);
      } else {
        results.push(this.placeholder(id, m));
      }
    });
    this.nodes.push({ id: this.nextNode++, op: op.name, args: irArgs, outputs });
    this.hooks.onOp?.(op, irArgs, results as FakeTensor[], this);
    return Array.isArray(meta) ? results : results[0];
  }

  outputTree(x: unknown, path = 'the result'): OutputTree {
    if (x instanceof Tensor) return { kind: 'tensor', id: this.valueOf(x) };
    if (Array.isArray(x)) return { kind: 'list', items: x.map((e, i) => this.outputTree(e, `${path}[${i}]`)) };
    if (x !== null && typeof x === 'object' && Object.getPrototypeOf(x) === Object.prototype) {
      return { kind: 'object', entries: Object.entries(x).map(([k, v]) => [k, this.outputTree(v, `${path}.${k}`)] as const) };
    }
    checkReturnable(x, path);
    return { kind: 'const', value: x };
  }
}

const RETURNABLE = 'a compiled function may return tensors, numbers, strings, booleans, null or undefined, and arrays and plain objects of these';

/**
 * A returned value the program would hand back as a constant: a Map, Set, Promise or class
 * instance holding traced tensors would give the caller the trace's placeholders (fake tensors
 * with no data), so it is an error at trace time instead. Such objects without tensors are
 * constants like any other (the same object every call).
 */
function checkReturnable(x: unknown, path: string): void {
  if (x === null || typeof x !== 'object') return;
  if (x instanceof Promise) {
    // The async rest of the function runs after tracing ended; its failure must not go unhandled.
    x.catch(() => {});
    throw new TypeError(`kiln.compile: ${path} is a Promise (an async function?): kiln.compile traces synchronous code only; await outside the compiled function. ${RETURNABLE}`);
  }
  if (holdsFake(x, new Set(), 0)) {
    const what = x instanceof Map ? 'a Map' : x instanceof Set ? 'a Set' : `an instance of ${x.constructor?.name ?? 'a class'}`;
    throw new TypeError(`kiln.compile: ${path} is ${what} holding traced tensors, which would come back as placeholders without data. ${RETURNABLE}; return e.g. Object.fromEntries(map) or the instance's tensors instead.`);
  }
}

function holdsFake(x: unknown, seen: Set<object>, depth: number): boolean {
  if (x instanceof FakeTensor) return true;
  if (x === null || typeof x !== 'object' || seen.has(x) || depth > 8 || x instanceof Tensor) return false;
  seen.add(x);
  const items = x instanceof Map ? [...x.keys(), ...x.values()] : x instanceof Set ? [...x] : Object.values(x);
  return items.some((v) => holdsFake(v, seen, depth + 1));
}

/** Replaces every tensor in a nested argument structure with a fake, recording its path. */
function fakeArgs(tracer: Tracer, x: unknown, path: (string | number)[]): unknown {
  if (x instanceof Tensor) return tracer.argInput(x, path);
  if (Array.isArray(x)) return x.map((e, i) => fakeArgs(tracer, e, [...path, i]));
  if (x !== null && typeof x === 'object' && Object.getPrototypeOf(x) === Object.prototype) {
    return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, fakeArgs(tracer, v, [...path, k])]));
  }
  return x; // numbers, strings, modules (their tensors are lifted when used)
}

/** Traces `fn(...args)` into a graph. Throws GraphBreak on data-dependent code. */
export function trace(fn: (...args: never[]) => unknown, args: readonly unknown[], hooks: TraceHooks = {}): Trace {
  const tracer = new Tracer(hooks);
  const fakes = args.map((a, i) => fakeArgs(tracer, a, [i]));
  pushDispatchMode(tracer);
  let result: unknown;
  try {
    result = fn(...(fakes as never[]));
    if (hooks.finish) result = hooks.finish(result, tracer);
  } finally {
    popDispatchMode(tracer);
  }
  const output = tracer.outputTree(result);
  return {
    graph: { inputs: tracer.inputs, nodes: tracer.nodes, values: tracer.values, output },
    opCount: tracer.nodes.length,
    startTensorId: tracer.startTensorId,
    liftedAt: tracer.liftedAt,
  };
}
