/**
 * Compile task 'wasm-kernel' for the worker pool: validates and compiles a generated module
 * (WebAssembly.validate, then new WebAssembly.Module, which reports the failing function and byte
 * offset), so a broken generator fails in the pool with a diagnostic, as JS kernels do, and the
 * main thread only instantiates modules known to compile.
 */
import { createHash } from '../../../platform/index.js';
import { wasmApi } from '../../../kernels/cpu/wasm-asm.js';

export interface WasmKernelPayload {
  readonly bytes: Uint8Array;
  readonly name: string;
}

export type WasmKernelResult = { ok: true; name: string; hash: string } | { ok: false; name: string; error: string };

/** sha256 (hex) of a module's bytes. */
export function wasmBytesHash(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The 'wasm-kernel' handler. Throws only for a malformed payload; invalid modules are reported in the result. */
export function wasmKernelTask(payload: unknown): WasmKernelResult {
  const p = payload as Partial<WasmKernelPayload> | null;
  if (typeof p !== 'object' || p === null || !(p.bytes instanceof Uint8Array) || typeof p.name !== 'string') {
    throw new TypeError(`wasm-kernel task: payload must be { bytes: Uint8Array, name: string }`);
  }
  const WA = wasmApi();
  if (!WA) return { ok: false, name: p.name, error: `${p.name}: WebAssembly is not available in this worker` };
  try {
    new WA.Module(p.bytes);
  } catch (e) {
    return { ok: false, name: p.name, error: `${p.name}: ${(e as Error).name}: ${(e as Error).message}` };
  }
  return { ok: true, name: p.name, hash: wasmBytesHash(p.bytes) };
}
