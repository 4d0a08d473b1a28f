/**
 * The compile tests once more in verify mode (issue #18 item 3e): KILN_COMPILE_VERIFY=1 makes
 * every compiled call re-trace its function and fail on any difference from the compiled trace,
 * so a test whose function bakes in something that changes between calls fails here. Run as a
 * child process (the option is read when functions are compiled, and these files compile at
 * import time too). compile-fast-call is left out: it counts fast-path hits, which verify mode
 * turns off on purpose.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { HANG_GUARD_MS } from './helpers/limits.js';

const FILES = ['compile-api', 'compile-backward', 'compile-guards', 'compile-scope', 'compile-conv-bn', 'compile-horizontal', 'compile-semantics'];

test('the compile tests pass with KILN_COMPILE_VERIFY=1', () => {
  const files = FILES.map((f) => fileURLToPath(new URL(`./${f}.test.js`, import.meta.url)));
  // Without NODE_TEST_CONTEXT the child is a test run of its own that reports TAP on stdout.
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  const r = spawnSync(process.execPath, ['--test', '--test-reporter=tap', ...files], {
    encoding: 'utf8',
    env: { ...env, KILN_COMPILE_VERIFY: '1' },
    timeout: HANG_GUARD_MS,
  });
  const failed = r.stdout.split('\n').filter((l) => /^\s*not ok/.test(l));
  assert.equal(r.status, 0, `verify-mode run failed (status ${r.status}):\n${failed.join('\n')}\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-2000)}`);
  assert.match(r.stdout, /# pass [1-9]\d*/);
});
