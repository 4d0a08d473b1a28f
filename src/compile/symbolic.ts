/**
 * Symbolic sizes: one program for every value of a dynamic dim.
 *
 * A traced graph records sizes as numbers: `view(x, [B, T, H, D])` keeps the T it was traced with,
 * so two lengths give two graphs (different constants, different signatures) and two programs,
 * even after automatic dynamic made T's dim symbolic in the guards. PyTorch's Dynamo avoids this
 * by tracing with SymInts: `x.shape[1]` is a symbol s0, arithmetic on it builds expressions
 * (s0 * H), and ops record those expressions instead of numbers. JavaScript numbers carry no
 * provenance (no operator overloading), so kiln finds the expressions the other way round: it
 * traces the function again at a *probe* size (each symbolic dim one larger, one probe per dim,
 * metadata only), runs the same passes, and compares the optimised graphs. An integer constant
 * that changes between the traces becomes a symbolic size, `c + sum(k * s)` (IR 'sym' argument,
 * ir.ts), fitted to the traced and probed values; everything else must be identical (ops, value
 * wiring, dtypes, layout classes, lifted inputs, the other constants), or nothing is generalised
 * and the graph keeps its numbers (one program per size, as before).
 *
 * Soundness does not rest on the fit. A later call at a new size is traced as before (each
 * concrete shape of a symbolic guard entry has its own trace); its optimised graph reuses the
 * generalised one only if it *is* that graph at these sizes: the generalised graph with every
 * symbolic size evaluated at the new inputs' sizes has exactly the new trace's signature
 * (`matchGeneralized`). A function that branches on T, or whose sizes are not affine in T (a
 * product of two dynamic dims, T // 2 when the probe hit another parity), gets a new trace that
 * does not match and a program of its own. Sizes 0 and 1 never become symbolic (guards.ts), as in
 * torch.compile, which specialises them: a generalised program assumes every symbolic dim >= 2,
 * and the guards send 0 and 1 to entries of their own.
 *
 * Only backends whose programs evaluate symbolic sizes at run time take such graphs
 * (`CompileBackend.symbolicSizes`: the eager interpreter, the cpu target); the cuda and webgpu
 * targets keep one program per size. The probes run the function's JavaScript again (like verify
 * mode's traces): side effects in it run once more per generalisation.
 */
import { contiguousStrides, isContiguousStrides } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';
import { FakeTensor } from './capture.js';
import { evalSym, type Graph, type IRArg, type IRNode, type SymExpr, type ValueId } from './ir.js';
import { graphSignature } from './passes/signature.js';
import { constKey } from './passes/util.js';

/** One symbolic dim of a graph: dim `dim` of graph input number `input`. */
export interface SymbolDim {
  readonly input: number;
  readonly dim: number;
}

/** Which dims of graph input i are symbolic (its guard's '?' dims). */
export type SymbolicInputDims = (inputIndex: number) => ReadonlySet<number>;

/** Probes cost a trace each: functions with more symbolic dims than this are not generalised. */
export const MAX_SYMBOLS = 4;

/** The symbolic dims of a graph's argument inputs, in input order. */
export function symbolsOf(graph: Graph, dims: SymbolicInputDims): SymbolDim[] {
  return graph.inputs.flatMap((inp, i) => (inp.source.kind === 'arg' ? [...dims(i)].sort((a, b) => a - b).map((dim) => ({ input: i, dim })) : []));
}

/**
 * The call's arguments with the tensor at `path` replaced by a metadata-only stand-in whose dim
 * `dim` has size `size` (contiguous, as the probe needs a layout of the same class); null when
 * that tensor is not contiguous or the path leads nowhere.
 */
export function probeArgs(args: readonly unknown[], path: readonly (string | number)[], dim: number, size: number): unknown[] | null {
  const swap = (x: unknown, rest: readonly (string | number)[]): unknown => {
    if (rest.length === 0) {
      if (!(x instanceof Tensor) || !isContiguousStrides(x.shape, x.strides)) return null;
      const shape = x.shape.map((s, d) => (d === dim ? size : s));
      const fake = new FakeTensor(-1, { shape, strides: contiguousStrides(shape), dtype: x.dtype, device: x.device, offset: 0 });
      fake.requiresGrad = x.requiresGrad;
      return fake;
    }
    const [k, ...more] = rest;
    if (Array.isArray(x) && typeof k === 'number') {
      const inner = swap(x[k], more);
      return inner === null ? null : x.map((e, i) => (i === k ? inner : e));
    }
    if (x !== null && typeof x === 'object' && Object.getPrototypeOf(x) === Object.prototype && typeof k === 'string') {
      const inner = swap((x as Record<string, unknown>)[k], more);
      return inner === null ? null : { ...(x as Record<string, unknown>), [k]: inner };
    }
    return null;
  };
  const [i, ...rest] = path;
  if (typeof i !== 'number' || i >= args.length) return null;
  const inner = swap(args[i], rest);
  return inner === null ? null : args.map((a, j) => (j === i ? inner : a));
}

const inputIndex = (g: Graph): Map<ValueId, number> => new Map(g.inputs.map((inp, i) => [inp.id, i]));

/** `g` with every symbolic size replaced by its value for the given input shapes (by input index). */
export function instantiate(g: Graph, shapeOf: (inputIndex: number) => readonly number[]): Graph {
  const index = inputIndex(g);
  const at = (e: SymExpr): number => evalSym(e, (id) => shapeOf(index.get(id)!));
  const map = (a: IRArg): IRArg => (a.kind === 'sym' ? { kind: 'const', value: at(a.expr) } : a.kind === 'list' ? { kind: 'list', items: a.items.map(map) } : a);
  return { ...g, nodes: g.nodes.map((n) => ({ ...n, args: n.args.map(map) })) };
}

const inputShapes = (g: Graph) => (i: number): readonly number[] => g.values.get(g.inputs[i]!.id)!.shape;

/**
 * The generalised graph of `base` (traced at the call's sizes), given `probes[j]`, the same
 * function traced with symbolic dim `symbols[j]` one larger (optimised by the same passes): each
 * integer constant that differs becomes a symbolic size fitted to the traces. Null when the traces
 * differ in anything else, or in a constant that is not an integer.
 */
export function generalize(base: Graph, probes: readonly Graph[], symbols: readonly SymbolDim[], dims: SymbolicInputDims): Graph | null {
  if (probes.length !== symbols.length || probes.some((p) => p.nodes.length !== base.nodes.length || p.inputs.length !== base.inputs.length)) return null;
  const ids = symbols.map((s) => base.inputs[s.input]!.id);
  const traced = symbols.map((s) => inputShapes(base)(s.input)[s.dim]!);
  let failed = false;
  const walk = (a: IRArg, others: readonly IRArg[]): IRArg => {
    if (failed) return a;
    if (others.some((o) => o.kind !== a.kind)) {
      failed = true;
      return a;
    }
    if (a.kind === 'list') {
      const lists = others as { kind: 'list'; items: readonly IRArg[] }[];
      if (lists.some((l) => l.items.length !== a.items.length)) {
        failed = true;
        return a;
      }
      return { kind: 'list', items: a.items.map((x, k) => walk(x, lists.map((l) => l.items[k]!))) };
    }
    if (a.kind !== 'const') return a;
    const values = (others as { kind: 'const'; value: unknown }[]).map((o) => o.value);
    const key = constKey(a.value);
    if (values.every((v) => constKey(v) === key)) return a;
    const c0 = a.value;
    if (typeof c0 !== 'number' || !Number.isInteger(c0) || values.some((v) => typeof v !== 'number' || !Number.isInteger(v))) {
      failed = true;
      return a;
    }
    // Probe j moved symbol j by one: the difference is its coefficient.
    let c = c0;
    const terms = (values as number[]).flatMap((v, j) => {
      if (v === c0) return [];
      c -= (v - c0) * traced[j]!;
      return [{ id: ids[j]!, dim: symbols[j]!.dim, k: v - c0 }];
    });
    return { kind: 'sym', expr: { c, terms } };
  };
  const nodes: IRNode[] = base.nodes.map((n, i) => {
    const others = probes.map((p) => p.nodes[i]!);
    if (others.some((o) => o.op !== n.op || o.args.length !== n.args.length)) failed = true;
    if (failed) return n;
    return { ...n, args: n.args.map((a, k) => walk(a, others.map((o) => o.args[k]!))) };
  });
  if (failed) return null;
  const gen: Graph = { ...base, nodes };
  // Everything but the constants now symbolic must be the same in every probe (the signature
  // covers ops, wiring, dtypes, ranks, layout classes, lifted inputs and the output structure).
  for (const p of probes) if (graphSignature(instantiate(gen, inputShapes(p)), dims) !== graphSignature(p, dims)) return null;
  return gen;
}

/**
 * `gen` (a generalised graph) for the inputs of `concrete`, a new trace of the same guard entry,
 * when `concrete` is exactly `gen` at its sizes; else null. The result reads its graph inputs from
 * `concrete` (lifted tensors made by this trace), so it runs `gen`'s program on this call's inputs.
 */
export function matchGeneralized(gen: Graph, concrete: Graph, dims: SymbolicInputDims): Graph | null {
  if (gen.inputs.length !== concrete.inputs.length || gen.nodes.length !== concrete.nodes.length) return null;
  if (graphSignature(instantiate(gen, inputShapes(concrete)), dims) !== graphSignature(concrete, dims)) return null;
  return { ...gen, inputs: gen.inputs.map((inp, i) => ({ id: inp.id, source: concrete.inputs[i]!.source })) };
}

/** Whether a graph holds any symbolic size. */
export function hasSymbolicSizes(g: Graph): boolean {
  const has = (a: IRArg): boolean => a.kind === 'sym' || (a.kind === 'list' && a.items.some(has));
  return g.nodes.some((n) => n.args.some(has));
}
