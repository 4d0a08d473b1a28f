// Writes docs/ops.md from the op registry (see test/helpers/op-table.ts). Run after `npm run build`.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const { opTableMarkdown } = await import(path.join(root, 'dist/test/helpers/op-table.js'));
fs.writeFileSync(path.join(root, 'docs/ops.md'), opTableMarkdown());
console.log('wrote docs/ops.md');
