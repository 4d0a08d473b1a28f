/**
 * Compile task 'cc': runs the system C compiler on generated source inside a compile worker, so a
 * multi-second `-O3` build never blocks the main thread's event loop (the eager path blocks in
 * Atomics.wait instead, which lets other workers keep compiling).
 *
 * The handler writes the source next to the requested output (same directory, unique names), runs
 * `compiler ...args -o out src`, hashes the shared object and returns its sha256; the caller
 * (kernels/cpu/native/so-cache.ts) renames it into the cache. A failed compile is data, not an
 * exception: the result carries the compiler's stderr with each `src.c:LINE:COL` diagnostic
 * followed by the generated line it points at, so a broken generator is debuggable from the error.
 */
import { childProcess, createHash, fs, path } from '../../platform/index.js';

export interface CcPayload {
  /** Absolute path (or PATH name) of the compiler. */
  readonly compiler: string;
  /** Flags before `-o` (optimisation, -shared -fPIC, -march, -fopenmp ...). */
  readonly args: readonly string[];
  /** Flags after the source file (libraries: -lm). */
  readonly libs: readonly string[];
  readonly source: string;
  /** Kernel/library name, used in diagnostics and as the source file name. */
  readonly name: string;
  /** Where the shared object goes (its directory must exist or be creatable). */
  readonly outFile: string;
  /** Milliseconds before the compiler is killed (default 120000). */
  readonly timeoutMs?: number;
}

export type CcResult =
  | { ok: true; name: string; outFile: string; sha256: string; ms: number }
  | { ok: false; name: string; error: string };

function checkPayload(payload: unknown): CcPayload {
  const p = payload as Partial<CcPayload> | null;
  if (typeof p !== 'object' || p === null) throw new TypeError(`cc task: payload must be an object, got ${String(payload)}`);
  for (const key of ['compiler', 'source', 'name', 'outFile'] as const) {
    if (typeof p[key] !== 'string' || p[key] === '') throw new TypeError(`cc task: '${key}' must be a non-empty string, got ${String(p[key])}`);
  }
  for (const key of ['args', 'libs'] as const) {
    const v = p[key];
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new TypeError(`cc task '${String(p.name)}': '${key}' must be an array of strings`);
  }
  return p as CcPayload;
}

/** Appends, after each `file:LINE:COL:` diagnostic, the generated source line it refers to. */
export function annotateDiagnostics(stderr: string, srcFile: string, source: string): string {
  const lines = source.split('\n');
  const base = path.basename(srcFile);
  const out: string[] = [];
  for (const line of stderr.split('\n')) {
    out.push(line);
    const at = line.indexOf(`${base}:`);
    if (at < 0) continue;
    const m = /^:(\d+):(\d+): (error|warning)/.exec(line.slice(at + base.length));
    if (!m) continue;
    const ln = Number(m[1]);
    const text = lines[ln - 1];
    if (text !== undefined) out.push(`    generated line ${ln}: ${text.trim()}`);
  }
  return out.join('\n').trimEnd();
}

/** The 'cc' handler. Throws only for a malformed payload; a failed compile is reported in the result. */
export function ccTask(payload: unknown): CcResult {
  const p = checkPayload(payload);
  const dir = path.dirname(p.outFile);
  fs.mkdirSync(dir, { recursive: true });
  // A unique directory but a fixed file name: the name is recorded in the object's symbol table,
  // so two processes building the same source produce byte-identical objects (same cache hash).
  const srcDir = fs.mkdtempSync(path.join(dir, '.cc-'));
  const srcFile = path.join(srcDir, `${p.name.replace(/[^A-Za-z0-9_]/g, '_')}.c`);
  fs.writeFileSync(srcFile, p.source);
  const t0 = performance.now();
  try {
    const r = childProcess.spawnSync(p.compiler, [...p.args, '-o', p.outFile, srcFile, ...p.libs], { encoding: 'utf8', timeout: p.timeoutMs ?? 120_000 });
    if (r.error) return { ok: false, name: p.name, error: `${p.name}: cannot run C compiler '${p.compiler}': ${r.error.message}` };
    if (r.status !== 0) {
      const why = r.signal ? `was killed by ${r.signal}` : `exited with status ${String(r.status)}`;
      const cmd = [p.compiler, ...p.args, '-o', p.outFile, srcFile, ...p.libs].join(' ');
      const diag = annotateDiagnostics(`${r.stderr}${r.stdout}`, srcFile, p.source);
      fs.rmSync(p.outFile, { force: true });
      return { ok: false, name: p.name, error: `${p.name}: C compiler ${why}\n  command: ${cmd}\n${diag}` };
    }
    const sha256 = createHash('sha256').update(fs.readFileSync(p.outFile)).digest('hex');
    return { ok: true, name: p.name, outFile: p.outFile, sha256, ms: performance.now() - t0 };
  } finally {
    fs.rmSync(srcDir, { recursive: true, force: true });
  }
}
