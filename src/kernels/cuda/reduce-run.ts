/**
 * Launches an eager reduce group (codegen/reduce.ts) over tensors: its layout (the operands'
 * strides over the input's shape, ordered and coalesced as the compiler's) gives the spec, the
 * config and the geometry (fused/configs.ts launchPlan, as the compiler's program launches). Any
 * strides work: many strided rows (a reduction over a middle dim) are read in place by the thread
 * strategy; few long strided rows are first copied into dense rows (needsRowCopy), as the
 * hand-written row kernels always did. A split reduction's partials live in a workspace freed as
 * soon as the launches are enqueued (the allocator is stream-ordered).
 *
 * Host cost: a call names its group by a key (the op and everything its group depends on besides
 * the tensors' layouts), so the group is built once per key; each key remembers the launches of its
 * last few layouts (the layout, kernels and geometry), so a repeated call compares metadata, fills
 * in pointers and launches, as the hand-written kernels did.
 */
import { deviceInfo } from '../../runtime/cuda/properties.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel } from '../../runtime/cuda/launch.js';
import { Tensor } from '../../tensor/tensor.js';
import { eagerGroup, eagerLayout, eagerOperands, needsRowCopy, type ReduceCall, reduceConfig, reduceGroupKey, reducePlan, renderReduce, type ReducePlan, rowsStrides } from './codegen/reduce.js';
import { copyTensor } from './core.js';
import { ptrOf, streamOf } from './device.js';
import type { Param } from './fused/args.js';
import { type CudaTarget, configTag, launchPlan, type LaunchPlan, reduceShape } from './fused/configs.js';
import type { FusedNode, FusedValue } from './fused/group.js';
import { type KernelLayout, kernelSpec, specKey } from './fused/spec.js';

/** One eager reduction over tensors (codegen/reduce.ts ReduceCall) with its group built on demand. */
export interface ReduceRun extends Omit<ReduceCall<Tensor>, 'nodes' | 'values'> {
  /** The op (kernel names). */
  readonly label: string;
  /**
   * Everything `program` depends on besides the tensors' layouts: the op and its options, the
   * dtypes, whether x is 0-d (promotion), which extra inputs there are. Calls with one key share
   * one group.
   */
  readonly key: string;
  readonly program: () => { readonly nodes: readonly FusedNode[]; readonly values: ReadonlyMap<number, FusedValue> };
}

interface Compiled {
  readonly kernels: readonly CudaKernel[];
  readonly params: readonly (readonly Param[])[];
}

/** A remembered launch: the layout it was planned for, and the plan (or that it copies into rows). */
interface Remembered {
  readonly device: number;
  readonly x: LayoutOf;
  readonly dims: readonly number[];
  readonly outs: readonly LayoutOf[];
  readonly extra: readonly LayoutOf[];
  readonly copy: boolean;
  readonly plan?: LaunchPlan;
  readonly compiled?: Compiled;
  /** Per launch: its arguments with the sizes and strides filled in; pointers and scalars per call. */
  readonly args?: readonly Args[];
}

/** A launch's argument list: `fixed` holds the integers; `fill` says which slots take a pointer or a scalar. */
interface Args {
  readonly fixed: readonly number[];
  readonly fill: readonly { readonly i: number; readonly kind: 'operand' | 'workspace' | 'scalar'; readonly k: number }[];
}

interface LayoutOf {
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly offset: number;
}

interface Program {
  readonly nodes: readonly FusedNode[];
  readonly values: ReadonlyMap<number, FusedValue>;
  readonly gkey: string;
  /** Most recent first. */
  readonly recent: Remembered[];
}

/** Layouts remembered per key: a loop usually alternates between a few (a model's norms, its logits). */
const RECENT = 4;
const programs = new Map<string, Program>();
const plans = new Map<string, ReducePlan>();
const compiledKernels = new Map<string, Compiled>();
const targets = new Map<number, CudaTarget>();

function targetOf(index: number): CudaTarget {
  let t = targets.get(index);
  if (!t) {
    const info = deviceInfo(index);
    targets.set(index, (t = { arch: info.arch, sms: info.smCount, maxThreadsPerSm: info.maxThreadsPerSM, halfMode: 'ptx' }));
  }
  return t;
}

const sameList = (a: readonly number[], b: readonly number[]): boolean => {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};
const sameLayout = (m: LayoutOf, t: LayoutOf): boolean => m.offset === t.offset && sameList(m.shape, t.shape) && sameList(m.strides, t.strides);
const layoutOf = (t: Tensor): LayoutOf => ({ shape: t.shape, strides: t.strides, offset: t.offset });

/** Runs the group; outputs must be allocated by the caller (an empty row space launches nothing). */
export function runReduce(r: ReduceRun): void {
  run(r, true);
}

function run(r: ReduceRun, mayCopy: boolean): void {
  let prog = programs.get(r.key);
  if (!prog) {
    const b = r.program();
    const g = eagerGroup({ ...r, nodes: b.nodes, values: b.values });
    programs.set(r.key, (prog = { nodes: b.nodes, values: b.values, gkey: reduceGroupKey(g), recent: [] }));
  }
  const device = r.x.device.index;
  const extra = r.extra ?? [];
  let m = prog.recent.find(
    (e) =>
      e.device === device &&
      sameLayout(e.x, r.x) &&
      sameList(e.dims, r.dims) &&
      e.outs.length === r.outs.length &&
      e.outs.every((o, k) => sameLayout(o, r.outs[k]!.t)) &&
      e.extra.length === extra.length &&
      e.extra.every((o, k) => sameLayout(o, extra[k]!)),
  );
  if (!m) {
    m = plan(r, prog, device, mayCopy);
    prog.recent.unshift(m);
    if (prog.recent.length > RECENT) prog.recent.pop();
  }
  if (m.copy) {
    runOnRows(r);
    return;
  }
  launchPlanned(r, m);
}

/** Plans a call whose layout is not remembered: layout, spec, config, kernels, geometry. */
function plan(r: ReduceRun, prog: Program, device: number, mayCopy: boolean): Remembered {
  const call: ReduceCall = { ...r, nodes: prog.nodes, values: prog.values };
  const base = { device, x: layoutOf(r.x), dims: [...r.dims], outs: r.outs.map((o) => layoutOf(o.t)), extra: (r.extra ?? []).map(layoutOf) };
  const L = eagerLayout(call);
  const target = targetOf(device);
  const spec = kernelSpec(L);
  const pkey = `${device}|${prog.gkey}|${specKey(spec)}`;
  let p = plans.get(pkey);
  if (!p) plans.set(pkey, (p = reducePlan(eagerGroup(call), spec, r.label, prog.gkey)));
  if (mayCopy && needsRowCopy(p.spec, L, r.outs.length, target)) return { ...base, copy: true };
  const cfg = reduceConfig(p, L, target);
  const ckey = `${device}#${p.stem}_${configTag(cfg)}`;
  let compiled = compiledKernels.get(ckey);
  if (!compiled) {
    const rendered = renderReduce(p, cfg, target);
    compiled = {
      kernels: rendered.kernels.map((e) => kernelFromSource(device, rendered.source, e.name, e.params.map((q) => q.type))),
      params: rendered.kernels.map((e) => e.params),
    };
    compiledKernels.set(ckey, compiled);
  }
  const lp = launchPlan(cfg, p.spec, L, target, reduceShape(p.ctx));
  return { ...base, copy: false, plan: lp, compiled, args: lp.launches.map((l) => argsOf(compiled.params[l.kernel]!, L, lp.extraInts)) };
}

/** The integer arguments of a kernel for layout L, and where pointers and scalars go. */
function argsOf(params: readonly Param[], L: KernelLayout, extraInts: Readonly<Record<string, number>>): Args {
  const fixed: number[] = [];
  const fill: { i: number; kind: 'operand' | 'workspace' | 'scalar'; k: number }[] = [];
  params.forEach((q, i) => {
    const s = q.source;
    if (s.kind === 'int') fixed.push(intValue(s.what, L, extraInts));
    else {
      fixed.push(0);
      fill.push({ i, kind: s.kind, k: s.kind === 'operand' ? s.k : s.kind === 'scalar' ? Number(s.what.slice(1)) : 0 });
    }
  });
  return { fixed, fill };
}

function launchPlanned(r: ReduceRun, m: Remembered): void {
  const plan = m.plan!;
  if (plan.launches.length === 0) return;
  const tensors = eagerOperands(r);
  const ws = plan.workspaceBytes > 0 ? Tensor.empty([plan.workspaceBytes], 'uint8', r.x.device) : null;
  try {
    const wsPtr = ws ? ptrOf(ws) : 0;
    const stream = streamOf(r.x);
    plan.launches.forEach((l, j) => {
      const a = m.args![j]!;
      const args = [...a.fixed];
      for (const f of a.fill) args[f.i] = f.kind === 'operand' ? ptrOf(tensors[f.k]!) : f.kind === 'workspace' ? wsPtr : r.params!.values[f.k]!;
      launch(m.compiled!.kernels[l.kernel]!, args, { grid: l.grid, block: l.block, sharedBytes: l.sharedBytes }, stream);
    });
  } finally {
    ws?.dispose();
  }
}

/**
 * Runs r on a copy of x whose rows are dense; full-size results whose layout differs are written to
 * temporaries of that layout and copied into place (one coalesced pass each way).
 */
function runOnRows(r: ReduceRun): void {
  const strides = rowsStrides(r.x.shape, r.dims);
  const like = (t: Tensor): Tensor => Tensor.empty(t.shape, t.dtype, t.device, strides);
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
