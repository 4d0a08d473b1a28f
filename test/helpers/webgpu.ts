/**
 * Whether a test can compute on webgpu here: a real adapter (Dawn on a GPU, or on SwiftShader's CPU
 * Vulkan driver), not Dawn's null backend, which encodes and validates but computes nothing.
 * Returns the skip reason, or false.
 */
import * as kiln from '../../src/index.js';

export function webgpuSkipReason(): string | false {
  const probe = kiln.probeAccelerators().find((p) => p.type === 'webgpu');
  if (!probe?.available) return `no webgpu adapter: ${probe?.reason ?? 'webgpu not registered'}`;
  if (kiln.getAccelerator('webgpu').properties(0).backend === 'null') return "Dawn's null backend computes nothing (KILN_WEBGPU_BACKEND=null)";
  return false;
}
