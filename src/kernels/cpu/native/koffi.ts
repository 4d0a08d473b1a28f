/**
 * The slice of koffi the native path uses, loaded synchronously (koffi is CommonJS) and only on
 * first use, so a missing or broken koffi makes the native path unavailable instead of breaking
 * the import of the CPU kernels.
 */
import { createRequire } from 'node:module';

export type NativeFn = (...args: unknown[]) => unknown;

export interface KoffiLib {
  func(signature: string): NativeFn;
  unload(): void;
}

interface KoffiModule {
  load(path: string): KoffiLib;
}

let mod: KoffiModule | undefined;
let failure: string | undefined;

/** The koffi module, or throws an Error that says why it cannot be loaded. */
export function koffi(): KoffiModule {
  if (mod) return mod;
  if (failure !== undefined) throw new Error(failure);
  try {
    mod = createRequire(import.meta.url)('koffi') as KoffiModule;
    return mod;
  } catch (e) {
    failure = `the koffi package cannot be loaded (${(e as Error).message})`;
    throw new Error(failure);
  }
}

const libs = new Map<string, KoffiLib>();

/** dlopen()s a shared object once per process. */
export function loadLibrary(file: string): KoffiLib {
  let lib = libs.get(file);
  if (!lib) {
    try {
      lib = koffi().load(file);
    } catch (e) {
      throw new Error(`native cpu path: cannot load shared object ${file}: ${(e as Error).message}`, { cause: e });
    }
    libs.set(file, lib);
  }
  return lib;
}
