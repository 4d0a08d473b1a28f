/**
 * The segment recorder: how a call whose guards broke the graph still runs compiled pieces
 * (partial graphs, as Dynamo splits a function around a break).
 *
 * The user's function runs with a dispatch mode that records every op into the current segment
 * (a Tracer) and returns lazy tensors (placeholders with metadata, like fakes) instead of
 * computing. When the function needs real data — a host read of a lazy tensor (item, toArray,
 * printing, detach), or an op that cannot be recorded (data dependent, grad recording, an
 * in-place write to a real tensor) — the segment is flushed: its graph, whose inputs are the real
 * tensors it read and whose outputs are every lazy tensor it produced that is still alive, is
 * handed to `runSegment` (compiled or taken from the piece cache, and run), every lazy tensor is
 * pointed at its real result (setData_, so every reference the user holds sees the data), the
 * op that needed data runs eagerly, and recording goes on in a new segment. The caller flushes
 * the last segment when the function returns.
 *
 * Known limit: values that alias each other inside a segment (a view and its base) come back as
 * separate results, so an in-place write to one after the flush does not show in the other.
 */
import { isGradEnabled } from '../autograd/grad-mode.js';
import { dispatch, type DispatchMode } from '../ops/dispatch.js';
import type { Op } from '../ops/registry.js';
import type { MetaResult, OutMeta } from '../ops/schema.js';
import { Tensor } from '../tensor/tensor.js';
import { fakeStorage, Tracer } from './capture.js';
import type { Graph, ValueId } from './ir.js';

/** Compiles (or finds) and runs one segment's graph on its inputs; one tensor per output. */
export type SegmentRunner = (graph: Graph, inputs: readonly Tensor[]) => readonly Tensor[];

/** A tensor whose value a pending segment will compute; a plain tensor once its segment ran. */
export class LazyTensor extends Tensor {
  constructor(
    public valueId: ValueId,
    meta: OutMeta,
    /** The segment that computes it; undefined once bound to real data. */
    public segment: Segment | undefined,
  ) {
    super(fakeStorage(meta.device), meta.dtype, meta.shape, meta.strides, meta.offset ?? 0);
  }

  override toFlatArray(): number[] {
    this.segment?.recorder.flush();
    return super.toFlatArray();
  }

  override detach(): Tensor {
    this.segment?.recorder.flush();
    return super.detach();
  }
}

/** One segment: a Tracer whose placeholders are lazy tensors; real tensors become its inputs. */
class Segment extends Tracer {
  readonly lazies: LazyTensor[] = [];

  constructor(readonly recorder: SegmentRecorder) {
    super();
  }

  /** Lazy tensors of this segment are its values; everything else (bound lazies too) is an input. */
  protected override placeholderId(t: Tensor): ValueId | undefined {
    return t instanceof LazyTensor && t.segment === this ? t.valueId : undefined;
  }

  protected override placeholder(id: ValueId, meta: OutMeta): LazyTensor {
    const l = new LazyTensor(id, meta, this);
    this.lazies.push(l);
    return l;
  }

  isPending(t: Tensor): boolean {
    return this.placeholderId(t) !== undefined;
  }
}

function tensorsIn(args: readonly unknown[]): Tensor[] {
  return args.flatMap((a) => (a instanceof Tensor ? [a] : Array.isArray(a) ? (a as unknown[]).filter((e): e is Tensor => e instanceof Tensor) : []));
}

export class SegmentRecorder implements DispatchMode {
  private seg = new Segment(this);
  /** >0 while running a segment or an eager op: dispatch then runs normally. */
  private suspended = 0;
  /** Segments flushed that held at least one op. */
  flushes = 0;

  constructor(private readonly runSegment: SegmentRunner) {}

  handle(op: Op<readonly unknown[], MetaResult>, args: readonly unknown[]): unknown {
    if (this.suspended > 0) return undefined;
    if (!this.recordable(op, args)) {
      this.flush();
      // Re-entering dispatch with the recorder suspended runs the op (and any op its kernel
      // dispatches) for real, with autograd's hooks.
      this.suspended++;
      try {
        return dispatch(op, ...(args as never[]));
      } finally {
        this.suspended--;
      }
    }
    return this.seg.handle(op, args);
  }

  /** Whether the op can join the segment: it needs no data, records no grad, writes no real tensor. */
  private recordable(op: Op<readonly unknown[], MetaResult>, args: readonly unknown[]): boolean {
    if (op.tags?.includes('dataDependent')) return false;
    const tensors = tensorsIn(args);
    // Autograd records only eager calls; a segment's program would cut the gradient.
    if (isGradEnabled() && tensors.some((t) => t.requiresGrad)) return false;
    // A write to a real tensor must happen after the pending reads of it, and for real.
    for (const i of op.mutatedArgs) {
      const a = args[i];
      if (a instanceof Tensor && !this.seg.isPending(a)) return false;
    }
    return true;
  }

  /** Runs the pending segment (if it recorded anything) and binds its lazy tensors to the results. */
  flush(): void {
    const seg = this.seg;
    this.seg = new Segment(this);
    const live = seg.lazies.filter((l) => l.segment === seg && !l.isDisposed);
    if (live.length === 0) return;
    const ids = [...new Set(live.map((l) => l.valueId))];
    const graph: Graph = {
      inputs: seg.inputs,
      nodes: seg.nodes,
      values: seg.values,
      output: { kind: 'list', items: ids.map((id) => ({ kind: 'tensor', id })) },
    };
    const inputs = seg.inputs.map((i) => {
      if (i.source.kind !== 'lifted') throw new Error('kiln.compile: a segment input that is not a real tensor');
      return i.source.tensor;
    });
    this.suspended++;
    let outs: readonly Tensor[];
    try {
      outs = this.runSegment(graph, inputs);
    } finally {
      this.suspended--;
    }
    this.flushes++;
    const byId = new Map(ids.map((id, k) => [id, outs[k]!]));
    for (const l of live) {
      l.setData_(byId.get(l.valueId)!);
      l.segment = undefined;
    }
    // The lazies now hold the results' storage; the results themselves are dropped, unless the
    // program handed an input straight back (the user's tensor).
    for (const o of new Set(outs)) if (!inputs.includes(o)) o.dispose();
  }
}
