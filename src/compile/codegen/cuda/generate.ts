/**
 * Entry point of the CUDA generator: one kernel group (from the scheduler) and the layout of a call
 * become a set of candidate variants, one per config. Each variant is complete: CUDA C source
 * (prelude + one or two `extern "C"` kernels), the kernels' names and packed argument layouts,
 * the NVRTC options the source needs, and a function giving grid / block / shared memory /
 * workspace for any layout with the same spec. Sizes are never baked in: the spec (ranks,
 * broadcast and unit strides, dtypes, index width) is, so a program generates once per spec.
 */
import type { ValueId, ValueInfo } from '../../ir.js';
import type { Lowered } from '../../lower/lower.js';
import type { KernelGroup } from '../../lower/schedule.js';
import { type ArgLayout, argLayout } from '../../../kernels/cuda/fused/args.js';
import { groupCtx } from '../../../kernels/cuda/fused/body.js';
import { type CudaKernelConfig, type CudaTarget, configSpace, configTag, inapplicable, type LaunchPlan, launchPlan, type ReduceShape, reduceShape } from './configs.js';
import { emitPointwise } from '../../../kernels/cuda/fused/emit-pointwise.js';
import { emitReduce } from '../../../kernels/cuda/fused/emit-reduce.js';
import { fusedGroup } from './group.js';
import { type KernelLayout, type KernelSpec, kernelSpec, specKey } from './layout.js';
import { nvrtcOptions, prelude } from '../../../kernels/cuda/fused/prelude.js';

export interface CudaKernelEntry {
  /** `extern "C"` name in the source. */
  readonly name: string;
  readonly args: ArgLayout;
}

export interface CudaVariant {
  readonly config: CudaKernelConfig;
  /** Full translation unit: prelude and kernels. */
  readonly source: string;
  /** The kernels alone (for batching many variants behind one prelude). */
  readonly body: string;
  readonly kernels: readonly CudaKernelEntry[];
  readonly nvrtcOptions: readonly string[];
  /** Why this variant cannot run layout L, or null. */
  inapplicable(L: KernelLayout): string | null;
  /** Launch geometry for layout L. */
  plan(L: KernelLayout): LaunchPlan;
}

export interface CudaKernelCode {
  readonly name: string;
  readonly group: KernelGroup;
  readonly spec: KernelSpec;
  readonly specKey: string;
  /** One per config; the first is the default. */
  readonly candidates: readonly CudaVariant[];
}

/** Generates every config of group `g` for the spec of layout `L`. */
export function generateCudaKernel(g: KernelGroup, low: Lowered, L: KernelLayout, name: string, target: CudaTarget): CudaKernelCode {
  const info = (id: ValueId): ValueInfo => low.values.get(id)!;
  const spec = kernelSpec(L);
  const c = groupCtx(fusedGroup(g, info), spec);
  let shape: ReduceShape | undefined;
  // Sources are generated on first use: outside max-autotune a program reads only the chosen
  // config's (and a fallback's), and generating every candidate of every kernel was most of a
  // warm start (about 0.5 s of qwen3-0.6b's 1.5 s, measured on the H200 machine).
  const candidates = configSpace(c, L, target).map((config): CudaVariant => {
    const kname = `${name}_${configTag(config)}`;
    let emitted: { name: string; source: string; params: Parameters<typeof argLayout>[0] }[] | undefined;
    const emit = (): NonNullable<typeof emitted> => (emitted ??= config.kind === 'pointwise' ? [emitPointwise(c, kname, config)] : emitReduce(c, kname, config).kernels);
    let body: string | undefined;
    let kernels: CudaKernelEntry[] | undefined;
    return {
      config,
      get body() {
        return (body ??= emit().map((k) => k.source).join('\n\n'));
      },
      get source() {
        return `${prelude(target.halfMode)}\n${this.body}\n`;
      },
      get kernels() {
        return (kernels ??= emit().map((k) => ({ name: k.name, args: argLayout(k.params) })));
      },
      nvrtcOptions: nvrtcOptions(target.arch, target.halfMode),
      inapplicable: (L2) => inapplicable(config, spec, L2),
      plan: (L2) => launchPlan(config, spec, L2, target, (shape ??= reduceShape(c))),
    };
  });
  return { name, group: g, spec, specKey: specKey(spec), candidates };
}
