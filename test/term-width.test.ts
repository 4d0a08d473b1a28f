/**
 * Terminal-width fitting of `kiln bench`'s tables and progress line (src/cli/term-width.ts), as
 * pure functions: without a width the table is the old full-width text; a narrower terminal first
 * shortens the names, then wraps columns into blocks that repeat the name, never cutting a number.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fitLine, renderTable } from '../src/cli/term-width.js';
import { formatTable, type ReportRow } from '../src/cli/bench.js';

const HEADER = ['workload', 'device', 'eager ms', 'compiled ms'];
const BODY = [
  ['transformer-block-with-a-long-name', 'cpu', '12.345', '6.789'],
  ['mlp', 'cpu', '1.000', '0.500'],
];

test('no width: the full table, names left-aligned and numbers right-aligned', () => {
  assert.equal(
    renderTable(HEADER, BODY, 2),
    [
      'workload                            device  eager ms  compiled ms',
      '----------------------------------  ------  --------  -----------',
      'transformer-block-with-a-long-name  cpu       12.345        6.789',
      'mlp                                 cpu        1.000        0.500',
    ].join('\n'),
  );
  assert.equal(renderTable(HEADER, BODY, 2, 200), renderTable(HEADER, BODY, 2), 'a wide terminal changes nothing');
});

test('a narrower terminal shortens the names first', () => {
  const out = renderTable(HEADER, BODY, 2, 50).split('\n');
  assert.ok(out.every((l) => l.length <= 50), out.join('\n'));
  assert.equal(out[2], 'transformer-block-…  cpu       12.345        6.789');
  assert.equal(out[3], `${'mlp'.padEnd(19)}  cpu        1.000        0.500`);
});

test('a very narrow terminal wraps the columns into blocks that repeat the names', () => {
  const out = renderTable(HEADER, BODY, 2, 34);
  for (const l of out.split('\n')) assert.ok(l.length <= 34, `${l.length}: ${l}`);
  const blocks = out.split('\n\n');
  assert.equal(blocks.length, 2);
  assert.match(blocks[0]!, /^workload\s+device\s+eager ms\n/);
  assert.match(blocks[1]!, /^workload\s+compiled ms\n/);
  assert.match(blocks[1]!, /\nmlp\s+0\.500$/);
});

test('bench table at a terminal width; the progress line never reaches the last column', () => {
  const row: ReportRow = { framework: 'kiln', workload: 'qwen3-0.6b-forward', device: 'cpu', dtype: 'float32', size: 'tiny', eager_ms: 1, compiled_ms: 0.5, speedup: 2, compile_s: 1.5, max_abs_diff: 1e-6 };
  const full = formatTable([row]);
  assert.ok(full.split('\n')[0]!.length > 60);
  for (const l of formatTable([row], 60).split('\n')) assert.ok(l.length <= 60, l);
  assert.equal(fitLine('x'.repeat(10), 80), 'x'.repeat(10));
  assert.equal(fitLine('abcdefghij', 8), 'abcdef…');
  assert.equal(fitLine('abcdefghij', undefined), 'abcdefghij');
});
