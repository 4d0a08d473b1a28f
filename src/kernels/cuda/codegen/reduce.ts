/**
 * The eager cuda reductions as one-node programs of the fused-group renderer (kernels/cuda/fused/):
 * a reduce group (a reduction with its pointwise prologue and per-row epilogue, or a row kernel
 * such as softmax) and its layout give the spec, the config (the compiler's default for that layout,
 * configs.ts) and the source (the compiler's prelude and reduce emitter), so an eager reduction is
 * the kernel the compiler would write for the same group. Pure string and shape logic: runs and is
 * tested without a GPU; reduce-run.ts launches it.
 */
import { createHash } from '../../../platform/index.js';
import type { Param } from '../fused/args.js';
import { type GroupCtx, groupCtx } from '../fused/body.js';
import { type CudaTarget, configTag, defaultReduceConfig, inapplicable, vectorWidthFor } from '../fused/configs.js';
import { emitReduce, type ReduceConfig } from '../fused/emit-reduce.js';
import type { FusedArg, FusedGroup } from '../fused/group.js';
import { prelude } from '../fused/prelude.js';
import { type KernelLayout, type KernelSpec, specKey } from '../fused/spec.js';

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
