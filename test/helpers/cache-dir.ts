/**
 * Runs a test body with KILN_CACHE_DIR pointing at a fresh temporary folder, restored and removed
 * afterwards (tests of what Kiln stores on disk between processes).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function withCacheDir(f: () => void, prefix = 'kiln-cache-'): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const saved = process.env.KILN_CACHE_DIR;
  process.env.KILN_CACHE_DIR = dir;
  try {
    f();
  } finally {
    if (saved === undefined) delete process.env.KILN_CACHE_DIR;
    else process.env.KILN_CACHE_DIR = saved;
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
