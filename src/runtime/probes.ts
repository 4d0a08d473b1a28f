/**
 * Probes for the accelerators that need native dependencies. They look for files and packages only;
 * the real runtimes arrive with their own issues and register loaders here.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { AcceleratorProbe } from './accelerator.js';
import { registerAccelerator } from './registry.js';

const require = createRequire(import.meta.url);

function resolvable(pkg: string): boolean {
  try {
    require.resolve(pkg);
    return true;
  } catch {
    return false;
  }
}

const LIBCUDA_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib64', '/usr/lib', '/usr/local/nvidia/lib64', '/usr/lib/wsl/lib'];

function findLibcuda(): string | undefined {
  const dirs = [...(process.env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean), ...LIBCUDA_DIRS];
  for (const d of dirs) {
    const p = path.join(d, 'libcuda.so.1');
    if (fs.existsSync(p)) return p;
  }
  return undefined;
}

export function probeCuda(): AcceleratorProbe {
  if (process.platform !== 'linux' && process.platform !== 'win32') {
    return { available: false, reason: `no NVIDIA driver on ${process.platform}` };
  }
  const lib = findLibcuda();
  if (!lib) return { available: false, reason: 'NVIDIA driver library libcuda.so.1 not found on the loader path' };
  if (!resolvable('koffi')) return { available: false, reason: `driver found (${lib}) but the koffi package is not installed` };
  return { available: false, reason: `driver found (${lib}); the cuda runtime is not part of this build yet` };
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

registerAccelerator('cuda', { probe: probeCuda, load: notBuilt('cuda', probeCuda) });
registerAccelerator('webgpu', { probe: probeWebgpu, load: notBuilt('webgpu', probeWebgpu) });
