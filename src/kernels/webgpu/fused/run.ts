/**
 * Launching a fused group on the webgpu accelerator: operands become bindings (one per distinct
 * buffer and storage form, outputs first; WebGPU forbids binding a written buffer twice), the
 * layout becomes metadata words, the strategy is picked from the layout, and the pipeline for the
 * rendered source is compiled once (memoised by the caller's key and the spec, so a repeated call
 * renders no WGSL) and launched through the accelerator's kernel ABI (launchKernel).
 *
 * `prepareFused` says why a launch cannot be made (too many bindings for the device, a buffer over
 * the binding size limit) instead of throwing, so the compiled program can run such a group node
 * by node through dispatch; the eager kernels throw the reason.
 *
 * Configs: the eager kernels take the default (`defaultConfig`: the strategy pickStrategy chooses,
 * FUSED_WORKGROUP invocations); the compiled program may ask for any of `fusedCandidates` (the
 * workgroup size, and for reductions one row per workgroup or one row per invocation, i.e. the
 * rows a workgroup handles), which its autotuner times. Every candidate computes the same values.
 * Pointwise launches run vectorised where the layout allows (vector.ts: the plan is part of the
 * spec and of the memo key, and a step covers V elements, so V times fewer invocations are launched).
 * A launch names its memo key (`FusedLaunch.memo`), under which a compiled program stores the
 * source on disk and `adoptFused` seeds it in a later process (no render, an async pipeline).
 */
import type { DeviceBuffer } from '../../../runtime/accelerator.js';
import type { WebgpuKernel } from '../../../runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../../../tensor/dtype.js';
import { webgpu } from '../device.js';
import { storageKind } from '../storage.js';
import type { FusedGroup } from './group.js';
import { type FusedLayout, layoutRowLength, layoutRows, metaWords } from './layout.js';
import { FUSED_WORKGROUP, type FusedBinding, type FusedStrategy, renderFused, type RenderSpec, workgroupOf } from './render.js';
import { planKey, vectorPlan } from './vector.js';
import { wgslMathKey } from '../../math/wgsl-libm/index.js';
import { f16StoreKey } from '../f16-store-probe.js';
import { getOption } from '../../../runtime/config.js';

export interface FusedOperand {
  readonly buffer: DeviceBuffer;
  readonly dtype: DType;
}

export interface FusedLaunch {
  readonly kernel: WebgpuKernel;
  readonly source: string;
  /** The pipeline's memo key (the caller's group key, the spec, the config). */
  readonly memo: string;
  readonly config: FusedConfig;
  readonly buffers: readonly DeviceBuffer[];
  readonly meta: Uint32Array;
  readonly groups: readonly [number, number, number];
  /** An input is bound to a buffer the kernel writes (running it twice would not compute the same). */
  readonly writesInput: boolean;
}

/** How a group is launched: what of the source is a choice rather than a consequence of the layout. */
export interface FusedConfig {
  readonly strategy: FusedStrategy;
  /** Invocations per workgroup (a power of two, at most the device's maxComputeInvocationsPerWorkgroup). */
  readonly workgroup: number;
}

/** Rendered pipelines by memo key (the caller's group key and the spec). */
const pipelines = new Map<string, { kernel: WebgpuKernel; source: string }>();
const MAX_GROUPS = 65535;

/**
 * Workgroups of a vectorised pointwise launch. The loop is grid-stride, so fewer groups than
 * vectors compute the same; where every binding is float16 the kernel does float32 math over half
 * the bytes and is bound by its instructions, and fewer, fuller workgroups ran faster on an H100
 * (elementwise-4096 float16: 16384 groups 0.0419 ms, 8192 0.0384, 4096 0.0383; float32 best at
 * 16384: bench/results/h100-s35-ew-2026-12-07.json, `--grid`): KILN_WEBGPU_VEC16_GROUPS caps them.
 */
export function vectorGroups(needed: number, bindings: readonly FusedBinding[]): number {
  // Native float16 bindings only: that is what was measured (the packed forms without shader-f16
  // and bfloat16 have the same profile but no measurement yet).
  const halfOnly = bindings.every((b) => b.kind === 'f16');
  return Math.min(needed, halfOnly ? getOption('KILN_WEBGPU_VEC16_GROUPS') : MAX_GROUPS, MAX_GROUPS);
}

/** Sources rendered and pipelines compiled here, those adopted from a disk cache, and launches prepared vectorised (tests count them). */
export const fusedStats = { rendered: 0, adopted: 0, vectorised: 0 };

/**
 * Seeds the memo with a source rendered by an earlier process (a compiled program's disk entry):
 * its pipeline is created asynchronously (kernelAsync), and a launch under `memo` renders nothing.
 */
export function adoptFused(memo: string, source: string, label: string): void {
  if (pipelines.has(memo)) return;
  pipelines.set(memo, { kernel: webgpu().kernelAsync(source, label), source });
  fusedStats.adopted++;
}

/** Reduce strategy for a layout: one invocation per row for short rows or many rows read across. */
export function pickStrategy(L: FusedLayout, rowRefStride: number): FusedStrategy {
  if (L.kind === 'pointwise') return 'pointwise';
  const M = layoutRows(L);
  const N = layoutRowLength(L);
  if (N <= 32) return 'thread';
  if (M >= 8192 && N <= 1024 && Math.abs(rowRefStride) !== 1) return 'thread';
  return 'workgroup';
}

/** The reduce row's reference stride (the first input's innermost row stride) that pickStrategy reads. */
function rowRefStride(L: FusedLayout, nOut: number): number {
  return L.kind === 'reduce' ? (L.rst[nOut]?.[L.rst[nOut]!.length - 1] ?? 1) : 1;
}

/** The config the eager kernels use, and the compiled program without tuning. */
export function defaultConfig(L: FusedLayout, nOut: number): FusedConfig {
  return { strategy: pickStrategy(L, rowRefStride(L, nOut)), workgroup: FUSED_WORKGROUP };
}

/** Workgroup sizes the autotuner tries (those the device allows). */
const WORKGROUP_SIZES = [64, 128, 256] as const;

/**
 * The configs a compiled program may launch a group with, the default first: each workgroup size
 * the device allows, and for reductions both strategies (one row per workgroup, one row per
 * invocation). Rows too short for a workgroup (N <= 32) stay one per invocation.
 */
export function fusedCandidates(L: FusedLayout, nOut: number): FusedConfig[] {
  const first = defaultConfig(L, nOut);
  const maxInv = webgpu().bridge.adapter.limits.maxComputeInvocationsPerWorkgroup ?? FUSED_WORKGROUP;
  const sizes = WORKGROUP_SIZES.filter((w) => w <= maxInv);
  const strategies: FusedStrategy[] = L.kind === 'pointwise' ? ['pointwise'] : layoutRowLength(L) <= 32 ? ['thread'] : ['workgroup', 'thread'];
  const out: FusedConfig[] = [first];
  for (const strategy of strategies) for (const workgroup of sizes) if (strategy !== first.strategy || workgroup !== first.workgroup) out.push({ strategy, workgroup });
  return out;
}

/**
 * Operands (outputs first) as bindings: one per distinct buffer and storage form. The reason they
 * cannot be bound by this device, if they cannot (then the group runs node by node).
 */
export function bindFused(operands: readonly FusedOperand[], nOut: number): { bindings: FusedBinding[]; buffers: DeviceBuffer[]; operandBinding: number[] } | string {
  const acc = webgpu();
  const nativeF16 = acc.hasFeature('shader-f16');
  const bindings: FusedBinding[] = [];
  const buffers: DeviceBuffer[] = [];
  const operandBinding: number[] = [];
  for (let k = 0; k < operands.length; k++) {
    const o = operands[k]!;
    const written = k < nOut;
    const kind = o.dtype === 'int64' && written ? 'i64' : storageKind(o.dtype, nativeF16);
    if (kind === null) return `dtype ${o.dtype} has no WGSL storage form`;
    let b = buffers.findIndex((x, i) => x === o.buffer && bindings[i]!.kind === kind && (!written || !bindings[i]!.written));
    if (b >= 0 && written) return 'two outputs share a buffer';
    if (b < 0) {
      if (buffers.some((x, i) => x === o.buffer && (written || bindings[i]!.written))) return 'an input shares a written buffer in another storage form';
      b = buffers.length;
      buffers.push(o.buffer);
      bindings.push({ kind, written });
    }
    operandBinding.push(b);
  }
  const limits = acc.bridge.adapter.limits;
  const maxBindings = (limits.maxStorageBuffersPerShaderStage ?? 8) - 1;
  if (bindings.length > maxBindings) return `${bindings.length} storage buffers (the device binds ${maxBindings} besides the metadata)`;
  const maxBinding = limits.maxStorageBufferBindingSize ?? 2 ** 27;
  for (const b of buffers) if (b.capacity > maxBinding) return `a buffer of ${b.capacity} bytes exceeds maxStorageBufferBindingSize (${maxBinding})`;
  return { bindings, buffers, operandBinding };
}

/**
 * The launch of group `g` over `operands` (outputs first) with layout `L`, or the reason it cannot
 * run as one kernel on this device. `key` names the group's structure (groupKey, or a program's
 * own name for it); `config` defaults to defaultConfig.
 */
export function prepareFused(g: FusedGroup, operands: readonly FusedOperand[], L: FusedLayout, key: string, label: string, config?: FusedConfig): FusedLaunch | string {
  const bound = bindFused(operands, g.outputs.length);
  if (typeof bound === 'string') return bound;
  const { bindings, buffers, operandBinding } = bound;
  const acc = webgpu();
  const nOut = g.outputs.length;
  const cfg = config ?? defaultConfig(L, nOut);
  const strategy = cfg.strategy;
  const vector = strategy === 'pointwise' ? vectorPlan(L, nOut, bindings, operandBinding, buffers.map((b) => b.capacity)) : null;
  const spec: RenderSpec = {
    strategy,
    orank: L.oshape.length,
    rrank: L.kind === 'reduce' ? L.rshape.length : 0,
    bindings,
    operandBinding,
    subgroups: acc.hasFeature('subgroups'),
    workgroup: cfg.workgroup,
    ...(vector ? { vector } : {}),
    ...reduceForm(strategy, L, cfg.workgroup),
  };
  const W = workgroupOf(spec);
  const memo = `${key}#${strategy}|${spec.orank}|${spec.rrank}|${bindings.map((b) => `${b.kind}${b.written ? 'w' : ''}`).join(',')}|${operandBinding.join(',')}|${spec.subgroups ? 'sg' : ''}${W === FUSED_WORKGROUP ? '' : `|w${W}`}${spec.unroll === undefined ? '' : `|u${spec.unroll}`}${spec.resident === undefined ? '' : `|r${spec.resident}`}${planKey(vector)}${wgslMathKey()}${f16StoreKey()}`;
  let p = pipelines.get(memo);
  if (!p) {
    const source = renderFused(g, spec);
    fusedStats.rendered++;
    p = { kernel: acc.kernel(source, label), source };
    pipelines.set(memo, p);
  }
  if (vector) fusedStats.vectorised++;
  const rows = layoutRows(L);
  const perGroup = W * (vector ? vector.vec * vector.steps : 1);
  const groups = strategy === 'workgroup' ? Math.min(rows, MAX_GROUPS) : vector ? vectorGroups(Math.ceil(rows / perGroup), bindings) : Math.min(Math.ceil(rows / perGroup), MAX_GROUPS);
  const writesInput = operandBinding.some((b, k) => k >= nOut && bindings[b]!.written);
  return { kernel: p.kernel, source: p.source, memo, config: cfg, buffers, meta: metaWords(L), groups: [Math.max(groups, 1), 1, 1], writesInput };
}

/**
 * How a 'workgroup' reduction walks its row (options read per launch: a bench may switch them):
 * register-resident (`resident`: each of the W invocations holds ceil(N / W) elements) where the
 * row has at most KILN_WEBGPU_REDUCE_REGISTERS * W elements, else KILN_WEBGPU_REDUCE_UNROLL
 * elements per loop step above one, else the strided loop. A resident count is part of the
 * pipeline's key (at most KILN_WEBGPU_REDUCE_REGISTERS sources per group structure and workgroup).
 */
export function reduceForm(strategy: FusedStrategy, L: FusedLayout, workgroup: number): { unroll?: number; resident?: number } {
  if (strategy !== 'workgroup') return {};
  const N = layoutRowLength(L);
  const maxRegisters = getOption('KILN_WEBGPU_REDUCE_REGISTERS');
  if (N >= 1 && N <= maxRegisters * workgroup) return { resident: Math.ceil(N / workgroup) };
  const u = getOption('KILN_WEBGPU_REDUCE_UNROLL');
  return u > 1 ? { unroll: u } : {};
}

/** Queues a prepared launch (nothing for an empty iteration space). */
export function launchFused(l: FusedLaunch, L: FusedLayout): void {
  if (layoutRows(L) === 0) return;
  webgpu().launchKernel(l.kernel, l.buffers, { meta: l.meta, groups: l.groups });
}

/** The source group `g` would run with layout `L` if every operand had a buffer of its own (describe()). */
export function renderDistinct(g: FusedGroup, dtypes: readonly DType[], L: FusedLayout): string {
  const acc = webgpu();
  const nOut = g.outputs.length;
  const bindings = dtypes.map((dt, k): FusedBinding => ({ kind: dt === 'int64' && k < nOut ? 'i64' : (storageKind(dt, acc.hasFeature('shader-f16')) ?? 'f32'), written: k < nOut }));
  const operandBinding = dtypes.map((_, k) => k);
  const vector = vectorPlan(L, nOut, bindings, operandBinding, null);
  const strategy = pickStrategy(L, rowRefStride(L, nOut));
  const spec: RenderSpec = {
    strategy,
    orank: L.oshape.length,
    rrank: L.kind === 'reduce' ? L.rshape.length : 0,
    bindings,
    operandBinding,
    subgroups: acc.hasFeature('subgroups'),
    ...(vector ? { vector } : {}),
    ...reduceForm(strategy, L, FUSED_WORKGROUP),
  };
  return renderFused(g, spec);
}
