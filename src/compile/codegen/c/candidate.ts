/**
 * The hook that adds a native C candidate to a pointwise kernel's candidates (codegen/js/emit.ts)
 * when the native CPU path is active (kernels/cpu/native/path.ts). The candidate keeps the JS
 * source as its fallback, like the Wasm candidate does.
 */
import type { Lowered } from '../../lower/lower.js';
import type { KernelGroup } from '../../lower/schedule.js';
import { cpuPath } from '../../../kernels/cpu/native/path.js';
import { cPointwiseKernel, type NativePointwise } from './pointwise.js';
import { cReductionKernel } from './reduction.js';

export interface NativeCandidate {
  readonly config: { readonly impl: 'native'; readonly scratch?: false };
  readonly source: string;
  readonly native: NativePointwise;
}

/** [the native candidate] for a float32 pointwise group on the native path, else []. */
export function nativePointwiseCandidates(g: KernelGroup, low: Lowered, jsSource: string): NativeCandidate[] {
  if (cpuPath() !== 'native') return [];
  const k = cPointwiseKernel(g, low);
  return k ? [{ config: { impl: 'native' }, source: jsSource, native: k }] : [];
}

/** [the native candidate] for a float32 row-reduction group on the native path, else []. */
export function nativeReductionCandidates(g: KernelGroup, low: Lowered, jsSource: string): NativeCandidate[] {
  if (cpuPath() !== 'native') return [];
  const k = cReductionKernel(g, low);
  return k ? [{ config: { impl: 'native', scratch: false }, source: jsSource, native: k }] : [];
}
