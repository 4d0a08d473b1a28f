/**
 * Docs that run (issue #19): every fenced block of README.md and docs/*.md works as written.
 *
 * ```ts blocks are written to dist/docs-examples/ (inside the repository, so `import 'kilnjs'`
 * resolves through package.json "exports" as it does for a user of the package), type-checked
 * together in one strict TypeScript program, and each is run alone with node from the repository
 * root, as a user would paste it: no block may lean on an earlier one.
 * ```sh blocks: every command is checked (npm scripts, `kiln` subcommands and flags through the
 * CLI's own parser, files, KILN_* values; see helpers/doc-commands.ts) and, unless the block is
 * marked `<!-- docs-test: slow | gpu | server | network | browser -->`, run for real and must exit 0.
 * A marked ts block is type-checked with the others and not run.
 * Runs use a fresh KILN_CACHE_DIR so a warm cache cannot hide a failing compile. Under a forced
 * cpu path (`npm run test:paths` sets KILN_CPU_PATH) the runs are skipped and only the checks
 * remain: the examples are a user's default path, and repeating them twice would add two minutes
 * to CI for what the rest of the suite already covers per path.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { docFiles, extractBlocks, LANGS, type DocBlock } from './helpers/doc-blocks.js';
import { checkCommand, kilnCommands, parseShell, type CommandPlan } from './helpers/doc-commands.js';
import { HANG_GUARD_MS } from './helpers/limits.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const outDir = join(root, 'dist', 'docs-examples');
const cacheDir = mkdtempSync(join(tmpdir(), 'kiln-docs-cache-'));
after(() => rmSync(cacheDir, { recursive: true, force: true }));

const blocks: DocBlock[] = docFiles(root).flatMap((f) => extractBlocks(root, f));
const where = (b: DocBlock): string => `${b.file}:${b.line}`;
/** Per example: a hang guard for one run (the README promises seconds; that is a claim for bench.md, not a test). */
const RUN_LIMIT_MS = HANG_GUARD_MS;
const forcedPath = process.env.KILN_CPU_PATH !== undefined && process.env.KILN_CPU_PATH !== '' ? `KILN_CPU_PATH=${process.env.KILN_CPU_PATH}: runs happen in npm test` : false;

function run(argv: readonly string[], env: Record<string, string> = {}): { status: number | null; out: string } {
  const r = spawnSync(argv[0]!, argv.slice(1), {
    cwd: root,
    encoding: 'utf8',
    timeout: RUN_LIMIT_MS,
    env: { ...process.env, KILN_CACHE_DIR: cacheDir, ...env },
  });
  return { status: r.status, out: `${r.stdout}\n${r.stderr}${r.error ? `\n${r.error.message}` : ''}` };
}

test('the docs have blocks, each in a language the docs test knows', () => {
  assert.ok(blocks.some((b) => b.file === 'README.md' && b.lang === 'ts'));
  for (const b of blocks) assert.ok((LANGS as readonly string[]).includes(b.lang), `${where(b)}: code block language '${b.lang}' (use one of ${LANGS.join(', ')})`);
});

// ---------------------------------------------------------------------------------------------
// TypeScript: one strict program over every block, then each block run on its own.

const tsBlocks = blocks.filter((b) => b.lang === 'ts');
const tsFile = (b: DocBlock): string => join(outDir, `${basename(b.file, '.md')}-L${b.line}.ts`);

test('every ts block type-checks under strict settings, importing kilnjs by its package name', () => {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  for (const b of tsBlocks) writeFileSync(tsFile(b), b.code);
  const program = ts.createProgram(tsBlocks.map(tsFile), {
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noImplicitOverride: true,
    skipLibCheck: true,
    types: ['node'],
    noEmitOnError: false, // a block with a type error still runs, so its run reports too
  });
  const problems = ts.getPreEmitDiagnostics(program).map((d) => {
    const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (!d.file || d.start === undefined) return text;
    const b = tsBlocks.find((x) => tsFile(x) === resolve(d.file!.fileName));
    const { line } = d.file.getLineAndCharacterOfPosition(d.start);
    return b ? `${b.file}:${b.line + 1 + line}: ${text}` : `${d.file.fileName}:${line + 1}: ${text}`;
  });
  const emitted = program.emit(); // before the verdict: the run tests below need the .js files
  assert.equal(emitted.emitSkipped, false);
  assert.deepEqual(problems, []);
});

for (const b of tsBlocks) {
  const skip = b.marks.length > 0 ? `marked ${b.marks.join(', ')}` : forcedPath;
  test(`ts block ${where(b)} runs on its own`, { skip }, () => {
    const r = run([process.execPath, tsFile(b).replace(/\.ts$/, '.js')]);
    assert.equal(r.status, 0, `${where(b)} failed:\n${r.out}`);
  });
}

// ---------------------------------------------------------------------------------------------
// Shell: every command checked; the blocks without a mark run for real.

const cliCommands = kilnCommands(root);

for (const b of blocks.filter((x) => x.lang === 'sh')) {
  test(`sh block ${where(b)}: commands exist${b.marks.length > 0 ? ` (not run: ${b.marks.join(', ')})` : ' and run'}`, () => {
    const chains = parseShell(b.code);
    assert.ok(chains.length > 0, `${where(b)}: empty sh block`);
    const plans: CommandPlan[] = [];
    for (const chain of chains)
      for (const cmd of chain) {
        try {
          plans.push(checkCommand(cmd, { root, cliCommands, marks: b.marks }));
        } catch (e) {
          assert.fail(`${where(b)}: ${cmd.argv.join(' ')}: ${(e as Error).message}`);
        }
      }
    if (b.marks.length > 0 || forcedPath) return;
    for (const p of plans) {
      if ('skip' in p) assert.fail(`${where(b)}: a command here is not run by the test (${p.skip}); mark the block with <!-- docs-test: slow --> (or gpu, server)`);
      const r = run(p.run, p.env);
      assert.equal(r.status, 0, `${where(b)}: ${p.run.slice(1).join(' ')} failed:\n${r.out}`);
    }
  });
}
