/**
 * Probes and loaders for the accelerators that need native dependencies. Probes look for files and
 * packages only; loaders bind the native libraries on first use of the device type (importing the
 * cuda runtime loads nothing native: koffi and libcuda are opened by its first driver call). The
 * webgpu probe is the exception: only Dawn can say whether an adapter exists, so it opens Dawn on a
 * worker thread (once per process; the loader reuses it).
 */
import { inNode, nodeModule } from '../platform/index.js';
import type { AcceleratorProbe } from './accelerator.js';
import { registerAccelerator } from './registry.js';
import { CudaAccelerator } from './cuda/cuda-accelerator.js';
import { findLibrary, missingMessage } from './cuda/discover.js';
import { describeAdapter, openDawn } from './webgpu/open.js';
import { WebgpuAccelerator } from './webgpu/webgpu-accelerator.js';

function resolvable(pkg: string): boolean {
  try {
    nodeModule.createRequire(import.meta.url).resolve(pkg);
    return true;
  } catch {
    return false;
  }
}

export function probeCuda(): AcceleratorProbe {
  if (!inNode) return { available: false, reason: 'CUDA needs Node (the driver is reached through koffi FFI); not available in a browser' };
  if (process.platform !== 'linux') return { available: false, reason: `no NVIDIA driver support on ${process.platform} in this build (Linux only)` };
  const driver = findLibrary('cuda');
  if (!driver.path) return { available: false, reason: missingMessage(driver) };
  if (!resolvable('koffi')) return { available: false, reason: `driver found (${driver.path}) but the koffi package is not installed (npm install koffi)` };
  const compiler = findLibrary('nvrtc');
  if (!compiler.path) return { available: false, reason: `driver found (${driver.path}) but kernels cannot be compiled: ${missingMessage(compiler)}` };
  return { available: true, reason: `driver ${driver.path}, NVRTC ${compiler.path}` };
}

export function probeWebgpu(): AcceleratorProbe {
  if (inNode && !resolvable('webgpu')) return { available: false, reason: "the 'webgpu' package (Dawn for Node) is not installed" };
  // Only Dawn knows whether there is an adapter: the probe opens it (once; the loader reuses it).
  const d = openDawn();
  if ('error' in d) return { available: false, reason: inNode ? `Dawn loaded but ${d.error.message}` : d.error.message };
  return { available: true, reason: describeAdapter(d.bridge) };
}

function loadWebgpu(): WebgpuAccelerator {
  if (inNode && !resolvable('webgpu')) throw new Error("the 'webgpu' package (Dawn for Node) is not installed (npm install webgpu)");
  const d = openDawn();
  if ('error' in d) throw d.error;
  return new WebgpuAccelerator(d.bridge);
}

registerAccelerator('cuda', { probe: probeCuda, load: () => new CudaAccelerator() });
registerAccelerator('webgpu', { probe: probeWebgpu, load: loadWebgpu });
