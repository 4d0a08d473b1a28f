/**
 * NVRTC: CUDA C source -> cubin for one exact architecture (sm_90 on an H200), synchronously on the
 * calling thread. Needs koffi and libnvrtc only (no GPU, no driver), so compile workers call it too.
 * A failed compile throws NvrtcCompileError whose message holds NVRTC's log with the numbered
 * source lines around each error.
 */
import { bindNvrtc, loadKoffi, type NvrtcApi, type Ptr } from './ffi.js';
import { findLibrary, missingMessage } from './discover.js';

let api: NvrtcApi | undefined;
let apiPath = '';
let failure: Error | undefined;

export function nvrtc(): NvrtcApi {
  if (api) return api;
  if (failure) throw failure;
  try {
    const koffi = loadKoffi();
    const found = findLibrary('nvrtc');
    let lastErr = '';
    for (const c of found.candidates) {
      try {
        api = bindNvrtc(koffi, c);
        apiPath = c;
        return api;
      } catch (e) {
        lastErr = (e as Error).message;
      }
    }
    throw new Error(missingMessage(found, lastErr));
  } catch (e) {
    failure = e as Error;
    throw e;
  }
}

export function nvrtcLibraryPath(): string {
  nvrtc();
  return apiPath;
}

export function nvrtcVersion(): string {
  const n = nvrtc();
  const major: [number] = [0];
  const minor: [number] = [0];
  n.nvrtcVersion(major, minor);
  return `${major[0]}.${minor[0]}`;
}

export class NvrtcCompileError extends Error {
  constructor(
    message: string,
    readonly log: string,
  ) {
    super(message);
    this.name = 'NvrtcCompileError';
  }
}

export interface NvrtcOptions {
  /** e.g. 'sm_90'. */
  arch: string;
  /** File name shown in diagnostics. */
  name: string;
  /** Extra NVRTC options (NVRTC 13 rejects -O3: optimisation is on by default). */
  options?: readonly string[];
}

// Lines of context shown above and below each error line, and the most errors quoted.
const CONTEXT_LINES = 3;
const MAX_QUOTED_ERRORS = 3;

/** NVRTC's log with the numbered source lines around the first errors it names. */
export function formatNvrtcLog(source: string, name: string, log: string): string {
  const lines = source.split('\n');
  const re = new RegExp(`${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\((\\d+)\\): (?:error|catastrophic error)`, 'g');
  const seen = new Set<number>();
  const parts: string[] = [log.trim()];
  for (const m of log.matchAll(re)) {
    const line = Number(m[1]);
    if (seen.has(line) || seen.size >= MAX_QUOTED_ERRORS) continue;
    seen.add(line);
    const from = Math.max(1, line - CONTEXT_LINES);
    const to = Math.min(lines.length, line + CONTEXT_LINES);
    const width = String(to).length;
    const snippet: string[] = [];
    for (let i = from; i <= to; i++) snippet.push(`${i === line ? '>' : ' '} ${String(i).padStart(width)} | ${lines[i - 1] ?? ''}`);
    parts.push(`--- ${name} around line ${line} ---\n${snippet.join('\n')}`);
  }
  return parts.join('\n');
}

function check(n: NvrtcApi, rc: number, doing: string): void {
  if (rc !== 0) throw new Error(`nvrtc: ${doing}: ${n.nvrtcGetErrorString(rc)} (${rc})`);
}

/** Compiles `source` to a cubin; throws NvrtcCompileError with the annotated log on failure. */
export function compileToCubin(source: string, opts: NvrtcOptions): { cubin: Uint8Array; log: string } {
  const n = nvrtc();
  const prog: [Ptr | null] = [null];
  check(n, n.nvrtcCreateProgram(prog, source, opts.name, 0, null, null), `creating program ${opts.name}`);
  const p = prog[0]!;
  try {
    const options = [`--gpu-architecture=${opts.arch}`, '--std=c++17', ...(opts.options ?? [])];
    const rc = n.nvrtcCompileProgram(p, options.length, options);
    const logSize: [number] = [0];
    check(n, n.nvrtcGetProgramLogSize(p, logSize), 'reading the log size');
    const logBuf = new Uint8Array(Math.max(1, Number(logSize[0])));
    check(n, n.nvrtcGetProgramLog(p, logBuf), 'reading the log');
    const end = logBuf.indexOf(0);
    const log = new TextDecoder().decode(logBuf.subarray(0, end < 0 ? logBuf.length : end));
    if (rc !== 0) {
      const text = formatNvrtcLog(source, opts.name, log);
      throw new NvrtcCompileError(`nvrtc: compiling ${opts.name} for ${opts.arch} failed (${n.nvrtcGetErrorString(rc)}, options ${options.join(' ')}):\n${text}`, log);
    }
    const size: [number] = [0];
    check(n, n.nvrtcGetCUBINSize(p, size), 'reading the cubin size');
    const cubin = new Uint8Array(Number(size[0]));
    check(n, n.nvrtcGetCUBIN(p, cubin), 'reading the cubin');
    return { cubin, log };
  } finally {
    n.nvrtcDestroyProgram(prog);
  }
}
