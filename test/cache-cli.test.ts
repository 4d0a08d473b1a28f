/**
 * `kiln cache info|clear` end to end: spawns the built CLI with KILN_CACHE_DIR at a temp folder the
 * test filled through DiskCache, and checks the location, entry count, bytes and cap it prints, that
 * clear empties the folder, and that a bad subcommand or a bad cap is a clear error.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DiskCache, cacheUsage } from '../src/runtime/cache/index.js';
import { HANG_GUARD_MS } from './helpers/limits.js';

const MAIN = path.join(path.dirname(fileURLToPath(import.meta.url)), '../src/cli/main.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-cache-cli-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

function kiln(args: string[], env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', timeout: HANG_GUARD_MS, env: { ...process.env, KILN_CACHE_DIR: dir, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('kiln cache info and clear', () => {
  const cache = new DiskCache({ dir });
  for (let i = 0; i < 5; i++) cache.put('ns', `key${i}`, { i, pad: 'z'.repeat(300) });
  const { bytes } = cacheUsage(dir);

  const json = kiln(['cache', 'info', '--json'], { KILN_CACHE_MAX_MB: '1' });
  assert.equal(json.status, 0, json.stderr);
  assert.deepEqual(JSON.parse(json.stdout), { dir, source: 'KILN_CACHE_DIR', entries: 5, bytes, capBytes: 1024 * 1024 });

  const text = kiln(['cache', 'info']);
  assert.equal(text.status, 0, text.stderr);
  const lines = text.stdout.trim().split('\n');
  assert.equal(lines[0], `location  ${dir} (KILN_CACHE_DIR)`);
  assert.equal(lines[1], 'entries   5');
  assert.equal(lines[2], `bytes     ${(bytes / 1024).toFixed(1)} KiB (${bytes})`);
  assert.match(lines[3]!, /^cap {7}2\.0 GiB \(KILN_CACHE_MAX_MB\)/);

  const clear = kiln(['cache', 'clear']);
  assert.equal(clear.status, 0, clear.stderr);
  assert.equal(clear.stdout.trim(), `cleared ${dir}: 5 entries, ${(bytes / 1024).toFixed(1)} KiB`);
  assert.equal(cacheUsage(dir).entries, 0);
  assert.equal(JSON.parse(kiln(['cache', 'info', '--json']).stdout).entries, 0);
});

test('kiln cache: bad subcommand and bad cap are errors', () => {
  const bad = kiln(['cache', 'purge']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown subcommand 'purge'/);
  const none = kiln(['cache']);
  assert.equal(none.status, 2);
  assert.match(none.stdout, /Usage: kiln cache/);
  const cap = kiln(['cache', 'info'], { KILN_CACHE_MAX_MB: 'lots' });
  assert.equal(cap.status, 1);
  assert.match(cap.stderr, /KILN_CACHE_MAX_MB must be a number >= 0; got 'lots'/);
});
