#!/usr/bin/env node
/**
 * `npm run build`: tsc, skipped when nothing it reads changed since the last successful build.
 *
 * tsc --incremental alone still hashes every source and costs several seconds on a no-op; this
 * compares mtimes first. Inputs: every file and folder under src/, test/, bench/, examples/ (a
 * folder's mtime changes when a file is added, removed or renamed in it), tsconfig.json,
 * package.json and the TypeScript compiler's own package.json. The stamp dist/.build-stamp is
 * written only after tsc exits 0 (dated when tsc started), so a failed build is retried (and its errors shown) every time;
 * a fresh clone has no dist/ and always builds. Anything the check cannot see (a dist/ file deleted
 * by hand) is fixed by `npm run build -- --force` or removing dist/.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stamp = path.join(root, 'dist', '.build-stamp');
const require = createRequire(import.meta.url);
const tscPackage = require.resolve('typescript/package.json');

/** The newest mtime (ms) of `p` and, for a folder, everything under it; 0 if absent. */
function newest(p) {
  let st;
  try {
    st = fs.statSync(p);
  } catch {
    return 0;
  }
  let t = st.mtimeMs;
  if (st.isDirectory()) for (const name of fs.readdirSync(p)) t = Math.max(t, newest(path.join(p, name)));
  return t;
}

function upToDate() {
  let built;
  try {
    built = fs.statSync(stamp).mtimeMs;
  } catch {
    return false;
  }
  const inputs = ['src', 'test', 'bench', 'examples', 'tsconfig.json', 'package.json'].map((p) => path.join(root, p));
  return Math.max(...inputs.map(newest), newest(tscPackage)) < built;
}

if (!process.argv.includes('--force') && upToDate()) {
  // stderr: npm pack --json (prepack) keeps lifecycle scripts' stdout in its JSON output.
  console.error('build: dist/ is up to date (npm run build -- --force rebuilds)');
  process.exit(0);
}
fs.rmSync(stamp, { force: true });
// The stamp gets the time tsc started: a source saved while tsc runs is newer and rebuilds next time.
const started = new Date();
const tsc = path.join(path.dirname(tscPackage), 'bin', 'tsc');
const r = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.json'), '--incremental', '--tsBuildInfoFile', path.join(root, 'dist', '.tsbuildinfo')], { stdio: 'inherit' });
if (r.status !== 0) process.exit(r.status ?? 1);
fs.writeFileSync(stamp, `${started.toISOString()}\n`);
fs.utimesSync(stamp, started, started);
