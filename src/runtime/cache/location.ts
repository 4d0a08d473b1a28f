/**
 * Where the on-disk cache lives. It persists across reboots in the user's cache folder, so the
 * first-use compiles (native CPU kernels, NVRTC cubins, compiled programs, tuning results) are paid
 * once per machine, not once per boot as under the temp folder where it used to be.
 *
 * Resolution: `KILN_CACHE_DIR`; else `$XDG_CACHE_HOME/kiln` (the XDG base-directory spec: only an
 * absolute XDG_CACHE_HOME counts); else `%LOCALAPPDATA%\kiln\cache` on Windows; else
 * `~/.cache/kiln`; and only when there is no home folder, `<tmpdir>/kiln-cache-<user>`.
 * The environment and the home folder are parameters so tests can resolve a child's view.
 */
import { env as platformEnv, nodeProcess, os, path } from '../../platform/index.js';
import { getOption } from '../config.js';

export type CacheDirSource = 'KILN_CACHE_DIR' | 'XDG_CACHE_HOME' | 'LOCALAPPDATA' | 'home' | 'tmpdir';

function safeUserName(): string {
  let name: string;
  try {
    name = os.userInfo().username;
  } catch {
    name = process.env.USER ?? process.env.USERNAME ?? String(process.getuid?.() ?? 'user');
  }
  return name.replace(/[^A-Za-z0-9_.-]/g, '_') || 'user';
}

/** The home folder, or null when there is none (a service account without one). */
function homeDir(): string | null {
  try {
    const h = os.homedir();
    return h === '' ? null : h;
  } catch {
    return null;
  }
}

/** The default cache folder (what applies when KILN_CACHE_DIR is unset) and why. */
export function defaultCacheDir(
  env: NodeJS.ProcessEnv = platformEnv,
  home: string | null = homeDir(),
  platform: NodeJS.Platform = (nodeProcess?.platform ?? 'linux'),
): { dir: string; source: CacheDirSource } {
  const xdg = env.XDG_CACHE_HOME;
  if (xdg !== undefined && path.isAbsolute(xdg)) return { dir: path.join(xdg, 'kiln'), source: 'XDG_CACHE_HOME' };
  const local = env.LOCALAPPDATA;
  // path.win32 explicitly: the platform is a parameter, so this branch is testable anywhere.
  if (platform === 'win32' && local !== undefined && path.win32.isAbsolute(local)) return { dir: path.win32.join(local, 'kiln', 'cache'), source: 'LOCALAPPDATA' };
  if (home !== null) return { dir: path.join(home, '.cache', 'kiln'), source: 'home' };
  return { dir: path.join(os.tmpdir(), `kiln-cache-${safeUserName()}`), source: 'tmpdir' };
}

/** The cache folder in effect and where that choice comes from. */
export function resolveCacheDir(): { dir: string; source: CacheDirSource } {
  const env = getOption('KILN_CACHE_DIR');
  if (env !== undefined) return { dir: path.resolve(env), source: 'KILN_CACHE_DIR' };
  return defaultCacheDir();
}

/** `KILN_CACHE_DIR`, else the default cache folder (re-evaluated each call). */
export function cacheDir(): string {
  return resolveCacheDir().dir;
}
