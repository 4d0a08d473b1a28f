/**
 * Joint forward+backward capture (what torch.compile's AOTAutograd does), for calls whose inputs or
 * lifted parameters require grad:
 *
 * 1. The function is traced with fake tensors as usual; a hook keeps a tape of the recorded ops
 *    that take a value requiring grad (the same rule eager autograd records by).
 * 2. Still under the tracer, the tape is walked in reverse from one gradient placeholder per
 *    differentiable output, applying each op's registered backward formula
 *    (src/autograd/formulas) to fakes, so the formulas' op calls are recorded too: the backward
 *    graph is derived symbolically by the same code that runs eager backward.
 * 3. The joint graph is partitioned at the point where the backward began: the forward graph
 *    returns the user's output plus the values the backward reads ("saved"); the backward graph
 *    takes the saved values and the output gradients and returns the gradients of the inputs that
 *    require grad. No recomputation or min-cut: the backward saves exactly what it reads.
 *
 * What cannot be captured raises BackwardUnsupported (the caller runs the call eagerly): an op
 * with no backward formula reached by a gradient, a formula that reads tensor values or calls a
 * kernel outside the dispatcher, in-place ops on values that require grad, and forward in-place
 * writes to a value the backward reads.
 */
import { add } from '../api/core.js';
import { zerosLike } from '../api/creation.js';
import { setAutocastDtype } from '../api/autocast.js';
import { applyBackwardFormula, type GradResult } from '../autograd/graph.js';
import type { Op } from '../ops/registry.js';
import type { MetaResult } from '../ops/schema.js';
import { isFloating } from '../tensor/dtype.js';
import { contiguousStrides, fmtShape, shapeEquals } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';
import { FakeTensor, GraphBreak, trace, type TraceContext } from './capture.js';
import type { Graph, GraphInput, IRArg, IRNode, OutputTree, ValueId, ValueInfo } from './ir.js';
import { argValues, outputValues } from './ir.js';
import { aliasRoot, mutatedValues } from './passes/util.js';

/** The backward of this call cannot be compiled (the reason says why); run it eagerly. */
export class BackwardUnsupported extends Error {
  constructor(readonly reason: string) {
    super(`compiled backward unsupported: ${reason}`);
    this.name = 'BackwardUnsupported';
  }
}

/** Where a saved value comes from at run time. */
export type SavedRef =
  /** Entry `index` of the forward program's saved-outputs list. */
  | { readonly kind: 'output'; readonly index: number }
  /** A forward input (argument or lifted tensor), by its value id in `JointGraphs.inputs`. */
  | { readonly kind: 'input'; readonly id: ValueId };

export interface JointGraphs {
  /** The whole traced graph, forward then backward nodes (for logs and lifted guards). */
  readonly joint: Graph;
  /**
   * Inputs: the function's arguments and the tensors lifted by the forward. Output:
   * [user output, [saved values computed by the forward], [differentiable outputs]].
   */
  readonly forward: Graph;
  /**
   * Inputs: source arg ['saved', k] (SavedRef k), arg ['grad', j] (gradient of differentiable
   * output j), and tensors lifted by the formulas (constants). Output: [gradient per `gradInputs`
   * entry, or null where none reaches it].
   */
  readonly backward: Graph;
  readonly saved: readonly SavedRef[];
  /** Forward input value ids whose gradients the backward returns, in order. */
  readonly gradInputs: readonly ValueId[];
  /** The forward inputs as traced (before passes), to resolve SavedRef inputs and gradInputs. */
  readonly inputs: readonly GraphInput[];
  /** Metadata of the differentiable outputs (the gradient placeholders have these shapes and dtypes). */
  readonly outputMetas: readonly ValueInfo[];
}

interface TapeEntry {
  readonly op: Op<readonly unknown[], MetaResult>;
  readonly irArgs: readonly IRArg[];
  readonly outputs: readonly ValueId[];
}

function isInplaceOp(op: Op<readonly unknown[], MetaResult>): boolean {
  return op.tags?.includes('inplace') === true;
}

/**
 * What a forward node writes, as far as the values the backward reads are concerned. batchNorm in
 * eval mode (training = false) declares its running statistics mutated but leaves them alone, so
 * a backward may read them (frozen-statistics fine-tuning).
 */
function forwardWrites(n: IRNode): ValueId[] {
  if (n.op === 'batchNorm' && n.args[5]?.kind === 'const' && n.args[5].value === false) return [];
  return mutatedValues(n);
}

function resolvePath(args: readonly unknown[], path: readonly (string | number)[]): unknown {
  let x: unknown = args;
  for (const k of path) x = (x as Record<string | number, unknown>)[k];
  return x;
}

/** Collects fakes in an output structure, in order (the tracer's walk: arrays and plain objects). */
function fakesIn(x: unknown, out: FakeTensor[]): FakeTensor[] {
  if (x instanceof FakeTensor) out.push(x);
  else if (Array.isArray(x)) for (const e of x) fakesIn(e, out);
  else if (x !== null && typeof x === 'object' && Object.getPrototypeOf(x) === Object.prototype) for (const v of Object.values(x)) fakesIn(v, out);
  return out;
}

class JointRecorder {
  private readonly requires = new Map<ValueId, boolean>();
  private readonly tape: TapeEntry[] = [];
  private backwardStarted = false;
  forwardNodes = 0;
  forwardInputs = 0;
  outputMetas: ValueInfo[] = [];
  gradInputs: ValueId[] = [];

  constructor(private readonly args: readonly unknown[]) {}

  /** Whether a value requires grad: inputs by their tensors, op results by the recording rule. */
  requiresGrad(id: ValueId, ctx: TraceContext): boolean {
    const known = this.requires.get(id);
    if (known !== undefined) return known;
    const inp = ctx.inputs.find((i) => i.id === id);
    let r = false;
    if (inp) {
      const t = inp.source.kind === 'lifted' ? inp.source.tensor : resolvePath(this.args, inp.source.path);
      r = t instanceof Tensor && t.requiresGrad;
    }
    this.requires.set(id, r);
    return r;
  }

  onOp(op: Op<readonly unknown[], MetaResult>, irArgs: readonly IRArg[], results: readonly FakeTensor[], ctx: TraceContext): void {
    if (this.backwardStarted) return; // formula ops are not differentiated again
    const needs = !op.tags?.includes('factory') && irArgs.some((a) => argValues(a).some((id) => this.requiresGrad(id, ctx)));
    for (const r of results) {
      const rg = needs && isFloating(r.dtype);
      this.requires.set(r.valueId, rg);
      r.requiresGrad = rg; // as eager autograd would mark it (user code may branch on it)
    }
    if (!needs) return;
    // An op that writes a tensor requiring grad would need history rewriting (as eager autograd
    // rejects too). Writes to tensors outside the gradient's path are fine: batchNorm's running
    // statistics in training mode. Its formula must not read them afterwards; partition() checks.
    const writesGrad = op.mutatedArgs.some((i) => irArgs[i] !== undefined && argValues(irArgs[i]).some((id) => this.requiresGrad(id, ctx)));
    if (isInplaceOp(op) || writesGrad) throw new BackwardUnsupported(`in-place op '${op.name}' on a tensor that requires grad`);
    this.tape.push({ op, irArgs, outputs: results.map((r) => r.valueId) });
  }

  /** Traces the backward from the function's result; returns [result, gradients of the inputs]. */
  finish(result: unknown, ctx: TraceContext): unknown {
    this.forwardNodes = ctx.nodes.length;
    this.forwardInputs = ctx.inputs.length;
    this.backwardStarted = true;
    const seen = new Set<ValueId>();
    const grads = new Map<ValueId, Tensor>();
    for (const f of fakesIn(result, [])) {
      const id = f.valueId;
      if (seen.has(id) || !this.requires.get(id) || ctx.inputs.some((i) => i.id === id)) continue;
      seen.add(id);
      const info = ctx.info(id);
      this.outputMetas.push(info);
      const meta = { shape: info.shape, strides: contiguousStrides(info.shape), dtype: info.dtype, device: info.device, offset: 0 };
      grads.set(id, ctx.addInput(meta, { kind: 'arg', path: ['grad', this.outputMetas.length - 1] }));
    }
    // The formulas are traced as eager backward runs them: with autocast off (engine.ts).
    const restoreAutocast = setAutocastDtype(null);
    try {
      for (let i = this.tape.length - 1; i >= 0; i--) this.backwardOf(this.tape[i]!, grads, ctx);
    } finally {
      restoreAutocast();
    }
    this.gradInputs = ctx.inputs.slice(0, this.forwardInputs).flatMap((inp) => (this.requiresGrad(inp.id, ctx) ? [inp.id] : []));
    return [result, this.gradInputs.map((id) => grads.get(id) ?? null)];
  }

  private backwardOf(e: TapeEntry, grads: Map<ValueId, Tensor>, ctx: TraceContext): void {
    if (e.outputs.every((id) => !grads.has(id))) return; // no gradient reaches this op
    const outs = e.outputs.map((id) => ctx.fakeOf(id));
    const gOut = outs.map((o) => grads.get(o.valueId) ?? (isFloating(o.dtype) ? zerosLike(o) : null));
    const materialize = (a: IRArg): unknown => (a.kind === 'value' ? ctx.fakeOf(a.id) : a.kind === 'list' ? a.items.map(materialize) : a.kind === 'const' ? a.value : unsupportedSym());
    const args = e.irArgs.map(materialize);
    const rg = (a: IRArg | undefined): boolean => a !== undefined && argValues(a).some((id) => this.requiresGrad(id, ctx));
    const needs = (arg: number, item?: number): boolean => {
      const a = e.irArgs[arg];
      return item === undefined ? rg(a) : a?.kind === 'list' && rg(a.items[item]);
    };
    let res: readonly GradResult[] | null;
    try {
      res = applyBackwardFormula(e.op, args, outs, needs, gOut);
    } catch (err) {
      const why = err instanceof GraphBreak ? err.reason : err instanceof Error ? err.message : String(err);
      throw new BackwardUnsupported(`tracing the backward formula of '${e.op.name}' failed: ${why}`);
    }
    if (!res) throw new BackwardUnsupported(`the derivative for '${e.op.name}' is not implemented`);
    const deliver = (a: IRArg | undefined, g: unknown, where: string): void => {
      if (a?.kind !== 'value' || !(g instanceof Tensor) || !this.requiresGrad(a.id, ctx)) return;
      const info = ctx.info(a.id);
      if (!shapeEquals(g.shape, info.shape)) {
        // A formula bug: eager backward reports it when it runs, so the call falls back to eager.
        throw new BackwardUnsupported(`${e.op.name} backward (${where}) gives a gradient of shape ${fmtShape(g.shape)} for a tensor of shape ${fmtShape(info.shape)}`);
      }
      const gd = g.dtype === info.dtype ? g : g.to(info.dtype);
      const prev = grads.get(a.id);
      grads.set(a.id, prev ? add(prev, gd) : gd);
    };
    e.irArgs.forEach((a, i) => {
      const r = res[i];
      if (a.kind === 'list') a.items.forEach((item, j) => deliver(item, Array.isArray(r) ? (r as readonly unknown[])[j] : undefined, `argument ${i}[${j}]`));
      else deliver(a, r, `argument ${i}`);
    });
  }
}

function listOf(items: readonly OutputTree[]): OutputTree {
  return { kind: 'list', items };
}

/** Splits the joint graph where the backward began (see the header). */
function partition(joint: Graph, rec: JointRecorder): JointGraphs {
  const fwdNodes = joint.nodes.slice(0, rec.forwardNodes);
  const bwdNodes = joint.nodes.slice(rec.forwardNodes);
  const fwdInputs = joint.inputs.slice(0, rec.forwardInputs);
  const later = joint.inputs.slice(rec.forwardInputs);
  if (joint.output.kind !== 'list' || joint.output.items.length !== 2) throw new Error('compile: unexpected joint output');
  const [userTree, gradTree] = joint.output.items as [OutputTree, OutputTree];

  const defIndex = new Map<ValueId, number>();
  fwdInputs.forEach((inp) => defIndex.set(inp.id, -1));
  fwdNodes.forEach((n, i) => n.outputs.forEach((o) => defIndex.set(o, i)));
  // Forward values the backward reads, in first-use order.
  const savedSet = new Set<ValueId>();
  const use = (id: ValueId): void => {
    if (defIndex.has(id)) savedSet.add(id);
  };
  for (const n of bwdNodes) for (const a of n.args) argValues(a).forEach(use);
  outputValues(gradTree).forEach(use);
  const savedIds = [...savedSet];

  // A saved value overwritten later in the forward would reach the backward with the new contents.
  fwdNodes.forEach((n, i) => {
    for (const m of forwardWrites(n)) {
      const root = aliasRoot(joint, m);
      const hit = savedIds.find((s) => aliasRoot(joint, s) === root && defIndex.get(s)! < i);
      if (hit !== undefined) throw new BackwardUnsupported(`'${n.op}' writes in place to a tensor the backward reads`);
    }
  });

  const saved: SavedRef[] = [];
  const savedOutputs: ValueId[] = [];
  for (const id of savedIds) {
    if (defIndex.get(id) === -1) saved.push({ kind: 'input', id });
    else saved.push({ kind: 'output', index: savedOutputs.push(id) - 1 });
  }
  const diffIds = later.filter((i) => i.source.kind === 'arg' && i.source.path[0] === 'grad');
  const tensorTree = (id: ValueId): OutputTree => ({ kind: 'tensor', id });
  const forward: Graph = {
    inputs: fwdInputs,
    nodes: fwdNodes,
    values: joint.values,
    output: listOf([userTree, listOf(savedOutputs.map(tensorTree)), listOf(rec.outputMetas.map((m) => tensorTree(m.id)))]),
  };
  const bwdValues = new Map(joint.values);
  // Saved values are plain inputs of the backward: what they aliased in the forward is not there.
  for (const id of savedIds) bwdValues.set(id, { ...joint.values.get(id)!, aliasOf: undefined });
  const backward: Graph = {
    inputs: [
      ...savedIds.map((id, k): GraphInput => ({ id, source: { kind: 'arg', path: ['saved', k] } })),
      ...diffIds,
      ...later.filter((i) => i.source.kind === 'lifted'),
    ],
    nodes: bwdNodes,
    values: bwdValues,
    output: gradTree,
  };
  return { joint, forward, backward, saved, gradInputs: rec.gradInputs, inputs: fwdInputs, outputMetas: rec.outputMetas };
}

/**
 * Traces `fn(...args)` and its backward. Throws GraphBreak (data-dependent forward) or
 * BackwardUnsupported.
 */
export function traceJoint(fn: (...args: never[]) => unknown, args: readonly unknown[]): JointGraphs {
  const rec = new JointRecorder(args);
  const { graph } = trace(fn, args, {
    onOp: (op, irArgs, results, ctx) => rec.onOp(op, irArgs, results, ctx),
    finish: (result, ctx) => rec.finish(result, ctx),
  });
  return partition(graph, rec);
}

/** Traced graphs hold no symbolic sizes (symbolic.ts adds them to optimised inference graphs only). */
function unsupportedSym(): never {
  throw new Error('kiln.compile: a symbolic size in a traced graph (symbolic sizes are added after the passes)');
}
