/**
 * The layer check (.dependency-cruiser.cjs, run in CI as `npm run lint:layers`) on a copy of src/:
 * the tree as it is passes, and each kind of forbidden import planted into the copy fails it with
 * the rule's name (an upward import between layers, a layer importing the public index, one
 * accelerator's folder importing another's). So the CI check can fail, and fails for the right reason.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { HANG_GUARD_MS } from './helpers/limits.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const cruiser = path.join(repo, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
// A dev dependency: present in CI and development, absent from a production install (the GPU machine).
const skip = fs.existsSync(cruiser) ? false : 'dependency-cruiser is not installed (a dev dependency; npm ci installs it)';

function copyTree(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-layers-'));
  fs.cpSync(path.join(repo, 'src'), path.join(dir, 'src'), { recursive: true });
  for (const f of ['tsconfig.json', '.dependency-cruiser.cjs']) fs.copyFileSync(path.join(repo, f), path.join(dir, f));
  return dir;
}

function cruise(dir: string): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [cruiser, 'src', '--config', '.dependency-cruiser.cjs', '--output-type', 'err'], { cwd: dir, encoding: 'utf8' });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

test('layer check: the tree passes, and planted forbidden imports fail with their rule', { timeout: HANG_GUARD_MS, skip }, () => {
  const dir = copyTree();
  try {
    const clean = cruise(dir);
    assert.equal(clean.status, 0, `the tree as it is must pass:\n${clean.out}`);
    assert.match(clean.out, /no dependency violations found/);

    const plant = (file: string, body: string): void => fs.writeFileSync(path.join(dir, 'src', file), body);
    plant('runtime/planted-upward.ts', "import { compile } from '../compile/compile.js';\nexport const planted = compile;\n");
    plant('kernels/planted-index.ts', "import { version } from '../index.js';\nexport const planted = version;\n");
    fs.mkdirSync(path.join(dir, 'src/kernels/webgpu'), { recursive: true });
    plant('kernels/webgpu/planted-vendor.ts', "import * as cuda from '../cuda/core.js';\nexport const planted = cuda;\n");
    const bad = cruise(dir);
    assert.notEqual(bad.status, 0, 'planted imports must fail the check');
    assert.match(bad.out, /error layer-runtime: src\/runtime\/planted-upward\.ts → src\/compile\/compile\.ts/);
    assert.match(bad.out, /error layer-root: src\/kernels\/planted-index\.ts → src\/index\.ts/);
    assert.match(bad.out, /error accelerator-cuda: src\/kernels\/webgpu\/planted-vendor\.ts → src\/kernels\/cuda\/core\.ts/);
    assert.match(bad.out, /3 dependency violations/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
