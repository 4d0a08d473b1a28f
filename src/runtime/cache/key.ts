/**
 * Cache keys: sha256 over a canonical JSON encoding (object keys sorted, so equal values hash
 * equally whatever their key order) that also includes kiln's version, so a new release never
 * reads an old release's entries. Runtime layer: it knows nothing of ops or the compiler, so what
 * shapes a particular kind of entry (the LLM library's choices for a compiled program, say) is
 * added to that entry's parts by its owner (src/compile/cache/program-key.ts), not here. Kernel
 * binaries (cubins, JS/Wasm kernels) are keyed by their source and so need nothing more.
 */
import { createHash, fs, path, url } from '../../platform/index.js';

let cachedVersion: string | undefined;

/** The npm name in package.json (the name 'kiln' was taken on npm); walking up stops at this one. */
export const PACKAGE_NAME = 'kilnjs';

/** kiln's version from its package.json (found by walking up from this file; read once). */
export function kilnVersion(): string {
  if (cachedVersion !== undefined) return cachedVersion;
  let dir = path.dirname(url.fileURLToPath(import.meta.url));
  for (;;) {
    const p = path.join(dir, 'package.json');
    if (fs.existsSync(p)) {
      try {
        const pkg = JSON.parse(fs.readFileSync(p, 'utf8')) as { name?: unknown; version?: unknown };
        if (pkg.name === PACKAGE_NAME && typeof pkg.version === 'string') return (cachedVersion = pkg.version);
      } catch {
        // not ours; keep walking
      }
    }
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`kiln cache: cannot find kiln's package.json above ${url.fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}

/**
 * Canonical JSON: sorted object keys, no whitespace. Beyond JSON it distinguishes what JSON would
 * conflate (NaN/Infinity/-0 from null and 0, bigint from number, typed arrays from plain objects) and
 * rejects what has no stable value (functions, symbols, cycles, class instances).
 */
export function canonicalJson(value: unknown): string {
  const seen = new Set<object>();
  const enc = (v: unknown, where: string): string => {
    switch (typeof v) {
      case 'string':
        return JSON.stringify(v);
      case 'boolean':
        return v ? 'true' : 'false';
      case 'number':
        if (Number.isFinite(v)) return Object.is(v, -0) ? '{"$num":"-0"}' : JSON.stringify(v);
        return `{"$num":"${String(v)}"}`;
      case 'bigint':
        return `{"$bigint":"${v.toString()}"}`;
      case 'undefined':
        return '{"$undefined":true}';
      case 'object': {
        if (v === null) return 'null';
        if (seen.has(v)) throw new TypeError(`cacheKey: cyclic value at ${where}`);
        seen.add(v);
        try {
          if (Array.isArray(v)) return `[${v.map((x, i) => enc(x, `${where}[${i}]`)).join(',')}]`;
          if (ArrayBuffer.isView(v)) {
            const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
            return `{"$typed":"${v.constructor.name}","hex":"${Buffer.from(bytes).toString('hex')}"}`;
          }
          const proto = Object.getPrototypeOf(v) as unknown;
          if (proto !== Object.prototype && proto !== null) {
            const name = (v as { constructor?: { name?: string } }).constructor?.name ?? 'unknown';
            throw new TypeError(`cacheKey: cannot encode a ${name} instance at ${where}; pass plain objects, arrays, strings, numbers, booleans, bigints or typed arrays`);
          }
          const rec = v as Record<string, unknown>;
          const keys = Object.keys(rec).sort();
          return `{${keys.map((k) => `${JSON.stringify(k)}:${enc(rec[k], `${where}.${k}`)}`).join(',')}}`;
        } finally {
          seen.delete(v);
        }
      }
      default:
        throw new TypeError(`cacheKey: cannot encode a ${typeof v} at ${where}`);
    }
  };
  return enc(value, '$');
}

/** sha256 (hex) of the canonical encoding of `parts` together with kiln's version. */
export function cacheKey(parts: readonly unknown[]): string {
  if (!Array.isArray(parts)) throw new TypeError(`cacheKey: parts must be an array, got ${typeof parts}`);
  return createHash('sha256').update(canonicalJson({ kiln: kilnVersion(), parts })).digest('hex');
}
