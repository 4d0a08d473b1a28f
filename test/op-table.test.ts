/**
 * docs/ops.md is the registry's op table as test/helpers/op-table.ts renders it: adding an op or a
 * kernel without regenerating the page (node scripts/op-table.mjs) fails here.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { opTableMarkdown } from './helpers/op-table.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const page = [path.join(here, '../docs/ops.md'), path.join(here, '../../docs/ops.md')].find((p) => fs.existsSync(p));

test('docs/ops.md matches the op registry (regenerate with node scripts/op-table.mjs)', () => {
  assert.ok(page, 'docs/ops.md exists');
  assert.equal(fs.readFileSync(page, 'utf8'), opTableMarkdown());
});
