/**
 * Differential fuzzer, Kiln half (issue #18 item 7): replays the PyTorch-made fixture
 * (test/fixtures/fuzz-cases.json.gz, written by scripts/fuzz/gen_cases.py on a machine with torch)
 * eagerly and under kiln.compile on the cpu path that KILN_CPU_PATH selects (scripts/test-cpu-paths.sh
 * runs it once per path), and on cuda where it is available. Mismatches are grouped by op; the ones
 * test/fixtures/fuzz-known.json documents are reported, anything else fails. Without a fixture the
 * tests skip and say how to make one.
 *
 * KILN_FUZZ_COMPILE: how many cases run compiled ('all', or a count spread over the fixture;
 * default all). Each compiled case is its own program, so this bounds the time on a slow machine.
 * KILN_FUZZ_CUDA: the same for both cuda modes (eager and compiled; a first run on a GPU builds
 * an NVRTC kernel for most new op and layout combinations).
 * KILN_FUZZ_REPORT=DIR writes every mismatch of each mode to DIR/fuzz-<mode>.json, for triage.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { getOption } from '../src/runtime/config.js';
import { loadFixture, loadSpec, type FuzzCase } from './helpers/fuzz/fixture.js';
import { groupReport, loadKnown, sortMismatches } from './helpers/fuzz/known.js';
import { MODES, replayCase, type Exactness, type Mismatch } from './helpers/fuzz/replay.js';

const { fixture, why } = loadFixture();
const skip = fixture ? false : why;
const cudaOk = kiln.isAvailable('cuda');
const cpuPath = String(getOption('KILN_CPU_PATH'));
const exactness: Exactness = new Map();

/** The cases `variable` ('all' or a count spread over the fixture) selects. */
function subset(cases: FuzzCase[], variable: 'KILN_FUZZ_COMPILE' | 'KILN_FUZZ_CUDA'): FuzzCase[] {
  const want = process.env[variable] ?? 'all';
  if (want === 'all') return cases;
  const n = Number(want);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${variable} must be 'all' or a count, got ${want}`);
  const stride = Math.max(1, Math.ceil(cases.length / Math.max(n, 1)));
  return cases.filter((_, i) => i % stride === 0).slice(0, n);
}

// The ops issue #18 asks the fuzzer to cover at least (views, comparisons and logical ops included).
const REQUIRED = [
  'add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'where', 'clamp', 'exp', 'log', 'sqrt', 'tanh', 'sigmoid', 'relu', 'gelu',
  'abs', 'neg', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logicalAnd', 'logicalOr', 'logicalXor', 'logicalNot', 'sum', 'mean', 'amax',
  'amin', 'argmax', 'prod', 'var', 'std', 'logsumexp', 'softmax', 'logSoftmax', 'cumsum', 'matmul', 'transpose', 'permute',
  'reshape', 'expand', 'slice', 'cat', 'stack', 'gather', 'indexSelect', 'maskedFill', 'tril', 'triu', 'to',
];

test('fuzz spec: covers the required ops, and every kiln call it names exists', () => {
  const spec = loadSpec();
  assert.deepEqual(REQUIRED.filter((op) => !spec.ops[op]), []);
  assert.deepEqual(['add', 'mul', 'clamp'].filter((op) => spec.ops[op]!.inplace !== `.${op}_`), [], 'in-place forms add_, mul_, clamp_');
  const probe = kiln.zeros([2]) as unknown as Record<string, unknown>;
  const api = kiln as unknown as Record<string, unknown>;
  const missing: string[] = [];
  for (const [name, op] of Object.entries(spec.ops)) {
    for (const call of [op.kiln, op.inplace].filter((c): c is string => !!c)) {
      const fn = call.startsWith('.') ? probe[call.slice(1)] : api[call];
      if (typeof fn !== 'function') missing.push(`${name}: ${call}`);
    }
  }
  assert.deepEqual(missing, []);
});

test('fuzz fixture: every op of the spec runs without error in some case', { skip }, () => {
  const ran = new Set<string>();
  for (const c of fixture!.cases) c.steps.forEach((s) => s.out && ran.add(s.op));
  const missing = Object.keys(fixture!.spec.ops).filter((op) => !ran.has(op));
  assert.deepEqual(missing, [], `ops never run successfully by torch in the fixture: ${missing.join(', ')}`);
});

for (const mode of MODES) {
  const onCuda = mode.device === 'cuda';
  const modeSkip = skip || (onCuda && !cudaOk ? 'cuda is not available' : false);
  test(`fuzz replay vs torch: ${mode.name}${onCuda ? '' : ` (cpu path ${cpuPath})`}`, { skip: modeSkip }, (t) => {
    const onDevice = onCuda ? subset(fixture!.cases, 'KILN_FUZZ_CUDA') : fixture!.cases;
    const cases = mode.compiled ? subset(onDevice, 'KILN_FUZZ_COMPILE') : onDevice;
    const all: Mismatch[] = [];
    kiln.resetCompileCounters();
    for (const c of cases) all.push(...replayCase(fixture!.spec, c, mode, exactness));
    const sorted = sortMismatches(all, loadKnown());
    const dir = process.env.KILN_FUZZ_REPORT;
    if (dir) {
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `fuzz-${mode.name}.json`), JSON.stringify(sorted, null, 1));
    }
    t.diagnostic(`${cases.length} cases (torch ${fixture!.torch}): ${sorted.failing.length} failing, ${sorted.known.length} known, ${sorted.unstable.length} unstable`);
    if (mode.compiled) {
      // A compiled replay that quietly ran eagerly would prove nothing about the compiler.
      const k = kiln.compileCounters();
      t.diagnostic(`compile counters: ${k.compiles} compiles, ${k.graphBreaks} graph breaks, ${k.fallbacks} fallbacks`);
      const ran = cases.filter((c) => !c.error).length;
      assert.ok(ran === 0 || k.compiles >= ran / 2, `only ${k.compiles} of ${ran} cases compiled`);
    }
    if (sorted.known.length) t.diagnostic(`known (fuzz-known.json):\n${groupReport(sorted.known, 1)}`);
    if (sorted.unstable.length) t.diagnostic(`unstable (a comparison or cast after an inexact float step):\n${groupReport(sorted.unstable, 1)}`);
    assert.equal(sorted.failing.length, 0, `Kiln differs from torch ${sorted.failing.length} times:\n${groupReport(sorted.failing)}`);
  });
}
