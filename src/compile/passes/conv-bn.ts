/**
 * Inference pass: conv2d -> batchNorm(training = false) [-> relu] becomes one conv2dBatchNorm op
 * (src/ops/defs/conv-fused.ts), whose backends apply the per-channel BatchNorm scale/shift and the
 * ReLU in the convolution's epilogue instead of reading and writing the whole activation again.
 *
 * The fused op takes the BatchNorm tensors (running mean/var, weight, bias) as they are; its
 * kernels derive scale = weight / sqrt(var + eps) and shift = bias - mean * scale from their values
 * on each call, so nothing is baked in and a model whose statistics change after compiling (in
 * place, or by running in train mode between inference calls) gives the new result.
 *
 * Matched only when the conv output feeds the BatchNorm alone (and the BatchNorm output the ReLU
 * alone), so no intermediate the function still needs disappears, and only when no op that writes
 * a tensor sits between the conv and the last folded node. Training-mode BatchNorm (batch
 * statistics, running-stat updates) is never folded. compile.ts runs the pass on inference
 * graphs only (`PassOptions.foldConvBn`): a graph whose backward is compiled keeps the ops its
 * formulas are written for.
 */
import type { Graph, IRArg, IRNode, ValueId } from '../ir.js';
import { GraphBuilder, isImpure, useCounts, Val, type BuilderArg } from './util.js';

interface Fold {
  readonly conv: IRNode;
  readonly bn: IRNode;
  readonly relu: IRNode | null;
}

function builderArg(a: IRArg): BuilderArg {
  switch (a.kind) {
    case 'value':
      return new Val(a.id);
    case 'list':
      return a.items.map(builderArg);
    case 'const':
      return a.value as BuilderArg;
    case 'sym':
      throw new Error('conv+BatchNorm folding: a symbolic size in a traced graph');
    default:
      return a satisfies never;
  }
}

function valueOf(a: IRArg | undefined): ValueId | null {
  return a?.kind === 'value' ? a.id : null;
}

/** A tensor argument or null (an absent optional tensor is a null/undefined constant). */
function optionalValue(a: IRArg | undefined): ValueId | null | false {
  if (a === undefined || (a.kind === 'const' && (a.value === null || a.value === undefined))) return null;
  return a.kind === 'value' ? a.id : false;
}

function findFolds(g: Graph): Fold[] {
  const uses = useCounts(g);
  const producer = new Map<ValueId, { node: IRNode; index: number }>();
  const consumer = new Map<ValueId, { node: IRNode; index: number }>();
  g.nodes.forEach((node, index) => {
    for (const o of node.outputs) producer.set(o, { node, index });
    for (const a of node.args) {
      const v = valueOf(a);
      if (v !== null) consumer.set(v, { node, index });
    }
  });
  const folds: Fold[] = [];
  g.nodes.forEach((bn, index) => {
    if (bn.op !== 'batchNorm' || bn.outputs.length !== 1) return;
    const [xArg, meanArg, varArg, wArg, bArg, training, , eps] = bn.args;
    if (training?.kind !== 'const' || training.value !== false || eps?.kind !== 'const' || typeof eps.value !== 'number') return;
    if (valueOf(meanArg) === null || valueOf(varArg) === null || optionalValue(wArg) === false || optionalValue(bArg) === false) return;
    const x = valueOf(xArg);
    const conv = x === null ? undefined : producer.get(x);
    if (!conv || conv.node.op !== 'conv2d' || conv.node.outputs.length !== 1 || uses.get(x!) !== 1) return;
    const y = bn.outputs[0]!;
    const next = consumer.get(y);
    const relu = uses.get(y) === 1 && next?.node.op === 'relu' && valueOf(next.node.args[0]) === y ? next : null;
    const last = relu ? relu.index : index;
    // A write between the conv and the last folded node could change what the fused op reads.
    for (let k = conv.index + 1; k < last; k++) if (k !== index && isImpure(g.nodes[k]!)) return;
    folds.push({ conv: conv.node, bn, relu: relu?.node ?? null });
  });
  return folds;
}

/** Folds every eligible conv2d -> eval batchNorm [-> relu] chain; returns the graph and the fold count. */
export function foldConvBatchNorm(g: Graph): { graph: Graph; folds: number } {
  const folds = findFolds(g);
  if (folds.length === 0) return { graph: g, folds: 0 };
  const skip = new Set<number>();
  const at = new Map<number, Fold>();
  for (const f of folds) {
    skip.add(f.conv.id);
    if (f.relu) skip.add(f.bn.id);
    at.set((f.relu ?? f.bn).id, f);
  }
  const b = new GraphBuilder(g);
  let done = 0;
  for (const node of g.nodes) {
    const f = at.get(node.id);
    if (f) {
      const [input, weight, bias, stride, padding, dilation, groups] = f.conv.args.map(builderArg);
      const [, mean, variance, w, bnBias, , , eps] = f.bn.args.map(builderArg);
      const old = g.values.get(node.outputs[0]!)!;
      let out: Val | null = null;
      try {
        out = b.op('conv2dBatchNorm', input, weight, bias ?? null, stride, padding, dilation, groups, mean, variance, w ?? null, bnBias ?? null, eps, f.relu !== null);
      } catch {
        out = null; // the meta function refused (mixed devices, odd dtypes): keep the chain
      }
      const info = out ? b.info(out.id) : null;
      if (out && info && info.dtype === old.dtype && info.shape.join() === old.shape.join() && info.strides.join() === old.strides.join()) {
        b.replace(node.outputs[0]!, out.id);
        done++;
        continue;
      }
      // Not replaceable as is: emit the original chain (the fused node, if any, is dead code).
      b.keep(f.conv);
      if (f.relu) b.keep(f.bn);
      b.keep(node);
      continue;
    }
    if (skip.has(node.id)) continue;
    b.keep(node);
  }
  return { graph: b.finish(), folds: done };
}
