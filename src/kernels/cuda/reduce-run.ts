/**
 * Launches an eager reduce group (codegen/reduce.ts) over tensors: its layout (the operands'
 * strides over the input's shape, ordered and coalesced as the compiler's) gives the spec, the
 * config and the geometry (fused/configs.ts launchPlan, as the compiler's program launches). Any
 * strides work: many strided rows (a reduction over a middle dim) are read in place by the thread
 * strategy; few long strided rows are first copied into dense rows (needsRowCopy), as the
 * hand-written row kernels always did. Kernels are cached per device, group, spec and config; a
 * split reduction's partials live in a workspace freed as soon as the launches are enqueued (the
 * allocator is stream-ordered).
 */
import { deviceInfo } from '../../runtime/cuda/properties.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel } from '../../runtime/cuda/launch.js';
import { Tensor } from '../../tensor/tensor.js';
import { eagerGroup, eagerLayout, eagerOperands, needsRowCopy, type ReduceCall, reduceConfig, reduceGroupKey, reducePlan, renderReduce, type ReducePlan, rowsStrides } from './codegen/reduce.js';
import { copyTensor } from './core.js';
import { ptrOf, streamOf } from './device.js';
import type { Param } from './fused/args.js';
import { type CudaTarget, configTag, launchPlan } from './fused/configs.js';
import { type KernelLayout, kernelSpec, specKey } from './fused/spec.js';

/** One eager reduction over tensors (codegen/reduce.ts ReduceCall) and its op's name (kernel names). */
export interface ReduceRun extends ReduceCall<Tensor> {
  readonly label: string;
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

/** Runs the group; outputs must be allocated by the caller (an empty row space launches nothing). */
export function runReduce(r: ReduceRun): void {
  run(r, true);
}

function run(r: ReduceRun, mayCopy: boolean): void {
  const g = eagerGroup(r);
  const L = eagerLayout(r);
  const index = r.x.device.index;
  const target = targetOf(index);
  const spec = kernelSpec(L);
  const pkey = `${index}|${reduceGroupKey(g)}|${specKey(spec)}`;
  let p = plans.get(pkey);
  if (!p) plans.set(pkey, (p = reducePlan(g, spec, r.label)));
  const cfg = reduceConfig(p, L, target);
  if (mayCopy && needsRowCopy(p.spec, L, r.outs.length, target)) {
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
  const tensors = eagerOperands(r);
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
