/**
 * The eager cuda reductions as one-node programs of the fused-group renderer (kernels/cuda/fused/):
 * a reduce group (a reduction with its pointwise prologue and per-row epilogue, or a row kernel
 * such as softmax) and its layout give the spec, the config (the compiler's default for that layout,
 * configs.ts) and the source (the compiler's prelude and reduce emitter), so an eager reduction is
 * the kernel the compiler would write for the same group. Also a call's group and layout from its
 * tensors' metadata (eagerGroup, eagerLayout) and when strided rows are copied into dense rows
 * first (needsRowCopy). Pure string and shape logic: runs and is tested without a GPU;
 * reduce-run.ts launches it.
 */
import { createHash } from '../../../platform/index.js';
import type { DType } from '../../../tensor/dtype.js';
import { broadcastStrides, rowStrides } from '../../../tensor/layout.js';
import type { Param } from '../fused/args.js';
import { type GroupCtx, groupCtx } from '../fused/body.js';
import { type CudaTarget, configTag, defaultReduceConfig, inapplicable, vectorWidthFor } from '../fused/configs.js';
import { emitReduce, type ReduceConfig } from '../fused/emit-reduce.js';
import type { FusedArg, FusedGroup, FusedNode, FusedValue } from '../fused/group.js';
import { fusedLayout, spanOf } from '../fused/layout.js';
import { prelude } from '../fused/prelude.js';
import { type KernelLayout, type KernelSpec, type OperandLayout, prod, specKey } from '../fused/spec.js';

/** Value ids of an eager reduce group: the reduced input is 0, further inputs 1, 2, ..., the results 100, 101, ... */
export const X = 0;
export const OUT = 100;

/** What the group and layout need of a tensor. */
export interface LaidOut {
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly offset: number;
  readonly dtype: DType;
}

/** One eager reduction: its group's nodes over the input x (and further inputs), and where its results go. */
export interface ReduceCall<T extends LaidOut = LaidOut> {
  /** The reduced input, value X. */
  readonly x: T;
  /** Reduced dims of x (any order; empty for a 0-d input). */
  readonly dims: readonly number[];
  /** Results (values OUT, OUT + 1, ...): the tensor and whether it holds one value per row. */
  readonly outs: readonly { readonly t: T; readonly row: boolean }[];
  readonly nodes: readonly FusedNode[];
  readonly values: ReadonlyMap<number, FusedValue>;
  /** Further inputs (values X + 1, X + 2, ...), broadcast to x's shape: a norm's weight and bias. */
  readonly extra?: readonly T[];
  /** Host scalars s0.. that expression nodes read, in this compute type. */
  readonly params?: { readonly ct: 'float' | 'double'; readonly values: readonly number[] };
  /** Keep the reduced dims in logical order (an arg reduction's index is a result). */
  readonly keepRowOrder?: boolean;
}

/** Values computed once per row: the reductions' outputs and pointwise nodes on them alone (logSoftmax's log of the sum). */
function rowScalarsOf(nodes: readonly FusedNode[]): Set<number> {
  const row = new Set<number>();
  for (const n of nodes) {
    if (n.kind === 'reduction') for (const o of n.outputs) row.add(o);
    else if (n.inputs.length > 0 && n.inputs.every((id) => row.has(id))) row.add(n.outputs[0]!);
  }
  return row;
}

/** The call's fused group: math-table nodes without fast math (the eager kernels' contract). */
export function eagerGroup(c: ReduceCall): FusedGroup {
  const extra = c.extra ?? [];
  return {
    kind: 'reduce',
    nodes: c.nodes,
    rowScalars: rowScalarsOf(c.nodes),
    inputs: [X, ...extra.map((_, k) => X + 1 + k)],
    outputs: c.outs.map((_, k) => OUT + k),
    value: (id) => c.values.get(id)!,
    ...(c.params ? { params: { count: c.params.values.length, ct: c.params.ct } } : {}),
    exactMath: true,
  };
}

/** The operands in group order (results, x, further inputs). */
export function eagerOperands<T extends LaidOut>(c: Pick<ReduceCall<T>, 'x' | 'outs' | 'extra'>): T[] {
  return [...c.outs.map((o) => o.t), c.x, ...(c.extra ?? [])];
}

/** The call's layout: every operand's strides over x's shape, as the compiler's layout orders and coalesces them. */
export function eagerLayout(c: ReduceCall): KernelLayout {
  const S = c.x.shape;
  const strides = [
    ...c.outs.map((o) => (o.row ? rowStrides(o.t.shape, o.t.strides, S, c.dims) : broadcastStrides(o.t.shape, o.t.strides, S))),
    [...c.x.strides],
    ...(c.extra ?? []).map((t) => broadcastStrides(t.shape, t.strides, S)),
  ];
  const operands = eagerOperands(c).map((t, k): OperandLayout => {
    const out = k < c.outs.length;
    return { value: k, dtype: t.dtype, out, rowScalar: out && c.outs[k]!.row, offset: t.offset, span: spanOf(t.shape, t.strides) };
  });
  return fusedLayout({ kind: 'reduce', shape: S, dims: c.dims, strides, operands, rowRef: c.outs.length, keepRowOrder: c.keepRowOrder });
}

/**
 * Rows per SM from which the thread strategy (one thread per strided row) keeps the memory system
 * busy on its own: about a quarter of an SM's resident threads, each with a few loads in flight.
 * Below it, for rows of at least MIN_ROW_FOR_COPY, the input is first copied with the reduced dims
 * innermost (what the hand-written row kernels always did): two extra passes over the data at full
 * bandwidth cost less than one pass by too few threads. An estimate, not yet measured on the H200.
 */
const THREAD_ROWS_PER_SM = 512;
const MIN_ROW_FOR_COPY = 64;

/** Whether the input (operand k) has strided rows (not unit, not broadcast) too few for the thread strategy to read them in place. */
export function needsRowCopy(spec: KernelSpec, L: KernelLayout, k: number, target: CudaTarget): boolean {
  const o = spec.ops[k]!;
  if (o.unitInner || o.rowZero[o.rowZero.length - 1] === true) return false;
  const rows = prod(L.oshape);
  return prod(L.rshape) >= MIN_ROW_FOR_COPY && rows > 0 && rows < target.sms * THREAD_ROWS_PER_SM;
}

/** Strides of `shape` dense with the kept dims outermost and the reduced dims innermost, each in logical order. */
export function rowsStrides(shape: readonly number[], dims: readonly number[]): number[] {
  const order = [...shape.keys()].filter((d) => !dims.includes(d)).concat([...dims].sort((a, b) => a - b));
  const strides = new Array<number>(shape.length);
  let step = 1;
  for (let i = order.length - 1; i >= 0; i--) {
    strides[order[i]!] = step;
    step *= Math.max(1, shape[order[i]!]!);
  }
  return strides;
}

/**
 * What identifies a group's generated text apart from its spec: nodes (ops, constants, casts,
 * expressions, dtypes), row scalars, inputs and outputs. A 0-d operand promotes differently from a
 * dimensioned one in the math table, so 0-d-ness is part of it.
 */
export function reduceGroupKey(g: FusedGroup): string {
  const arg = (a: FusedArg): string => (a.kind === 'value' ? `%${a.id}${g.value(a.id).shape.length === 0 ? 's' : ''}` : (JSON.stringify(a.value) ?? 'u'));
  const nodes = g.nodes.map(
    (n) =>
      `${n.outputs.join('/')}=${n.kind === 'reduction' ? `${n.reduce!.kind}(%${n.reduce!.input})` : `${n.op}${n.cast ? '!' : ''}(${n.args.map(arg).join(',')})${n.expr ? `{${n.expr.ct}:${n.expr.expr}}` : ''}`}:${g.value(n.outputs[0]!).dtype}`,
  );
  const params = g.params ? `|s${g.params.count}${g.params.ct}` : '';
  return `${g.kind}|${nodes.join(';')}|r${[...g.rowScalars].join(',')}|i${g.inputs.map((id) => `${id}:${g.value(id).dtype}`).join(',')}|o${g.outputs.join(',')}${params}${g.exactMath ? '|x' : ''}`;
}

/** A group specialised to a spec: what every launch with that spec shares. */
export interface ReducePlan {
  readonly ctx: GroupCtx;
  readonly spec: KernelSpec;
  /** Kernel name stem: `kiln_red_<label>_<hash of group key and spec>`. */
  readonly stem: string;
  /** The widest vector width the spec allows. */
  readonly best: 1 | 2 | 4 | 8;
}

/** `spec`: kernelSpec of the launch's layout; `key`: reduceGroupKey(g) (callers that cache plans have both). */
export function reducePlan(g: FusedGroup, spec: KernelSpec, label: string, key = reduceGroupKey(g)): ReducePlan {
  const h = createHash('sha256').update(`${key}#${specKey(spec)}`).digest('hex').slice(0, 12);
  return { ctx: groupCtx(g, spec), spec, stem: `kiln_red_${label.replace(/[^A-Za-z0-9_]/g, '_')}_${h}`, best: vectorWidthFor(spec) };
}

/**
 * The config for layout L: the compiler's default (defaultReduceConfig); where its vector width
 * cannot run L (a row length it does not divide, a misaligned operand), the same strategy scalar.
 */
export function reduceConfig(p: ReducePlan, L: KernelLayout, target: CudaTarget): ReduceConfig {
  const cfg = defaultReduceConfig(p.ctx, L, target, p.best);
  return cfg.vec > 1 && inapplicable(cfg, p.spec, L) !== null ? { ...cfg, vec: 1 } : cfg;
}

export interface RenderedReduce {
  /** The translation unit: the compiler's prelude and the config's kernels. */
  readonly source: string;
  /** Per kernel (one, or the split strategy's partial and finish): its name and parameters. */
  readonly kernels: readonly { readonly name: string; readonly params: readonly Param[] }[];
}

export function renderReduce(p: ReducePlan, cfg: ReduceConfig, target: CudaTarget): RenderedReduce {
  const e = emitReduce(p.ctx, `${p.stem}_${configTag(cfg)}`, cfg);
  return {
    source: `${prelude(target.halfMode)}\n${e.kernels.map((k) => k.source).join('\n\n')}\n`,
    kernels: e.kernels.map((k) => ({ name: k.name, params: k.params })),
  };
}
