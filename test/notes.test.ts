/**
 * No silent waits (runtime/notes.ts): a build at or over KILN_BUILD_NOTE_MS prints one note, a
 * shorter one only under KILN_LOG=build, KILN_QUIET silences the note; the clock is injected, so
 * nothing depends on real timing. Then a real native build with the threshold at 0 notes itself
 * and its cache hit logs under KILN_LOG=cache instead; KILN_LOG topic parsing.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { setOption } from '../src/runtime/config.js';
import { noteBuild, parseRuntimeLogTopics, setNoteSink, timeBuild, formatDuration } from '../src/runtime/notes.js';
import { buildSharedObjectSync, probeToolchain } from '../src/kernels/cpu/native/index.js';
import { withCacheDir } from './helpers/cache-dir.js';

/** Runs `fn` with notes captured (and the given option overrides), restoring both. */
function capture(options: { ms?: number; quiet?: boolean; log?: string }, fn: () => void): string[] {
  const lines: string[] = [];
  const prev = setNoteSink((l) => lines.push(l));
  setOption('KILN_BUILD_NOTE_MS', options.ms);
  setOption('KILN_QUIET', options.quiet);
  setOption('KILN_LOG', options.log);
  try {
    fn();
  } finally {
    setNoteSink(prev);
    setOption('KILN_BUILD_NOTE_MS', undefined);
    setOption('KILN_QUIET', undefined);
    setOption('KILN_LOG', undefined);
  }
  return lines;
}

/** A clock that returns the given readings in turn. */
const clock = (...readings: number[]): (() => number) => () => readings.shift()!;

test('a build over the threshold prints one note with its time; a quick one only under KILN_LOG=build', () => {
  let value = 0;
  const slow = capture({}, () => {
    value = timeBuild('native CPU kernels (x)', () => 42, clock(1000, 3300));
  });
  assert.equal(value, 42, 'timeBuild returns the build result');
  assert.deepEqual(slow, ['kiln: built native CPU kernels (x) in 2.3 s (first use; cached on disk for later runs, see kiln cache info)']);
  assert.deepEqual(capture({}, () => timeBuild('x', () => 0, clock(0, 499))), [], 'under the default 500 ms: silent');
  assert.deepEqual(capture({ log: 'graph,build' }, () => timeBuild('x', () => 0, clock(0, 120))), ['kiln[build]: built x in 120 ms']);
  assert.deepEqual(capture({ quiet: true, log: 'build' }, () => noteBuild('x', 5000)), ['kiln[build]: built x in 5.0 s'], 'KILN_QUIET keeps the log topic');
  assert.deepEqual(capture({ quiet: true }, () => noteBuild('x', 5000)), []);
  // The build's own text can depend on its result (how many kernels a batch built).
  assert.deepEqual(capture({ ms: 0 }, () => timeBuild((n: number) => `${n} kernels`, () => 3, clock(0, 0))), ['kiln: built 3 kernels in 0 ms (first use; cached on disk for later runs, see kiln cache info)']);
  assert.equal(formatDuration(999.6), '1000 ms');
});

test('KILN_LOG topics: runtime names picked out of a list that also holds compiler artifacts', () => {
  assert.deepEqual([...parseRuntimeLogTopics('graph, build,+cache output_code')].sort(), ['build', 'cache']);
  assert.deepEqual([...parseRuntimeLogTopics('all')].sort(), ['build', 'cache', 'device', 'tune']);
  assert.deepEqual([...parseRuntimeLogTopics(undefined)], []);
  assert.throws(() => setOption('KILN_BUILD_NOTE_MS', -1), /KILN_BUILD_NOTE_MS.*non-negative integer/);
});

const probe = probeToolchain();
test('a real native build notes itself at threshold 0; its cache hit does not, and logs under KILN_LOG=cache', { skip: probe.ok ? false : `no C compiler: ${probe.ok ? '' : probe.reason}` }, () => {
  if (!probe.ok) return;
  const tc = probe.toolchain;
  // A source no other test builds, so the first call is a real compile in a fresh cache folder.
  const source = `int kiln_note_test(void) { return ${process.pid}; }\n`;
  withCacheDir(() => {
    let file = '';
    const first = capture({ ms: 0 }, () => {
      file = buildSharedObjectSync('kiln_note_test', source, tc);
    });
    assert.equal(first.length, 1, first.join('\n'));
    assert.match(first[0]!, /^kiln: built native CPU kernels \(kiln_note_test\) in \d+( ms|\.\d s) \(first use; cached on disk/);
    assert.ok(fs.existsSync(file) && file.startsWith(process.env.KILN_CACHE_DIR!));
    const hit = capture({ ms: 0, log: 'cache' }, () => {
      assert.equal(buildSharedObjectSync('kiln_note_test', source, tc), file);
    });
    assert.deepEqual(hit, [`kiln[cache]: native object ${path.basename(file).slice(0, 12)} from ${file}`]);
  }, 'kiln-notes-');
});
