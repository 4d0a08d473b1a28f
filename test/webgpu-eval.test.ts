/**
 * Issue #20's bug: `node --input-type=module -e "<code using a webgpu op>"` waited 120 s for the
 * device thread, because the worker inherited `--input-type` and `-e` (its execArgv) and died
 * before its first line, which the main thread, blocked in Atomics.wait, could not notice. Kiln's
 * workers now start with the parent's options minus those (platform/worker-argv.ts). The test runs
 * such a child and checks what it prints; its timeout is generous and only stops a hang.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import test from 'node:test';
import { fileURLToPath } from 'node:url';
import { workerExecArgv } from '../src/platform/worker-argv.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();
const index = new URL('../src/index.js', import.meta.url).href;

test('workerExecArgv drops the eval, print, check and input-type options and keeps the rest', () => {
  assert.deepEqual(workerExecArgv(['--input-type=module', '-e', 'code', '--enable-source-maps']), ['--enable-source-maps']);
  assert.deepEqual(workerExecArgv(['--input-type', 'module', '--eval=code', '--conditions=x']), ['--conditions=x']);
  assert.deepEqual(workerExecArgv(['-p', 'code', '-c', '-i', '--print', 'x', '--max-old-space-size=100']), ['--max-old-space-size=100']);
  assert.deepEqual(workerExecArgv([]), []);
});

test('node --input-type=module -e with a webgpu op finishes and prints the right number', { skip }, () => {
  const code = `import * as kiln from ${JSON.stringify(index)}; const a = kiln.tensor([1, 2, 3, 4.5]).to('webgpu'); console.log('result', kiln.sum(kiln.mul(a, a)).item());`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 90_000, env: process.env, cwd: fileURLToPath(new URL('.', import.meta.url)) });
  assert.equal(r.error, undefined, `the child did not finish: ${String(r.error)}\n${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^result 34\.25$/m, `stdout: ${r.stdout}\nstderr: ${r.stderr}`);
});

// A program that queues thousands of dispatches and exits without reading a result used to abort
// (exit code 134, Dawn's napi_throw) when Node killed the device thread inside a Dawn call; the
// bridge now waits for the queued work at exit. The child also exits through process.exit(0).
for (const ending of ['natural', 'process.exit'] as const) {
  test(`a webgpu program that exits (${ending}) with work still queued exits cleanly`, { skip }, () => {
    const tail = ending === 'natural' ? '' : ' process.exit(0);';
    const code = `import * as kiln from ${JSON.stringify(index)}; const x = kiln.randn([8], { device: 'webgpu' }); for (let i = 0; i < 20000; i++) x.mul(2).add(1).dispose(); console.log('queued');${tail}`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 120_000, env: process.env, cwd: fileURLToPath(new URL('.', import.meta.url)) });
    assert.equal(r.error, undefined, `the child did not finish: ${String(r.error)}\n${r.stderr}`);
    assert.equal(r.signal, null, r.stderr);
    assert.equal(r.status, 0, `exit code ${r.status}: ${r.stderr.slice(0, 400)}`);
    assert.match(r.stdout, /^queued$/m);
  });
}
