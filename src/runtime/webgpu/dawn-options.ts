/**
 * What Kiln asks Dawn for (measured on the H200 through Vulkan, ../shared/notes/gpu-facts.md):
 * without these toggles Dawn's default adapter hides shader-f16 and subgroup matrices on NVIDIA and
 * quantizes timestamps to 65536 ns. `allow_unsafe_apis` exposes the experimental features; nothing
 * Kiln does relies on an unsafe API being unchecked.
 */
import { getOption } from '../config.js';

export const DAWN_TOGGLES: readonly string[] = [
  'enable-dawn-features=vulkan_enable_f16_on_nvidia,allow_unsafe_apis',
  'disable-dawn-features=timestamp_quantization',
];

/** Requested when the adapter offers them; kernels check the device's features before use. */
export const WANTED_FEATURES: readonly string[] = ['shader-f16', 'subgroups', 'timestamp-query', 'chromium-experimental-subgroup-matrix'];

/** Dawn's `create` options for the configured backend (KILN_WEBGPU_BACKEND). */
export function dawnOptions(): string[] {
  const backend = getOption('KILN_WEBGPU_BACKEND');
  return backend === 'auto' ? [...DAWN_TOGGLES] : [`backend=${backend}`, ...DAWN_TOGGLES];
}
