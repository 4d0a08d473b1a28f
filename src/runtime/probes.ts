/**
 * Probes and loaders for the accelerators that need native dependencies. Probes look for files and
 * packages only; loaders bind the native libraries on first use of the device type (importing the
 * cuda runtime loads nothing native: koffi and libcuda are opened by its first driver call).
 */
import { createRequire } from 'node:module';
import type { AcceleratorProbe } from './accelerator.js';
import { registerAccelerator } from './registry.js';
import { CudaAccelerator } from './cuda/cuda-accelerator.js';
import { findLibrary, missingMessage } from './cuda/discover.js';

const require = createRequire(import.meta.url);

function resolvable(pkg: string): boolean {
  try {
    require.resolve(pkg);
    return true;
  } catch {
    return false;
  }
}

export function probeCuda(): AcceleratorProbe {
  if (process.platform !== 'linux') return { available: false, reason: `no NVIDIA driver support on ${process.platform} in this build (Linux only)` };
  const driver = findLibrary('cuda');
  if (!driver.path) return { available: false, reason: missingMessage(driver) };
  if (!resolvable('koffi')) return { available: false, reason: `driver found (${driver.path}) but the koffi package is not installed (npm install koffi)` };
  const compiler = findLibrary('nvrtc');
  if (!compiler.path) return { available: false, reason: `driver found (${driver.path}) but kernels cannot be compiled: ${missingMessage(compiler)}` };
  return { available: true, reason: `driver ${driver.path}, NVRTC ${compiler.path}` };
}

export function probeWebgpu(): AcceleratorProbe {
  if (!resolvable('webgpu')) return { available: false, reason: "the 'webgpu' package (Dawn for Node) is not installed" };
  return { available: false, reason: 'Dawn found; the webgpu runtime is not part of this build yet' };
}

function notBuilt(name: string, probe: () => AcceleratorProbe): () => never {
  return () => {
    throw new Error(`${name}: ${probe().reason}`);
  };
}

registerAccelerator('cuda', { probe: probeCuda, load: () => new CudaAccelerator() });
registerAccelerator('webgpu', { probe: probeWebgpu, load: notBuilt('webgpu', probeWebgpu) });
