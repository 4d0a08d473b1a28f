/**
 * The disk-cache key of a whole compiled program. It covers everything that can change what the
 * backend produces for a graph:
 * - the graph's structural signature (ops, constants, dtypes, ranks, layout classes, static sizes)
 *   and the guard key of the call (argument structure, dtypes, devices, sizes or '?', layouts);
 * - compile mode and backend name;
 * - kiln's version (via cacheKey), an explicit program-format version, and a hash of the compiler's
 *   own code (every module under src/compile except its cache plumbing, and src/kernels, whose
 *   renderers write the generated code), so any change to lowering, scheduling or code generation
 *   invalidates entries without anyone remembering to bump a number;
 * - the LLM library's manifest and frozen dispatch choices (llmManifestHash): a program built under
 *   one library choice is never reused under another;
 * - each device the graph touches, with its accelerator's properties (name, architecture...);
 * - the configuration fingerprint (runtime/config.ts: every option that can change generated code).
 * Keys that embed process-local identities (`o#N`: constants compared by object identity) cannot
 * mean the same thing in another process; `programCacheKey` returns null for them (not cacheable).
 */
import { createHash, fs, path, url } from '../../platform/index.js';
import { Device } from '../../runtime/device.js';
import { getAccelerator } from '../../runtime/registry.js';
import { cacheKey } from '../../runtime/cache/key.js';
import { backends } from '../../runtime/backends.js';
import { llmManifestHash } from '../../ops/library/policy.js';
import { configFingerprint } from '../../runtime/config.js';

/** Bump when the stored program format changes in a way the compiler hash would not catch. */
export const PROGRAM_FORMAT_VERSION = 1;

/** Directories under src/compile whose code does not shape a program (storage plumbing). */
const HASH_SKIP_DIRS = new Set(['cache']);

let compilerHashMemo: string | null | undefined;

/**
 * sha256 over the compiler's module files (the built .js next to this file's parent), read once
 * per process: about 40 small files, a few milliseconds. null when they cannot be read (a bundled
 * or unusual install): then programs are not cached, since a code change could go unnoticed.
 */
export function compilerCodeHash(): string | null {
  if (compilerHashMemo !== undefined) return compilerHashMemo;
  try {
    compilerHashMemo = hashCompilerFiles();
  } catch {
    compilerHashMemo = null;
  }
  return compilerHashMemo;
}

function hashCompilerFiles(): string {
  const root = path.dirname(path.dirname(url.fileURLToPath(import.meta.url)));
  // The kernels folder holds the renderers the compiler's generated code comes from (the fused
  // WGSL/CUDA renderers, templates): a change there must invalidate stored programs too.
  const kernels = path.join(path.dirname(root), 'kernels');
  const files: string[] = [];
  const walk = (dir: string, top: boolean): void => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (!(top && HASH_SKIP_DIRS.has(e.name))) walk(p, false);
      } else if (/\.(js|ts)$/.test(e.name) && !e.name.endsWith('.d.ts') && !e.name.endsWith('.map')) {
        files.push(p);
      }
    }
  };
  walk(root, true);
  walk(kernels, false);
  const base = path.dirname(root);
  const h = createHash('sha256');
  for (const f of files) {
    h.update(path.relative(base, f)).update('\0');
    h.update(fs.readFileSync(f)).update('\0');
  }
  return h.digest('hex');
}

/** Devices with their accelerator's properties (a device whose accelerator is missing has none). */
function deviceFacts(devices: readonly string[]): unknown[] {
  return [...new Set(devices)].sort().map((spec) => {
    const d = Device.from(spec);
    let properties: unknown = null;
    try {
      properties = JSON.parse(JSON.stringify(getAccelerator(d.type).properties(d.index))) as unknown;
    } catch (e) {
      properties = `unavailable: ${(e as Error).message}`;
    }
    return { device: d.toString(), properties };
  });
}

export interface ProgramKeyParts {
  /** graphSignature() of the optimised graph (symbolic dims as '?'). */
  signature: string;
  /** The guard key of the call that traced it. */
  guardKey: string;
  mode: string;
  backend: string;
  /** Devices of the graph's inputs and values. */
  devices: readonly string[];
}

/** The cache key of a program, or null when the graph cannot be cached across processes. */
export function programCacheKey(p: ProgramKeyParts): string | null {
  if (/\bo#\d/.test(p.signature) || /\bo#\d/.test(p.guardKey)) return null;
  const code = compilerCodeHash();
  if (code === null) return null;
  return cacheKey([
    'kiln-program',
    PROGRAM_FORMAT_VERSION,
    p.backend,
    p.mode,
    p.signature,
    p.guardKey,
    code,
    llmManifestHash(),
    configFingerprint(),
    deviceFacts(p.devices),
    // Process-wide math switches a program's extern calls (GEMMs, convolutions) run under.
    [backends.cuda.allowTf32Conv, backends.cuda.matmul.allowTf32],
  ]);
}
