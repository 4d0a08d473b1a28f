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
 */
import type { DeviceBuffer } from '../../../runtime/accelerator.js';
import type { WebgpuKernel } from '../../../runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../../../tensor/dtype.js';
import { webgpu } from '../device.js';
import { storageKind } from '../storage.js';
import type { FusedGroup } from './group.js';
import { type FusedLayout, layoutRowLength, layoutRows, metaWords } from './layout.js';
import { FUSED_WORKGROUP, type FusedBinding, type FusedStrategy, renderFused, type RenderSpec } from './render.js';

export interface FusedOperand {
  readonly buffer: DeviceBuffer;
  readonly dtype: DType;
}

export interface FusedLaunch {
  readonly kernel: WebgpuKernel;
  readonly source: string;
  readonly buffers: readonly DeviceBuffer[];
  readonly meta: Uint32Array;
  readonly groups: readonly [number, number, number];
}

/** Rendered pipelines by memo key (the caller's group key and the spec). */
const pipelines = new Map<string, { kernel: WebgpuKernel; source: string }>();
const MAX_GROUPS = 65535;

/** Reduce strategy for a layout: one invocation per row for short rows or many rows read across. */
export function pickStrategy(L: FusedLayout, rowRefStride: number): FusedStrategy {
  if (L.kind === 'pointwise') return 'pointwise';
  const M = layoutRows(L);
  const N = layoutRowLength(L);
  if (N <= 32) return 'thread';
  if (M >= 8192 && N <= 1024 && Math.abs(rowRefStride) !== 1) return 'thread';
  return 'workgroup';
}

/**
 * The launch of group `g` over `operands` (outputs first) with layout `L`, or the reason it cannot
 * run as one kernel on this device. `key` names the group's structure (groupKey, or a program's
 * own name for it).
 */
export function prepareFused(g: FusedGroup, operands: readonly FusedOperand[], L: FusedLayout, key: string, label: string): FusedLaunch | string {
  const acc = webgpu();
  const nativeF16 = acc.hasFeature('shader-f16');
  const nOut = g.outputs.length;
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

  const rowRef = L.kind === 'reduce' ? (L.rst[nOut]?.[L.rst[nOut]!.length - 1] ?? 1) : 1;
  const strategy = pickStrategy(L, rowRef);
  const spec: RenderSpec = {
    strategy,
    orank: L.oshape.length,
    rrank: L.kind === 'reduce' ? L.rshape.length : 0,
    bindings,
    operandBinding,
    subgroups: acc.hasFeature('subgroups'),
  };
  const memo = `${key}#${strategy}|${spec.orank}|${spec.rrank}|${bindings.map((b) => `${b.kind}${b.written ? 'w' : ''}`).join(',')}|${operandBinding.join(',')}|${spec.subgroups ? 'sg' : ''}`;
  let p = pipelines.get(memo);
  if (!p) {
    const source = renderFused(g, spec);
    p = { kernel: acc.kernel(source, label), source };
    pipelines.set(memo, p);
  }
  const rows = layoutRows(L);
  const groups = strategy === 'workgroup' ? Math.min(rows, MAX_GROUPS) : Math.min(Math.ceil(rows / FUSED_WORKGROUP), MAX_GROUPS);
  return { kernel: p.kernel, source: p.source, buffers, meta: metaWords(L), groups: [Math.max(groups, 1), 1, 1] };
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
  const rowRef = L.kind === 'reduce' ? (L.rst[nOut]?.[L.rst[nOut]!.length - 1] ?? 1) : 1;
  const spec: RenderSpec = {
    strategy: pickStrategy(L, rowRef),
    orank: L.oshape.length,
    rrank: L.kind === 'reduce' ? L.rshape.length : 0,
    bindings,
    operandBinding: dtypes.map((_, k) => k),
    subgroups: acc.hasFeature('subgroups'),
  };
  return renderFused(g, spec);
}
