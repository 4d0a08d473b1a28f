/** The package entry: `import * as kiln from 'kilnjs'` resolves through package.json "exports" (self-reference). */
import assert from 'node:assert/strict';
import { test } from 'node:test';

test("'kilnjs' resolves to the built entry point with the public API", async () => {
  // A variable specifier keeps the type checker from resolving 'kiln' before dist/ exists.
  const pkg = 'kilnjs';
  const byName = (await import(pkg)) as Record<string, unknown>;
  const direct = (await import('../src/index.js')) as Record<string, unknown>;
  assert.equal(byName.matmul, direct.matmul, 'the same module instance as the relative import');
  for (const name of ['tensor', 'zeros', 'Tensor', 'Event', 'nn', 'optim', 'autograd', 'io', 'models', 'serve', 'generate', 'scope', 'version']) {
    assert.ok(name in byName, `kiln.${name}`);
  }
});
