/**
 * Which CPU code path runs float32 GEMMs and compiled kernels: 'native' (generated C built by the
 * system compiler, loaded through koffi), 'wasm' (the WebAssembly SIMD kernels) or 'js'.
 *
 * `KILN_CPU_PATH=native|wasm|js` (or `setCpuPath`) forces one; forcing 'native' where no compiler
 * works is an error at first use, with the reason. Otherwise the first query decides, once per
 * process: native when a compiler is found and the GEMM library builds and loads, else wasm where
 * WebAssembly is available, else js. `cpuPathInfo()` says which and why (shown by `kiln info`).
 */
import { getOption, setOption } from '../../../runtime/config.js';
import { runtimeLog } from '../../../runtime/notes.js';
import { wasmApi } from '../wasm-asm.js';
import { loadNativeGemm } from './gemm.js';
import { probeToolchain, type Toolchain } from './toolchain.js';

export type CpuPath = 'native' | 'wasm' | 'js';

export interface CpuPathInfo {
  readonly path: CpuPath;
  /** Whether KILN_CPU_PATH / setCpuPath chose it. */
  readonly forced: boolean;
  readonly reason: string;
  readonly toolchain?: Toolchain;
}

const PATHS: readonly CpuPath[] = ['native', 'wasm', 'js'];

let auto: CpuPathInfo | undefined;
/**
 * The forced-native answer once the native GEMM has loaded (it stays loaded for the process).
 * Every eager float32 op asks for the path; re-probing each time read the environment and
 * rebuilt the reason string, ~4% of an eager mlp-64x512 forward.
 */
let forcedNative: CpuPathInfo | undefined;

/** The forced path from setCpuPath or KILN_CPU_PATH, if any (cheap: never probes). */
export function forcedCpuPath(): CpuPath | undefined {
  const p = getOption('KILN_CPU_PATH');
  return p === 'auto' ? undefined : p;
}

/** Forces a path for this process (undefined: back to KILN_CPU_PATH / automatic). */
export function setCpuPath(p: CpuPath | undefined): void {
  if (p !== undefined && !PATHS.includes(p)) throw new RangeError(`setCpuPath: expected one of ${PATHS.join(', ')}, got '${String(p)}'`);
  setOption('KILN_CPU_PATH', p);
}

function nativeProblem(): { toolchain?: Toolchain; problem?: string } {
  const probe = probeToolchain();
  if (!probe.ok) return { problem: probe.reason };
  try {
    loadNativeGemm();
  } catch (e) {
    return { toolchain: probe.toolchain, problem: (e as Error).message };
  }
  return { toolchain: probe.toolchain };
}

function describe(t: Toolchain): string {
  return `${t.version}; ${t.flags.filter((f) => f.startsWith('-m') || f === '-fopenmp').join(' ') || 'generic flags'}; cpu ${t.features.join(' ') || 'baseline'}`;
}

function decideAuto(): CpuPathInfo {
  const n = nativeProblem();
  if (!n.problem) return { path: 'native', forced: false, reason: `C compiler works (${describe(n.toolchain!)})`, toolchain: n.toolchain };
  if (wasmApi()) return { path: 'wasm', forced: false, reason: `no native code: ${n.problem}; using WebAssembly SIMD` };
  return { path: 'js', forced: false, reason: `no native code (${n.problem}) and no WebAssembly` };
}

/** The active path and why (probes the compiler on first call when not forced). */
export function cpuPathInfo(): CpuPathInfo {
  const forced = forcedCpuPath();
  if (forced === 'native') {
    if (forcedNative) return forcedNative;
    const n = nativeProblem();
    if (n.problem) throw new Error(`KILN_CPU_PATH=native, but the native cpu path is unavailable: ${n.problem}`);
    forcedNative = { path: 'native', forced: true, reason: `forced (${describe(n.toolchain!)})`, toolchain: n.toolchain };
    return forcedNative;
  }
  if (forced) return { path: forced, forced: true, reason: 'forced by KILN_CPU_PATH / setCpuPath' };
  if (auto === undefined) {
    const decided = decideAuto();
    runtimeLog('device', () => `cpu code path ${decided.path}: ${decided.reason}`);
    auto = decided;
  }
  return auto;
}

/** The active path. */
export function cpuPath(): CpuPath {
  return cpuPathInfo().path;
}
