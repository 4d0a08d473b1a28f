/**
 * Discovery of the system C compiler for the native CPU path: which compiler (`KILN_CC`, else the
 * first of cc, gcc, clang on PATH that builds a shared object), its version line, the host's
 * vector features (/proc/cpuinfo), the code-generation flags and whether OpenMP links.
 *
 * Flags: `-march=native` when the compiler accepts it (it also selects the cache/tuning model);
 * otherwise explicit `-mavx2 -mfma` / `-mavx512f` from the CPU flags. `-ffp-contract=fast` lets
 * both GCC and Clang fuse a*b+c into FMA (Clang's default only fuses within one expression).
 *
 * Every probe runs the compiler, so the result is cached per process and on disk (keyed by the
 * compiler binary's path, size and mtime and the CPU flags): a test process that loads the native
 * path pays a stat, not five compiler runs.
 */
import { childProcess, createHash, fs, inNode, os, path } from '../../../platform/index.js';
import { getOption } from '../../../runtime/config.js';
import { nativeDiskCache } from './disk.js';

export interface Toolchain {
  /** Absolute path of the compiler. */
  readonly compiler: string;
  /** First line of `--version`. */
  readonly version: string;
  /** Vector features the generated code may use (subset of avx512f, avx2, fma, sse4_2, neon). */
  readonly features: readonly string[];
  /** Flags for every build (before -o). */
  readonly flags: readonly string[];
  /** Libraries (after the source). */
  readonly libs: readonly string[];
  /** Whether `-fopenmp` is among the flags (threads through OpenMP). */
  readonly openmp: boolean;
}

export type ToolchainProbe = { ok: true; toolchain: Toolchain } | { ok: false; reason: string };

const PROBE_VERSION = 3;

function which(name: string): string | undefined {
  if (name.includes('/')) return fs.existsSync(name) ? path.resolve(name) : undefined;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Vector features of this CPU that the generated code knows how to use. */
export function cpuFeatures(): string[] {
  if (process.arch === 'arm64') return ['neon'];
  let text = '';
  try {
    text = fs.readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    return [];
  }
  const line = /^flags\s*:(.*)$/m.exec(text)?.[1] ?? '';
  const flags = new Set(line.trim().split(/\s+/));
  return ['avx512f', 'avx2', 'fma', 'sse4_2'].filter((f) => flags.has(f));
}

function tryBuild(compiler: string, flags: readonly string[], source: string, libs: readonly string[] = []): { ok: boolean; stderr: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-ccprobe-'));
  try {
    const src = path.join(dir, 'probe.c');
    fs.writeFileSync(src, source);
    const r = childProcess.spawnSync(compiler, [...flags, '-o', path.join(dir, 'probe.so'), src, ...libs], { encoding: 'utf8', timeout: 30_000 });
    return { ok: !r.error && r.status === 0, stderr: r.error ? r.error.message : r.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * -fno-math-errno lets sqrtf inline; -fno-trapping-math lets GCC if-convert the selects in the
 * branch-free math of native/c-math.ts (with trapping math it keeps `x < c ? a : b` as control
 * flow and the fused pointwise loops stay scalar). Neither changes results: no -ffast-math.
 */
const BASE = ['-O3', '-shared', '-fPIC', '-std=gnu11', '-ffp-contract=fast', '-fno-math-errno', '-fno-trapping-math'];
/**
 * Never unload a native object (Linux): an OpenMP worker thread still holds the object's
 * thread-local packing buffers when koffi/the process unloads it at exit, and dlclose under it
 * segfaults the process after a clean run.
 */
const NODELETE = ['-Wl,-z,nodelete'];
const PLAIN = 'float kiln_probe(const float *x, int n) { float s = 0; for (int i = 0; i < n; i++) s += x[i]; return s; }\n';
const OMP = '#include <omp.h>\nint kiln_probe(void) { int t = 0;\n#pragma omp parallel reduction(+:t)\n t += omp_get_thread_num() >= 0;\n return t + omp_get_max_threads(); }\n';

function probeUncached(compiler: string): ToolchainProbe {
  const v = childProcess.spawnSync(compiler, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  if (v.error || v.status !== 0) return { ok: false, reason: `'${compiler} --version' failed: ${v.error?.message ?? v.stderr.trim()}` };
  const version = v.stdout.split('\n')[0]!.trim();
  const common = process.platform === 'linux' && tryBuild(compiler, [...BASE, ...NODELETE], PLAIN).ok ? [...BASE, ...NODELETE] : BASE;
  const base = tryBuild(compiler, common, PLAIN);
  if (!base.ok) return { ok: false, reason: `${compiler} (${version}) cannot build a shared object: ${base.stderr.trim().split('\n').slice(0, 3).join(' / ')}` };
  const features = cpuFeatures();
  let arch: string[] = [];
  if (tryBuild(compiler, [...common, '-march=native'], PLAIN).ok) arch = ['-march=native'];
  else if (process.arch === 'x64') {
    const explicit = [features.includes('avx512f') ? '-mavx512f' : '', features.includes('avx2') ? '-mavx2' : '', features.includes('fma') ? '-mfma' : ''].filter((f) => f !== '');
    if (explicit.length > 0 && tryBuild(compiler, [...common, ...explicit], PLAIN).ok) arch = explicit;
  }
  const openmp = tryBuild(compiler, [...common, ...arch, '-fopenmp'], OMP).ok;
  return {
    ok: true,
    toolchain: { compiler, version, features, flags: [...common, ...arch, ...(openmp ? ['-fopenmp'] : [])], libs: ['-lm'], openmp },
  };
}

/** Candidate compilers in order: KILN_CC, then cc, gcc, clang. */
export function compilerCandidates(): string[] {
  const env = getOption('KILN_CC');
  if (env !== undefined) return [env.trim()];
  return ['cc', 'gcc', 'clang'];
}

let cached: { env: string; probe: ToolchainProbe } | undefined;

/** The toolchain, probed once per process (and cached on disk); `{ ok: false, reason }` if none works. */
export function probeToolchain(): ToolchainProbe {
  if (!inNode) return { ok: false, reason: 'the native cpu path needs Node (a C compiler and koffi FFI); not available in a browser' };
  const env = `${getOption('KILN_CC') ?? ''}\0${process.env.PATH ?? ''}`;
  if (cached?.env === env) return cached.probe;
  const reasons: string[] = [];
  let probe: ToolchainProbe | undefined;
  for (const name of compilerCandidates()) {
    const exe = which(name);
    if (!exe) {
      reasons.push(`${name}: not found on PATH`);
      continue;
    }
    const real = fs.realpathSync(exe);
    const st = fs.statSync(real);
    const key = JSON.stringify({ v: PROBE_VERSION, exe, real, size: st.size, mtime: st.mtimeMs, cpu: cpuFeatures(), arch: process.arch });
    const disk = nativeDiskCache();
    const hit = disk.get('native-toolchain', key) as ToolchainProbe | undefined;
    const p = hit ?? probeUncached(exe);
    if (!hit) disk.put('native-toolchain', key, p);
    if (p.ok) {
      probe = p;
      break;
    }
    reasons.push(p.reason);
  }
  probe ??= { ok: false, reason: `no working C compiler (${reasons.join('; ')})` };
  cached = { env, probe };
  return probe;
}

/** A short hash of everything that changes the machine code of a build (part of every cache key). */
export function toolchainFingerprint(t: Toolchain): string {
  return createHash('sha256').update(JSON.stringify([t.compiler, t.version, t.flags, t.libs, t.features, process.arch, process.platform])).digest('hex').slice(0, 16);
}
