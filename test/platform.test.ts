/**
 * The platform layer (src/platform/): no module that Kiln's entry reaches imports Node's built-ins
 * at top level, so the ESM bundle loads in a browser (test/browser.test.ts loads it in one); the
 * browser's SHA-256 agrees with node:crypto; the lazy built-ins are Node's own.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Sha256 } from '../src/platform/sha256.js';
import * as platform from '../src/platform/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The platform's Node side: the one module allowed to reach Node's built-ins (it does so lazily today). */
const ALLOWED = new Set(['src/platform/node.ts']);
/** Packages that are Node-only: loaded lazily (createRequire, import()), never imported at top level. */
const NODE_ONLY_PACKAGES = new Set(['koffi', 'webgpu']);

/** Static imports and re-exports of a module, without `import type` / `export type` (erased). */
function staticImports(source: string): string[] {
  const out: string[] = [];
  const re = /^\s*(import|export)\s+(type\s+)?([^;'"]*?\s+from\s+)?['"]([^'"]+)['"]/gm;
  for (let m = re.exec(source); m; m = re.exec(source)) {
    if (m[2]) continue; // import type / export type
    if (m[1] === 'export' && !m[3]) continue;
    const clause = m[3] ?? '';
    // `import { type A, type B } from`: only types.
    const braces = /^\{([^}]*)\}\s+from\s+$/.exec(clause.trim() + ' ');
    if (braces && braces[1]!.split(',').every((s) => s.trim() === '' || s.trim().startsWith('type '))) continue;
    out.push(m[4]!);
  }
  return out;
}

function reachable(entry: string): Map<string, string[]> {
  const seen = new Map<string, string[]>();
  const todo = [entry];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    const specs = staticImports(fs.readFileSync(path.join(root, file), 'utf8'));
    seen.set(file, specs);
    for (const s of specs) {
      if (!s.startsWith('.')) continue;
      const target = path.relative(root, path.resolve(path.dirname(path.join(root, file)), s)).replace(/\.js$/, '.ts');
      assert.ok(fs.existsSync(path.join(root, target)), `${file} imports ${s}, which is not a source file`);
      todo.push(target);
    }
  }
  return seen;
}

test('no module reachable from src/index.ts imports node:* (or a Node-only package) at top level', () => {
  const graph = reachable('src/index.ts');
  assert.ok(graph.size > 300, `the scan found only ${graph.size} modules: the import pattern is wrong`);
  const bad: string[] = [];
  for (const [file, specs] of graph) {
    if (ALLOWED.has(file)) continue;
    for (const s of specs) if (s.startsWith('node:') || NODE_ONLY_PACKAGES.has(s)) bad.push(`${file}: ${s}`);
  }
  assert.deepEqual(bad, [], 'move these behind src/platform/ (docs/architecture.md, "Platform")');
});

test('the scan sees a planted top-level node import and ignores type-only ones', () => {
  assert.deepEqual(staticImports("import fs from 'node:fs';\nimport type { X } from 'node:http';\nimport { type A, type B } from 'node:net';\nexport { y } from './y.js';\n"), ['node:fs', './y.js']);
});

test('the browser SHA-256 agrees with node:crypto (hex and base64, across block boundaries)', () => {
  const rnd = new Uint8Array(300);
  for (let i = 0; i < rnd.length; i++) rnd[i] = (i * 7919 + 13) & 255;
  for (const n of [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 300]) {
    const data = rnd.subarray(0, n);
    assert.equal(new Sha256().update(data).digest('hex'), nodeCrypto.createHash('sha256').update(data).digest('hex'), `${n} bytes`);
  }
  const parts = ['kiln', 'é∑😀', '', 'x'.repeat(200)];
  const h = new Sha256();
  const n = nodeCrypto.createHash('sha256');
  for (const p of parts) {
    h.update(p);
    n.update(p, 'utf8');
  }
  const ints = Int32Array.from([1, -2, 300000]);
  h.update(ints);
  n.update(ints);
  assert.equal(h.digest('base64'), n.digest('base64'));
});

test('in Node the platform hands out Node itself', () => {
  assert.equal(platform.inNode, true);
  assert.equal(platform.fs.readFileSync, fs.readFileSync);
  assert.equal(platform.path.join('a', 'b'), path.join('a', 'b'));
  assert.equal(platform.createHash('sha256').update('abc').digest('hex'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(platform.env, process.env);
  assert.equal(platform.cpuCount() >= 1, true);
  assert.match(platform.randomHex(4), /^[0-9a-f]{8}$/);
});
