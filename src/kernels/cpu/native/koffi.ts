/**
 * The slice of koffi the native path uses, loaded synchronously (koffi is CommonJS) and only on
 * first use, so a missing or broken koffi makes the native path unavailable instead of breaking
 * the import of the CPU kernels.
 */
import { nodeModule } from '../../../platform/index.js';

export type NativeFn = (...args: unknown[]) => unknown;

export interface KoffiLib {
  func(signature: string): NativeFn;
  unload(): void;
}

interface KoffiModule {
  load(path: string, options?: { global?: boolean }): KoffiLib;
}

let mod: KoffiModule | undefined;
let failure: string | undefined;

/** The koffi module, or throws an Error that says why it cannot be loaded. */
export function koffi(): KoffiModule {
  if (mod) return mod;
  if (failure !== undefined) throw new Error(failure);
  try {
    mod = nodeModule.createRequire(import.meta.url)('koffi') as KoffiModule;
    return mod;
  } catch (e) {
    failure = `the koffi package cannot be loaded (${(e as Error).message})`;
    throw new Error(failure);
  }
}

const libs = new Map<string, KoffiLib>();

/**
 * OpenMP waits passively (threads sleep on a futex at the end of a region instead of spinning)
 * unless the user chose a policy. Measured on the shared 2-core machine under load ~9:
 * compiled mlp-64x512 1.33 ms passive vs 32-60 ms with libgomp's default spinning (and 2.7 ms
 * with GOMP_SPINCOUNT=1000): a spinning worker steals the core the other thread needs. On an idle
 * machine passive costs a futex wake per parallel region (microseconds). libgomp reads the
 * variable when the first OpenMP object is loaded, so it is set before the first dlopen.
 */
function defaultOpenMpPolicy(): void {
  if (process.env.OMP_WAIT_POLICY === undefined && process.env.GOMP_SPINCOUNT === undefined) process.env.OMP_WAIT_POLICY = 'PASSIVE';
}

/** dlopen()s a shared object once per process (`global`: RTLD_GLOBAL, its symbols visible to objects loaded later). */
export function loadLibrary(file: string, options: { global?: boolean } = {}): KoffiLib {
  let lib = libs.get(file);
  if (!lib) {
    defaultOpenMpPolicy();
    try {
      lib = options.global ? koffi().load(file, { global: true }) : koffi().load(file);
    } catch (e) {
      throw new Error(`native cpu path: cannot load shared object ${file}: ${(e as Error).message}`, { cause: e });
    }
    libs.set(file, lib);
  }
  return lib;
}
