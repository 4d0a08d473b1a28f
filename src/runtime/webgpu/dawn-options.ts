/**
 * What Kiln asks Dawn for (measured on the H200 through Vulkan, ../shared/notes/gpu-facts.md):
 * without these toggles Dawn's default adapter hides shader-f16 and subgroup matrices on NVIDIA and
 * quantizes timestamps to 65536 ns. `allow_unsafe_apis` exposes the experimental features; nothing
 * Kiln does relies on an unsafe API being unchecked. Shader robustness is off unless
 * KILN_WEBGPU_ROBUSTNESS=1 (see dawnToggles).
 */
import { getOption } from '../config.js';

export const DAWN_TOGGLES: readonly string[] = [
  'enable-dawn-features=vulkan_enable_f16_on_nvidia,allow_unsafe_apis',
  'disable-dawn-features=timestamp_quantization',
];

/** Requested when the adapter offers them; kernels check the device's features before use. */
export const WANTED_FEATURES: readonly string[] = ['shader-f16', 'subgroups', 'timestamp-query', 'chromium-experimental-subgroup-matrix'];

/**
 * DAWN_TOGGLES with KILN_WEBGPU_DAWN_TOGGLES merged in: its comma-separated names are enabled, names
 * with a leading '-' disabled (Dawn reads one enable and one disable list, so they join ours).
 */
export function dawnToggles(extra: string | undefined = getOption('KILN_WEBGPU_DAWN_TOGGLES'), robustness: boolean = getOption('KILN_WEBGPU_ROBUSTNESS')): string[] {
  // Robustness (bounds clamping of every buffer access in every shader) protects a browser from
  // untrusted WGSL; in Node every shader is Kiln's own, as every CUDA kernel is. Off by default:
  // on the H200 it cost 44% of the float16 subgroup-matrix GEMM (8192^3: 103.9 -> 183.9 TFLOP/s,
  // bench/results/h200-s14-webgpu-gemm-plans-2026-12-03.json). KILN_WEBGPU_ROBUSTNESS=1 keeps it.
  const names = [...(robustness ? [] : ['disable_robustness']), ...(extra ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')];
  for (const n of names) if (!/^-?[a-z0-9_]+$/.test(n)) throw new RangeError(`KILN_WEBGPU_DAWN_TOGGLES: ${JSON.stringify(n)} is not a Dawn toggle name (lower-case words joined by '_', '-' in front to disable), in ${JSON.stringify(extra)}`);
  const add = (flag: string, more: string[]): string => (more.length === 0 ? flag : `${flag},${more.join(',')}`);
  const on = names.filter((n) => !n.startsWith('-'));
  const off = names.filter((n) => n.startsWith('-')).map((n) => n.slice(1));
  return DAWN_TOGGLES.map((t) => (t.startsWith('enable-dawn-features=') ? add(t, on) : t.startsWith('disable-dawn-features=') ? add(t, off) : t));
}

/** Dawn's `create` options for the configured backend (KILN_WEBGPU_BACKEND) and toggles (dawnToggles). */
export function dawnOptions(): string[] {
  const backend = getOption('KILN_WEBGPU_BACKEND');
  const toggles = dawnToggles();
  return backend === 'auto' ? toggles : [`backend=${backend}`, ...toggles];
}
