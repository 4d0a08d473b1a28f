/**
 * The autograd graph. A post-dispatch hook records, for every op whose inputs require grad, a Node
 * holding the op's arguments, outputs and backward formula, with one edge per tensor input to the
 * node that produced it (or to the leaf tensor, whose .grad accumulates). Formulas are registered
 * per op with defineBackward and stored in the op's backward slot.
 *
 * Saved tensors are checked with storage version counters: a formula declares what it reads
 * (`save`), and backward fails with a clear error if one of those was overwritten in place since.
 * In-place ops get the pre-op values of the tensors they mutate, cloned by a pre-dispatch hook.
 */
import { addPostDispatchHook, setPreDispatchHook } from '../ops/dispatch.js';
import type { Op } from '../ops/registry.js';
import type { MetaResult } from '../ops/schema.js';
import { isFloating } from '../tensor/dtype.js';
import { fmtShape } from '../tensor/layout.js';
import { Tensor, type GradNode } from '../tensor/tensor.js';
import { clone } from '../api/core.js';
import { isGradEnabled, noGrad } from './grad-mode.js';

export interface BackwardContext {
  readonly op: string;
  /** The op's arguments; tensors an in-place op mutated are replaced by their values before it. */
  readonly args: readonly unknown[];
  /** The op's outputs, in order. */
  readonly outputs: readonly Tensor[];
  /** Whether argument `argIndex` (or element `item` of a tensor-list argument) needs a gradient. */
  needsInputGrad(argIndex: number, item?: number): boolean;
}

/** Per argument: a gradient (same shape as the argument), null, or one per element of a list. */
export type GradResult = Tensor | null | undefined | readonly (Tensor | null | undefined)[];

/**
 * A backward formula. `grads` has one entry per output: floating outputs that received no gradient
 * get zeros, non-floating outputs get null.
 */
export type BackwardFormula = (ctx: BackwardContext, grads: readonly (Tensor | null)[]) => readonly GradResult[];

export interface BackwardOptions {
  /** Names of arguments whose values the formula reads (checked against in-place changes). */
  save?: readonly string[];
  /** Whether the formula reads output values. */
  saveOutputs?: boolean;
}

interface Formula {
  fn: BackwardFormula;
  saveArgs: number[];
  saveOutputs: boolean;
}

type AnyOp = Op<readonly unknown[], MetaResult>;

/** Registers the backward formula of an op (each op at most once). */
export function defineBackward(op: { name: string; args: readonly { name: string }[]; backward?: unknown }, fn: BackwardFormula, options: BackwardOptions = {}): void {
  if (op.backward) throw new Error(`defineBackward: op '${op.name}' already has a backward formula`);
  const saveArgs = (options.save ?? []).map((n) => {
    const i = op.args.findIndex((a) => a.name === n);
    if (i < 0) throw new Error(`defineBackward: op '${op.name}' has no argument '${n}' to save`);
    return i;
  });
  const formula: Formula = { fn, saveArgs, saveOutputs: options.saveOutputs ?? false };
  (op as { backward?: unknown }).backward = formula;
}

export function hasBackward(op: { backward?: unknown }): boolean {
  return op.backward !== undefined;
}

/** Where a gradient goes: the node that produced an input, or a leaf tensor. */
export type Edge = { kind: 'node'; node: Node; output: number } | { kind: 'leaf'; tensor: Tensor };

export interface InputSlot {
  arg: number;
  item: number | undefined;
  edge: Edge | null;
  shape: readonly number[];
  dtype: Tensor['dtype'];
}

let nextSeq = 0;

export class Node implements GradNode {
  readonly seq = nextSeq++;
  released = false;
  /** Non-leaf outputs whose .grad the user asked to keep (retainGrad). */
  readonly retained = new Map<number, Tensor>();
  private savedVersions: [Tensor, number][] = [];

  constructor(
    readonly name: string,
    readonly formula: Formula | undefined,
    public args: readonly unknown[],
    public outputs: readonly Tensor[],
    readonly inputs: readonly InputSlot[],
  ) {
    if (formula) {
      for (const i of formula.saveArgs) for (const t of tensorsIn(args[i])) this.savedVersions.push([t, t.storage.version]);
      if (formula.saveOutputs) for (const t of outputs) this.savedVersions.push([t, t.storage.version]);
    }
  }

  /** Runs the formula; checks saved tensors first. */
  apply(grads: readonly (Tensor | null)[]): readonly GradResult[] {
    if (this.released) {
      throw new Error(
        `${this.name} backward: trying to backward through the graph a second time; pass { retainGraph: true } to the first backward()`,
      );
    }
    if (!this.formula) throw new Error(`${this.name}: the derivative for '${this.name}' is not implemented`);
    for (const [t, v] of this.savedVersions) {
      if (t.storage.version !== v) {
        throw new Error(
          `${this.name} backward: a tensor ${fmtShape(t.shape)} ${t.dtype} saved for the gradient was modified by an in-place ` +
            `operation (version ${t.storage.version}, expected ${v}); use an out-of-place op or clone() first`,
        );
      }
    }
    const needs = new Set(this.inputs.filter((s) => s.edge !== null).map((s) => `${s.arg}:${s.item ?? ''}`));
    const ctx: BackwardContext = {
      op: this.name,
      args: this.args,
      outputs: this.outputs,
      needsInputGrad: (arg, item) => needs.has(`${arg}:${item ?? ''}`) || (item === undefined && [...needs].some((k) => k.startsWith(`${arg}:`))),
    };
    return noGrad(() => this.formula!.fn(ctx, grads));
  }

  release(): void {
    this.released = true;
    this.args = [];
    this.outputs = [];
    this.savedVersions = [];
  }
}

function tensorsIn(x: unknown): Tensor[] {
  if (x instanceof Tensor) return [x];
  if (Array.isArray(x)) return x.filter((e): e is Tensor => e instanceof Tensor);
  return [];
}

function edgeOf(t: Tensor): Edge | null {
  if (!t.requiresGrad) return null;
  const fn = t.gradFn;
  if (fn instanceof Node) return { kind: 'node', node: fn, output: outputIndex(fn, t) };
  return { kind: 'leaf', tensor: t };
}

const outputIndices = new WeakMap<Tensor, number>();
function outputIndex(node: Node, t: Tensor): number {
  return outputIndices.get(t) ?? Math.max(0, node.outputs.indexOf(t));
}

const mutatedIndices = new WeakMap<AnyOp, readonly number[]>();

/** The indices of the arguments `op` writes into; computed once per op (this runs on every dispatch). */
function mutatedArgIndices(op: AnyOp): readonly number[] {
  let out = mutatedIndices.get(op);
  if (out === undefined) {
    const found: number[] = [];
    op.args.forEach((a, i) => {
      if (a.mutated) found.push(i);
    });
    out = Object.freeze(found);
    mutatedIndices.set(op, out);
  }
  return out;
}

/** Whether any tensor argument (or tensor in a list argument) requires grad; allocates nothing. */
function anyRequiresGrad(args: readonly unknown[]): boolean {
  for (const a of args) {
    if (a instanceof Tensor) {
      if (a.requiresGrad) return true;
    } else if (Array.isArray(a)) {
      for (const e of a) if (e instanceof Tensor && e.requiresGrad) return true;
    }
  }
  return false;
}

/**
 * The tensor a view was taken from (transitively), for views recorded while grad mode was on.
 * In-place writes through such a view would have to rewrite the base's history (PyTorch's
 * CopySlices); Kiln rejects them with a clear error instead of producing wrong gradients.
 */
const viewBases = new WeakMap<Tensor, Tensor>();

/** Before an in-place op: reject leaves that require grad, and keep the values about to be overwritten. */
function beforeDispatch(op: AnyOp, args: readonly unknown[]): unknown {
  if (!isGradEnabled()) return undefined;
  const mutated = mutatedArgIndices(op);
  if (mutated.length === 0 || !anyRequiresGrad(args)) return undefined;
  const originals = new Map<number, Tensor>();
  for (const i of mutated) {
    const t = args[i];
    if (!(t instanceof Tensor)) continue;
    const base = viewBases.get(t);
    if (base && base.requiresGrad) {
      throw new Error(
        `${op.name}: in-place modification of a view (${fmtShape(t.shape)}) of a tensor ${fmtShape(base.shape)} that requires grad ` +
          'is not supported; use out-of-place ops (e.g. torch-style x = x.clone() then index), or kiln.noGrad()',
      );
    }
    if (t.requiresGrad && t.gradFn === null) {
      throw new Error(
        `${op.name}: a leaf tensor ${fmtShape(t.shape)} that requires grad is being used in an in-place operation; ` +
          'use an out-of-place op, or wrap the update in kiln.noGrad()',
      );
    }
    if (op.backward) originals.set(i, noGrad(() => clone(t)));
  }
  return originals;
}

function afterDispatch(op: AnyOp, args: readonly unknown[], result: Tensor | Tensor[], before: unknown): void {
  // Factories (zerosLike(x)) read only metadata: their outputs are fresh leaves, as in PyTorch.
  if (!isGradEnabled() || !anyRequiresGrad(args) || op.tags?.includes('factory')) return;
  const outputs = Array.isArray(result) ? result : [result];
  op.outputs.forEach((spec, k) => {
    if (spec.aliasOf === undefined || op.tags?.includes('inplace')) return;
    const src = args[op.args.findIndex((a) => a.name === spec.aliasOf)];
    const produced = spec.type === 'Tensor[]' ? outputs : [outputs[k]];
    if (!(src instanceof Tensor)) return;
    for (const o of produced) if (o instanceof Tensor && o !== src && o.storage === src.storage) viewBases.set(o, viewBases.get(src) ?? src);
  });
  if (!outputs.some((o) => isFloating(o.dtype))) return;
  const inputs: InputSlot[] = [];
  args.forEach((a, i) => {
    if (a instanceof Tensor) inputs.push({ arg: i, item: undefined, edge: edgeOf(a), shape: a.shape, dtype: a.dtype });
    else if (Array.isArray(a)) {
      a.forEach((e, j) => {
        if (e instanceof Tensor) inputs.push({ arg: i, item: j, edge: edgeOf(e), shape: e.shape, dtype: e.dtype });
      });
    }
  });
  const originals = before instanceof Map ? (before as Map<number, Tensor>) : undefined;
  const saved = originals && originals.size > 0 ? args.map((a, i) => originals.get(i) ?? a) : args;
  const node = new Node(op.name, op.backward as Formula | undefined, saved, outputs, inputs);
  outputs.forEach((o, k) => {
    if (!isFloating(o.dtype)) return;
    o.requiresGrad = true;
    o.gradFn = node;
    outputIndices.set(o, k);
  });
}

let installed = false;

/** Installs the recording hooks (done once when kiln loads). */
export function installAutograd(): void {
  if (installed) return;
  installed = true;
  setPreDispatchHook(beforeDispatch);
  addPostDispatchHook(afterDispatch);
}

/**
 * Runs an op's registered backward formula directly, outside the tape (the compiler calls it on
 * fake tensors to trace a backward graph). Returns null when the op has no formula. Grad mode is
 * off inside, as when the engine runs a node.
 */
export function applyBackwardFormula(
  op: { name: string; backward?: unknown },
  args: readonly unknown[],
  outputs: readonly Tensor[],
  needsInputGrad: (argIndex: number, item?: number) => boolean,
  grads: readonly (Tensor | null)[],
): readonly GradResult[] | null {
  const formula = op.backward as Formula | undefined;
  if (!formula) return null;
  const ctx: BackwardContext = { op: op.name, args, outputs, needsInputGrad };
  return noGrad(() => formula.fn(ctx, grads));
}

/**
 * A node with a custom backward, the generic form of torch.autograd.Function: connects floating
 * `outputs` to the graph through one node whose `backward` maps the outputs' gradients (zeros for
 * outputs that got none) to one gradient per entry of `inputs` (null: none). `saved` tensors are
 * kept until the node is released (after backward without retainGraph) and checked against
 * in-place changes before backward runs. Does nothing when grad mode is off or no input requires grad.
 */
export function attachFunctionNode(
  name: string,
  inputs: readonly Tensor[],
  outputs: readonly Tensor[],
  saved: readonly Tensor[],
  backward: (saved: readonly Tensor[], grads: readonly (Tensor | null)[]) => readonly (Tensor | null | undefined)[],
): void {
  if (!isGradEnabled() || !inputs.some((t) => t.requiresGrad)) return;
  const formula: Formula = {
    fn: (ctx, grads) => [backward(ctx.args[1] as readonly Tensor[], grads), null],
    saveArgs: [1],
    saveOutputs: false,
  };
  const slots: InputSlot[] = inputs.map((t, j) => ({ arg: 0, item: j, edge: edgeOf(t), shape: t.shape, dtype: t.dtype }));
  const node = new Node(name, formula, [inputs, saved], outputs, slots);
  outputs.forEach((o, k) => {
    if (!isFloating(o.dtype)) throw new Error(`${name}: output ${k} (${fmtShape(o.shape)} ${o.dtype}) is not floating point and cannot carry a gradient`);
    o.requiresGrad = true;
    o.gradFn = node;
    outputIndices.set(o, k);
  });
}
