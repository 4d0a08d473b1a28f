/**
 * Partial graphs: a call whose guard set broke the graph runs the user's function under the
 * segment recorder (segments.ts), and each segment between breaks runs as a compiled piece.
 *
 * Pieces are cached by the structural signature of the segment as recorded (passes/signature.ts:
 * ops, constants, input shapes, dtypes, layouts and devices), so a later call that records the
 * same segment runs the program built the first time without optimising or compiling again.
 * Every input of a segment is a real tensor read at run time (the call's arguments, closure
 * tensors, results of earlier pieces), so the passes that read or rewrite lifted tensors' values
 * (constant folding, conv+BatchNorm folding, horizontal linear fusion, which concatenates
 * weights) are off for pieces: a program must not bake one call's values into the next.
 * A number read on the host (item()) and passed to an op is a constant of the next segment, so
 * each distinct value gets its own piece; the cache keeps the last MAX_PIECES of them.
 */
import { popDispatchMode, pushDispatchMode } from '../ops/dispatch.js';
import type { Tensor } from '../tensor/tensor.js';
import type { CompiledProgram } from './backend.js';
import type { Graph } from './ir.js';
import { graphSignature, runPasses, type PipelineOptions } from './passes/index.js';
import { SegmentRecorder } from './segments.js';

/** What the piece cache needs of its compiled function. */
export interface PieceHost {
  readonly passOptions: PipelineOptions;
  /** The composites the target of a piece renders whole (backend.ts nativeComposites), as for whole graphs. */
  keepComposites?(graph: Graph): ReadonlySet<string> | undefined;
  /** The backend's program for an optimised segment graph (counted as a compile). */
  compile(graph: Graph): CompiledProgram;
  /** A piece ran compiled. */
  onPiece(): void;
}

interface Piece {
  readonly graph: Graph;
  /** For each input of the optimised graph, its index among the recorded segment's inputs. */
  readonly inputIndex: readonly number[];
  readonly program: CompiledProgram;
}

const MAX_PIECES = 64;

type GraphRunner = CompiledProgram & { runGraph?(graph: Graph, inputs: readonly Tensor[]): unknown };

/** The compiled pieces of one compiled function. */
export class PieceCache {
  private readonly pieces = new Map<string, Piece>();

  constructor(private readonly host: PieceHost) {}

  get size(): number {
    return this.pieces.size;
  }

  clear(): void {
    this.pieces.clear();
  }

  /** `fn(...args)` with its segments run as compiled pieces. */
  call(fn: (...args: never[]) => unknown, args: readonly unknown[]): unknown {
    const rec = new SegmentRecorder((g, inputs) => this.run(g, inputs));
    pushDispatchMode(rec);
    try {
      const result = fn(...(args as never[]));
      rec.flush();
      return result;
    } finally {
      popDispatchMode(rec);
    }
  }

  private run(recorded: Graph, inputs: readonly Tensor[]): readonly Tensor[] {
    const key = graphSignature(recorded);
    let p = this.pieces.get(key);
    if (!p) {
      const keep = this.host.keepComposites?.(recorded);
      const { graph } = runPasses(recorded, { ...this.host.passOptions, constantFolding: false, foldConvBn: false, horizontalFusion: false, qkNormRotary: false, qkNormRotaryCache: false, linearSiluMul: false, addRmsNormLinear: false, linearGelu: false, ...(keep ? { keepComposites: keep } : {}) });
      const inputIndex = graph.inputs.map((i) => recorded.inputs.findIndex((r) => r.id === i.id));
      if (inputIndex.includes(-1)) throw new Error('kiln.compile: the passes added an input to a partial-graph piece');
      p = { graph, inputIndex, program: this.host.compile(graph) };
      if (this.pieces.size >= MAX_PIECES) this.pieces.delete(this.pieces.keys().next().value!);
      this.pieces.set(key, p);
    }
    this.host.onPiece();
    const ins = p.inputIndex.map((k) => inputs[k]!);
    const prog = p.program as GraphRunner;
    const out = prog.runGraph ? prog.runGraph(p.graph, ins) : prog.run(ins);
    return out as Tensor[];
  }
}
