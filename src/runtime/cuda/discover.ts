/**
 * Finds the CUDA shared libraries Kiln needs: libcuda (the driver), libnvrtc (runtime compiler) and
 * libcublasLt (GEMM). Looked for in order: $CUDA_HOME / $CUDA_PATH, /usr/local/cuda, the loader path
 * ($LD_LIBRARY_PATH and the usual system folders), then the folders of NVIDIA's pip wheels
 * (nvidia-cuda-nvrtc, nvidia-cublas, the CUDA 13 'nvidia/cu13' layout) under any Python found.
 * A library found nowhere is still tried by bare name (the dynamic loader's cache may know it); the
 * message for a missing one lists every folder that was searched.
 */
import { env as platformEnv, fs, os, path } from '../../platform/index.js';

export type CudaLibrary = 'cuda' | 'nvrtc' | 'cublasLt';

/** Sonames newest first: CUDA 13, then 12 (Kiln uses only calls both provide). */
const SONAMES: Record<CudaLibrary, readonly string[]> = {
  cuda: ['libcuda.so.1', 'libcuda.so'],
  nvrtc: ['libnvrtc.so.13', 'libnvrtc.so.12', 'libnvrtc.so'],
  cublasLt: ['libcublasLt.so.13', 'libcublasLt.so.12', 'libcublasLt.so'],
};

const WHEEL_SUBDIRS: Record<CudaLibrary, readonly string[]> = {
  cuda: [],
  nvrtc: ['nvidia/cu13/lib', 'nvidia/cuda_nvrtc/lib'],
  cublasLt: ['nvidia/cu13/lib', 'nvidia/cublas/lib'],
};

const SYSTEM_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib', '/usr/local/nvidia/lib64', '/usr/lib/wsl/lib'];

export interface DiscoverEnv {
  env: Record<string, string | undefined>;
  exists(p: string): boolean;
  /** Lists a folder's entries ([] when it cannot be read). */
  list(dir: string): string[];
  home: string;
}

export const realEnv: DiscoverEnv = {
  env: platformEnv,
  exists: (p) => fs.existsSync(p),
  list: (d) => {
    try {
      return fs.readdirSync(d);
    } catch {
      return [];
    }
  },
  get home() {
    return os.homedir();
  },
};

function toolkitDirs(e: DiscoverEnv): string[] {
  const roots = [e.env.CUDA_HOME, e.env.CUDA_PATH, '/usr/local/cuda'].filter((r): r is string => r !== undefined && r !== '');
  const out: string[] = [];
  for (const r of roots) out.push(path.join(r, 'lib64'), path.join(r, 'lib'), path.join(r, 'targets/x86_64-linux/lib'), path.join(r, 'targets/sbsa-linux/lib'));
  return out;
}

/** site-packages / dist-packages folders of the Pythons we can see (virtualenv first). */
export function pythonSiteDirs(e: DiscoverEnv): string[] {
  const libRoots: string[] = [];
  if (e.env.VIRTUAL_ENV) libRoots.push(path.join(e.env.VIRTUAL_ENV, 'lib'));
  if (e.env.CONDA_PREFIX) libRoots.push(path.join(e.env.CONDA_PREFIX, 'lib'));
  libRoots.push(path.join(e.home, '.local/lib'), '/usr/local/lib', '/usr/lib');
  for (const opt of e.list('/opt')) libRoots.push(path.join('/opt', opt, '.venv/lib'), path.join('/opt', opt, 'lib'));
  const out: string[] = [];
  for (const root of libRoots) {
    for (const py of e.list(root)) {
      if (!/^python3(\.\d+)?$/.test(py)) continue;
      for (const kind of ['site-packages', 'dist-packages']) {
        const d = path.join(root, py, kind);
        if (e.exists(d)) out.push(d);
      }
    }
  }
  return out;
}

/** Folders searched for `lib`, in order. */
export function searchDirs(lib: CudaLibrary, e: DiscoverEnv = realEnv): string[] {
  const dirs: string[] = [];
  if (lib !== 'cuda') dirs.push(...toolkitDirs(e));
  dirs.push(...(e.env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean), ...SYSTEM_DIRS);
  for (const site of pythonSiteDirs(e)) for (const sub of WHEEL_SUBDIRS[lib]) dirs.push(path.join(site, sub));
  return [...new Set(dirs)];
}

export interface Found {
  lib: CudaLibrary;
  /** A full path, or undefined when no folder had it. */
  path: string | undefined;
  /** What to hand to dlopen: the path, else the sonames to try by bare name. */
  candidates: string[];
  searched: string[];
}

export function findLibrary(lib: CudaLibrary, e: DiscoverEnv = realEnv): Found {
  const searched = searchDirs(lib, e);
  for (const d of searched) {
    for (const so of SONAMES[lib]) {
      const p = path.join(d, so);
      if (e.exists(p)) return { lib, path: p, candidates: [p], searched };
    }
  }
  return { lib, path: undefined, candidates: [...SONAMES[lib]], searched };
}

const WHAT: Record<CudaLibrary, string> = {
  cuda: 'the NVIDIA driver library libcuda.so.1 (install the NVIDIA driver)',
  nvrtc: 'the CUDA runtime compiler libnvrtc.so.13/.12 (install the CUDA toolkit, or pip install nvidia-cuda-nvrtc, and/or set CUDA_HOME)',
  cublasLt: 'cuBLASLt libcublasLt.so.13/.12 (install the CUDA toolkit, or pip install nvidia-cublas, and/or set CUDA_HOME)',
};

/** A message saying what is missing and where it was looked for. */
export function missingMessage(found: Found, loadError?: string): string {
  const dirs = found.searched.length > 6 ? `${found.searched.slice(0, 6).join(', ')} and ${found.searched.length - 6} more` : found.searched.join(', ');
  return `cannot load ${WHAT[found.lib]}: not found in ${dirs}${loadError ? ` (dlopen: ${loadError})` : ''}`;
}
