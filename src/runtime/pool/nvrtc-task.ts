/**
 * Compile task 'nvrtc': CUDA C -> cubin in a worker. The worker loads koffi and libnvrtc itself
 * (nothing from the parent), compiles for the architecture named in the payload (the parent reads
 * it from the device, e.g. sm_90) and returns the cubin bytes. Compile errors come back as data with
 * NVRTC's log and the numbered source lines around each error.
 */
import { compileToCubin, NvrtcCompileError, nvrtcVersion } from '../cuda/nvrtc.js';

export interface NvrtcPayload {
  source: string;
  /** Entry point, also the diagnostic file name (`<name>.cu`). */
  name: string;
  /** e.g. 'sm_90'. */
  arch: string;
  options?: string[];
}

export type NvrtcResult =
  | { ok: true; name: string; arch: string; nvrtcVersion: string; cubin: Uint8Array; log: string }
  | { ok: false; name: string; error: string };

function checkPayload(payload: unknown): NvrtcPayload {
  const p = payload as Partial<NvrtcPayload> | null;
  if (typeof p !== 'object' || p === null) throw new TypeError(`nvrtc task: payload must be { source, name, arch }, got ${String(payload)}`);
  if (typeof p.source !== 'string') throw new TypeError(`nvrtc task: 'source' must be a string, got ${typeof p.source}`);
  if (typeof p.name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(p.name)) throw new TypeError(`nvrtc task: 'name' must be a C identifier, got ${String(p.name)}`);
  if (typeof p.arch !== 'string' || !/^sm_\d+[a-z]?$/.test(p.arch)) throw new TypeError(`nvrtc task '${p.name}': 'arch' must look like sm_90, got ${String(p.arch)}`);
  if (p.options !== undefined && (!Array.isArray(p.options) || !p.options.every((o) => typeof o === 'string'))) {
    throw new TypeError(`nvrtc task '${p.name}': 'options' must be an array of strings`);
  }
  return { source: p.source, name: p.name, arch: p.arch, options: p.options };
}

/** The 'nvrtc' handler. A missing libnvrtc or a malformed payload throws; a compile error is a result. */
export function nvrtcTask(payload: unknown): NvrtcResult {
  const { source, name, arch, options } = checkPayload(payload);
  try {
    const { cubin, log } = compileToCubin(source, { arch, name: `${name}.cu`, options });
    return { ok: true, name, arch, nvrtcVersion: nvrtcVersion(), cubin, log };
  } catch (e) {
    if (e instanceof NvrtcCompileError) return { ok: false, name, error: e.message };
    throw e;
  }
}
