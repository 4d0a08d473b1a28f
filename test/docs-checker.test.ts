/**
 * The checker behind test/docs-examples.test.ts rejects what the issue found in the docs (a
 * shell pipe inside an option list) and each other kind of command that cannot work: unknown
 * flags, scripts, subcommands, files, option values, bare curl; and it reads marks and blocks
 * from Markdown as documented. Uses the built CLI, like the docs test.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { extractBlocks } from './helpers/doc-blocks.js';
import { checkCommand, kilnCommands, parseShell } from './helpers/doc-commands.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const cliCommands = kilnCommands(root);
const check = (line: string, marks: ('server' | 'slow')[] = []) => parseShell(line).flat().map((c) => checkCommand(c, { root, cliCommands, marks }));

test('shell lines: quotes, comments, && chains and VAR=value prefixes', () => {
  const [chain] = parseShell(`KILN_CPU_PATH=wasm npx kiln generate --prompt 'a b' --chat && npm test # comment | ;`);
  assert.deepEqual(chain, [
    { env: { KILN_CPU_PATH: 'wasm' }, argv: ['npx', 'kiln', 'generate', '--prompt', 'a b', '--chat'] },
    { env: {}, argv: ['npm', 'test'] },
  ]);
  assert.equal(parseShell('npx kiln info \\\n  --json').length, 1);
});

test('the pipe in `--size tiny|cpu|full` and other shell syntax are rejected', () => {
  assert.throws(() => parseShell('npm run bench -- --size tiny|cpu|full'), /'\|'/);
  assert.throws(() => parseShell('npx kiln info > out.txt'), /'>'/);
  assert.throws(() => parseShell('echo $(pwd)'), /'\$'/);
});

test('commands that cannot work are errors; working ones come back runnable or skipped', () => {
  assert.throws(() => check('npm run bench -- --size huge'), /--size must be one of/);
  assert.throws(() => check('npm run bench -- --bogus'), /bogus/);
  assert.throws(() => check('npx kiln generate --random tiny --bogus 1'), /bogus/);
  assert.throws(() => check('npx kiln frobnicate'), /not a command of kiln help/);
  assert.throws(() => check('npm run nosuchscript'), /no such script/);
  assert.throws(() => check('npm install kiln'), /the package is kilnjs/);
  assert.throws(() => check('KILN_CPU_PATH=fast npx kiln info'), /KILN_CPU_PATH/);
  assert.throws(() => check('KILN_NOT_AN_OPTION=1 npx kiln info'), /not a declared KILN_\* option/);
  assert.throws(() => check('node dist/examples/missing.js'), /does not exist/);
  assert.throws(() => check('curl http://127.0.0.1:8000/health'), /mark the block `server`/);
  assert.throws(() => check('rm -rf dist'), /not a command the docs test knows/);
  const [gen] = check('npx kiln generate --random tiny --prompt-ids 1,2 --max-tokens 2');
  assert.ok(gen && 'run' in gen && gen.run.at(-1) === '2');
  assert.deepEqual(check('npm test')[0], { skip: 'the whole test suite' });
  assert.ok('skip' in check('curl http://127.0.0.1:8000/health', ['server'])[0]!);
});

test('blocks and their docs-test marks are read from Markdown; an unknown mark is an error', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-doc-blocks-'));
  try {
    mkdirSync(join(dir, 'docs'));
    const md = join(dir, 'docs', 'x.md');
    writeFileSync(md, 'text\n\n<!-- docs-test: slow, gpu -->\n\n```sh\nnpm test\n```\n\n```ts\nconst a = 1;\n```\n');
    const blocks = extractBlocks(dir, md);
    assert.deepEqual(blocks.map((b) => [b.file, b.line, b.lang, b.marks, b.code]), [
      [join('docs', 'x.md'), 5, 'sh', ['slow', 'gpu'], 'npm test\n'],
      [join('docs', 'x.md'), 9, 'ts', [], 'const a = 1;\n'],
    ]);
    writeFileSync(md, '<!-- docs-test: slwo -->\n```sh\nnpm test\n```\n');
    assert.throws(() => extractBlocks(dir, md), /unknown docs-test mark 'slwo'/);
    writeFileSync(md, '```ts\nconst a = 1;\n');
    assert.throws(() => extractBlocks(dir, md), /unterminated code fence/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
