/**
 * Launches an eager reduce group (codegen/reduce.ts) over tensors: operands are the outputs, the
 * reduced input (value 0) and further inputs broadcast to its shape; their strides over the input's
 * shape give the layout (fused/layout.ts, as the compiler's), which gives the spec, the config and
 * the geometry (fused/configs.ts launchPlan, as the compiler's program launches). Any strides work:
 * a reduction over a middle dim reads in place (the thread strategy) instead of copying the input
 * into rows. Kernels are cached per device, group, spec and config; a split reduction's partials
 * live in a workspace freed as soon as the launches are enqueued (the allocator is stream-ordered).
 */
import { deviceInfo } from '../../runtime/cuda/properties.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel } from '../../runtime/cuda/launch.js';
import { broadcastStrides } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { reduceConfig, reduceGroupKey, reducePlan, renderReduce, type ReducePlan } from './codegen/reduce.js';
import { copyTensor } from './core.js';
import { ptrOf, streamOf } from './device.js';
import type { Param } from './fused/args.js';
import { type CudaTarget, configTag, launchPlan } from './fused/configs.js';
import type { FusedGroup, FusedNode, FusedValue } from './fused/group.js';
import { fusedLayout, rowStrides, spanOf } from './fused/layout.js';
import { type KernelLayout, kernelSpec, type OperandLayout, prod, specKey } from './fused/spec.js';

/** Value ids of a one-node program: the reduced input is 0, further inputs 1, 2, ..., the outputs 100, 101, ... */
export const X = 0;
export const OUT = 100;

export interface ReduceRun {
  /** The op (kernel names, errors). */
  readonly label: string;
  /** The reduced input, value X. */
  readonly x: Tensor;
  /** Reduced dims of x (any order; empty for a 0-d input). */
  readonly dims: readonly number[];
  /** Outputs (values OUT, OUT + 1, ...): the tensor and whether it holds one value per row. */
  readonly outs: readonly { readonly t: Tensor; readonly row: boolean }[];
  readonly nodes: readonly FusedNode[];
  readonly values: ReadonlyMap<number, FusedValue>;
  /** Further inputs (values X + 1, X + 2, ...), broadcast to x's shape: a norm's weight and bias. */
  readonly extra?: readonly Tensor[];
  /** Host scalars s0.. that expression nodes read, in this compute type. */
  readonly params?: { readonly ct: 'float' | 'double'; readonly values: readonly number[] };
  /** Keep the reduced dims in logical order (an arg reduction's index is a result). */
  readonly keepRowOrder?: boolean;
}

interface Compiled {
  readonly kernels: readonly CudaKernel[];
  readonly params: readonly (readonly Param[])[];
}

const targets = new Map<number, CudaTarget>();
function targetOf(index: number): CudaTarget {
  let t = targets.get(index);
  if (!t) {
    const info = deviceInfo(index);
    targets.set(index, (t = { arch: info.arch, sms: info.smCount, maxThreadsPerSm: info.maxThreadsPerSM, halfMode: 'ptx' }));
  }
  return t;
}

const plans = new Map<string, ReducePlan>();
const compiled = new Map<string, Compiled>();

/**
 * Rows per SM from which the thread strategy (one thread per strided row) keeps the memory system
 * busy on its own: about a quarter of an SM's resident threads, each with a few loads in flight.
 * Below it (and for rows of at least MIN_ROW_FOR_COPY), the input is first copied with the
 * reduced dims innermost (what the hand-written row kernels always did): two extra passes over the
 * data at full bandwidth cost less than one pass by too few threads. Not yet measured on the H200.
 */
const THREAD_ROWS_PER_SM = 512;
const MIN_ROW_FOR_COPY = 64;

/** Runs the group; outputs must be allocated by the caller (an empty row space launches nothing). */
export function runReduce(r: ReduceRun): void {
  run(r, true);
}

function run(r: ReduceRun, mayCopy: boolean): void {
  const S = r.x.shape;
  const extra = r.extra ?? [];
  const g: FusedGroup = {
    kind: 'reduce',
    nodes: r.nodes,
    rowScalars: rowScalarsOf(r.nodes),
    inputs: [X, ...extra.map((_, k) => X + 1 + k)],
    outputs: r.outs.map((_, k) => OUT + k),
    value: (id) => r.values.get(id)!,
    ...(r.params ? { params: { count: r.params.values.length, ct: r.params.ct } } : {}),
    exactMath: true,
  };
  const tensors = [...r.outs.map((o) => o.t), r.x, ...extra];
  const strides = [...r.outs.map((o) => (o.row ? rowStrides(o.t.shape, o.t.strides, S, r.dims) : broadcastStrides(o.t.shape, o.t.strides, S))), [...r.x.strides], ...extra.map((t) => broadcastStrides(t.shape, t.strides, S))];
  const operands = tensors.map((t, k): OperandLayout => {
    const out = k < r.outs.length;
    return { value: k, dtype: t.dtype, out, rowScalar: out && r.outs[k]!.row, offset: t.offset, span: spanOf(t.shape, t.strides) };
  });
  const L = fusedLayout({ kind: 'reduce', shape: S, dims: r.dims, strides, operands, rowRef: r.outs.length, keepRowOrder: r.keepRowOrder });
  const index = r.x.device.index;
  const target = targetOf(index);
  const spec = kernelSpec(L);
  const pkey = `${index}|${reduceGroupKey(g)}|${specKey(spec)}`;
  let p = plans.get(pkey);
  if (!p) plans.set(pkey, (p = reducePlan(g, spec, r.label)));
  const cfg = reduceConfig(p, L, target);
  if (mayCopy && stridedRows(p, L, r.outs.length, target)) {
    runOnRows(r);
    return;
  }
  const plan = launchPlan(cfg, p.spec, L, target, r.nodes.filter((n) => n.kind === 'reduction').length);
  if (plan.launches.length === 0) return;
  const ckey = `${index}#${p.stem}_${configTag(cfg)}`;
  let k = compiled.get(ckey);
  if (!k) {
    const rendered = renderReduce(p, cfg, target);
    k = {
      kernels: rendered.kernels.map((e) => kernelFromSource(index, rendered.source, e.name, e.params.map((q) => q.type))),
      params: rendered.kernels.map((e) => e.params),
    };
    compiled.set(ckey, k);
  }
  const ws = plan.workspaceBytes > 0 ? Tensor.empty([plan.workspaceBytes], 'uint8', r.x.device) : null;
  try {
    const wsPtr = ws ? ptrOf(ws) : 0;
    const stream = streamOf(r.x);
    for (const l of plan.launches) {
      const args = k.params[l.kernel]!.map((q) => argValue(q, L, plan.extraInts, tensors, wsPtr, r.params?.values));
      launch(k.kernels[l.kernel]!, args, { grid: l.grid, block: l.block, sharedBytes: l.sharedBytes }, stream);
    }
  } finally {
    ws?.dispose();
  }
}

/** Whether x's rows are strided (not unit, not broadcast) and too few for the thread strategy to read them in place. */
function stridedRows(p: ReducePlan, L: KernelLayout, k: number, target: CudaTarget): boolean {
  const o = p.spec.ops[k]!;
  if (o.unitInner || o.rowZero[o.rowZero.length - 1] === true) return false;
  const rows = prod(L.oshape);
  return prod(L.rshape) >= MIN_ROW_FOR_COPY && rows > 0 && rows < target.sms * THREAD_ROWS_PER_SM;
}

/** Strides of `shape` dense with the kept dims outermost and the reduced dims innermost, each in logical order. */
function rowsStrides(shape: readonly number[], dims: readonly number[]): number[] {
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
 * Runs r on a copy of x whose rows are dense; full-size results whose layout differs are written to
 * temporaries of that layout and copied into place (one coalesced pass each way).
 */
function runOnRows(r: ReduceRun): void {
  const strides = rowsStrides(r.x.shape, r.dims);
  const like = (t: Tensor, dtype = t.dtype): Tensor => Tensor.empty(t.shape, dtype, t.device, strides);
  const xr = like(r.x);
  const temps: { t: Tensor; into: Tensor }[] = [];
  try {
    copyTensor(xr, r.x);
    const outs = r.outs.map((o) => {
      if (o.row || o.t.strides.every((st, d) => st === strides[d] || o.t.shape[d] === 1)) return o;
      const t = like(o.t);
      temps.push({ t, into: o.t });
      return { t, row: false };
    });
    run({ ...r, x: xr, outs }, false);
    for (const { t, into } of temps) copyTensor(into, t);
  } finally {
    xr.dispose();
    for (const { t } of temps) t.dispose();
  }
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

/** The value of kernel parameter q for this launch. */
function argValue(q: Param, L: KernelLayout, extraInts: Readonly<Record<string, number>>, tensors: readonly Tensor[], ws: number, scalars: readonly number[] | undefined): number {
  const s = q.source;
  switch (s.kind) {
    case 'operand':
      return ptrOf(tensors[s.k]!);
    case 'workspace':
      return ws;
    case 'scalar':
      return scalars![Number(s.what.slice(1))]!;
    case 'int':
      return intValue(s.what, L, extraInts);
  }
}

/** Sizes M<d> / R<d>, strides a<k>_<d> (outer) / b<k>_<d> (row), or a plan's extra integer (G, chunk). */
function intValue(name: string, L: KernelLayout, extra: Readonly<Record<string, number>>): number {
  const c = name.charCodeAt(0);
  if (c === 77 /* M */) return L.oshape[Number(name.slice(1))]!;
  if (c === 82 /* R */) return L.rshape[Number(name.slice(1))]!;
  if (c === 97 /* a */ || c === 98 /* b */) {
    const us = name.indexOf('_');
    const k = Number(name.slice(1, us));
    const d = Number(name.slice(us + 1));
    return (c === 97 ? L.ost : L.rst)[k]![d]!;
  }
  const v = extra[name];
  if (v === undefined) throw new Error(`kiln cuda: unknown reduce kernel argument '${name}'`);
  return v;
}
