/**
 * `kiln cache info|clear`: where the on-disk cache is, how much it holds against its cap, and a way
 * to empty it. Reads the folder from the same resolution the library uses (runtime/cache), so
 * KILN_CACHE_DIR, XDG_CACHE_HOME and HOME mean here what they mean to a program.
 */
import { parseArgs } from 'node:util';
import { cacheCapBytes, cacheUsage, clearCache, resolveCacheDir, type CacheDirSource } from '../runtime/cache/index.js';

const USAGE = `Usage: kiln cache <info|clear> [--json]

  info     the cache folder, its entries and bytes, and the size cap (KILN_CACHE_MAX_MB)
  clear    delete every entry (the next runs compile again)

The folder is KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.`;

const SOURCE_TEXT: Record<CacheDirSource, string> = {
  KILN_CACHE_DIR: 'KILN_CACHE_DIR',
  XDG_CACHE_HOME: 'default, from XDG_CACHE_HOME',
  LOCALAPPDATA: 'default, from LOCALAPPDATA',
  home: 'default, under the home folder',
  tmpdir: 'default, no home folder: temp folder',
};

/** Bytes as a short human figure (binary units, as the cap's MiB). */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}

export function runCache(argv: string[]): number {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } },
  });
  const sub = positionals[0];
  if (values.help || sub === undefined || sub === 'help') {
    console.log(USAGE);
    return sub === undefined && !values.help ? 2 : 0;
  }
  if (positionals.length > 1) throw new Error(`cache ${sub}: unexpected argument '${positionals[1]}'\n\n${USAGE}`);
  const { dir, source } = resolveCacheDir();
  const cap = cacheCapBytes();
  switch (sub) {
    case 'info': {
      const u = cacheUsage(dir);
      if (values.json) {
        console.log(JSON.stringify({ dir, source, entries: u.entries, bytes: u.bytes, capBytes: cap ?? null }));
        return 0;
      }
      console.log(`location  ${dir} (${SOURCE_TEXT[source]})`);
      console.log(`entries   ${u.entries}`);
      console.log(`bytes     ${formatBytes(u.bytes)} (${u.bytes})`);
      console.log(`cap       ${cap === undefined ? 'none (KILN_CACHE_MAX_MB=0)' : `${formatBytes(cap)} (KILN_CACHE_MAX_MB); least recently used entries are evicted past it`}`);
      return 0;
    }
    case 'clear': {
      const u = clearCache(dir);
      if (values.json) console.log(JSON.stringify({ dir, removedEntries: u.entries, removedBytes: u.bytes }));
      else console.log(`cleared ${dir}: ${u.entries} entries, ${formatBytes(u.bytes)}`);
      return 0;
    }
    default:
      console.error(`kiln cache: unknown subcommand '${sub}'\n\n${USAGE}`);
      return 2;
  }
}
