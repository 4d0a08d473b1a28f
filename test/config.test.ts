/**
 * Kiln's configuration registry (src/runtime/config.ts): every KILN_* name that src/ uses as an
 * environment variable is declared there (scanned from the sources, so a new undeclared variable
 * fails here), nothing else in src/ reads KILN_* variables from process.env, each option type
 * parses and rejects values with a message naming the variable and what it accepts, overrides beat
 * the environment, the fingerprint follows code-affecting options only, `kiln info` lists every
 * option, and compile modes decode to named options (an unknown one is an error).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  OPTIONS,
  configFingerprint,
  describeOptions,
  getOption,
  optionSource,
  parseOption,
  setOption,
  withEnvOption,
  withOptionSnapshot,
  type OptionName,
} from '../src/runtime/config.js';
import { programCacheKey } from '../src/compile/cache/program-key.js';
import { decodeMode, COMPILE_MODES } from '../src/compile/mode.js';
import { graphPolicy } from '../src/compile/cuda-graphs/compile-cuda.js';
import { formatOptions } from '../src/cli/info.js';
import { nativeThreads, setNativeThreads } from '../src/kernels/cpu/native/threads.js';
import { setCpuPath } from '../src/kernels/cpu/native/path.js';
import { backends } from '../src/runtime/backends.js';
import * as kiln from '../src/index.js';
import { withEnv } from './helpers/env.js';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));
const CONFIG = path.join(SRC, 'runtime', 'config.ts');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

const files = sourceFiles(SRC).filter((f) => f !== CONFIG);
const texts = new Map(files.map((f) => [f, fs.readFileSync(f, 'utf8')]));
const all = [...texts.values()].join('\n');

test('the sources were found (the scan below is not vacuous)', () => {
  assert.ok(files.length > 100, `found ${files.length} source files under ${SRC}`);
  assert.ok(fs.existsSync(CONFIG));
});

test('every KILN_* environment name in src/ is declared in runtime/config.ts', () => {
  // Names that are not environment variables: macros of generated C/CUDA code and warning codes.
  const macros = new Set([...all.matchAll(/#\s*(?:define|ifndef|ifdef|undef)\s+(KILN_[A-Z0-9_]+)/g)].map((m) => m[1]!));
  const codes = new Set([...all.matchAll(/code: '(KILN_[A-Z0-9_]+)'/g)].map((m) => m[1]!));
  assert.ok(macros.has('KILN_INF') && codes.has('KILN_GRAPH_BREAK'), 'the classification finds the known macros and codes');
  const undeclared = new Map<string, string>();
  for (const [file, text] of texts) {
    for (const m of text.matchAll(/KILN_[A-Z0-9_]+/g)) {
      const name = m[0];
      if (macros.has(name) || codes.has(name)) continue;
      const declared = Object.hasOwn(OPTIONS, name) && OPTIONS[name as OptionName].env;
      if (!declared && !undeclared.has(name)) undeclared.set(name, path.relative(SRC, file));
    }
  }
  assert.deepEqual([...undeclared].map(([n, f]) => `${n} (${f})`), [], 'declare these in src/runtime/config.ts (name, type, default, doc)');
});

test('every declared environment option is used somewhere in src/ (no stale declarations)', () => {
  const unused = (Object.keys(OPTIONS) as OptionName[]).filter((n) => OPTIONS[n].env && !all.includes(n));
  assert.deepEqual(unused, []);
});

test('no module but runtime/config.ts reads KILN_* variables from process.env', () => {
  const direct: string[] = [];
  for (const [file, text] of texts) {
    const rel = path.relative(SRC, file);
    for (const m of text.matchAll(/process\.env(?:\.KILN_|\[\s*['"`]KILN_)/g)) direct.push(`${rel}: ${text.slice(m.index, m.index + 40)}`);
    // A computed name (process.env[name]) would hide a KILN_ read from the scan above.
    for (const m of text.matchAll(/process\.env\[(?!\s*['"`])/g)) direct.push(`${rel}: ${text.slice(m.index, m.index + 40)}`);
  }
  assert.deepEqual(direct, []);
});

test('booleans: 0/1, true/false, on/off in any case; empty is the default; anything else names the variable', () => {
  for (const raw of ['0', 'false', 'OFF', ' 0 ']) assert.equal(parseOption('KILN_AUTOTUNE', raw), false, raw);
  for (const raw of ['1', 'TRUE', 'on']) assert.equal(parseOption('KILN_SGEMM', raw), true, raw);
  assert.equal(parseOption('KILN_AUTOTUNE', undefined), true);
  assert.equal(parseOption('KILN_AUTOTUNE', ''), true);
  assert.equal(parseOption('KILN_SGEMM', ''), false);
  assert.equal(parseOption('KILN_CUDA_GRAPHS', ''), undefined, 'no default: unset');
  assert.throws(() => parseOption('KILN_AUTOTUNE', 'maybe'), /^RangeError: KILN_AUTOTUNE must be 0\/1, true\/false or on\/off; got 'maybe'$/);
});

test('integers and numbers: bounds and malformed values are errors that name the variable', () => {
  assert.equal(parseOption('KILN_NUM_THREADS', ' 4 '), 4);
  assert.throws(() => parseOption('KILN_NUM_THREADS', '0'), /KILN_NUM_THREADS must be a positive integer; got '0'/);
  assert.throws(() => parseOption('KILN_NUM_THREADS', '2.5'), /KILN_NUM_THREADS must be a positive integer/);
  assert.throws(() => parseOption('KILN_NUM_THREADS', 'four'), /KILN_NUM_THREADS must be a positive integer; got 'four'/);
  assert.equal(parseOption('KILN_COMPILE_WORKERS', '0'), 0);
  assert.throws(() => parseOption('KILN_COMPILE_WORKERS', '-1'), /KILN_COMPILE_WORKERS must be a non-negative integer; got '-1'/);
  assert.equal(parseOption('KILN_GEMM_SPLIT_WAVES', '0.75'), 0.75);
  assert.throws(() => parseOption('KILN_GEMM_SPLIT_WAVES', 'half'), /KILN_GEMM_SPLIT_WAVES must be a number >= 0; got 'half'/);
  assert.throws(() => parseOption('KILN_GEMM_SPLIT_WAVES', '-1'), /KILN_GEMM_SPLIT_WAVES must be a number >= 0/);
});

test('enums list the allowed values; strings keep their spelling', () => {
  assert.equal(parseOption('KILN_CPU_PATH', 'WASM'), 'wasm');
  assert.equal(parseOption('KILN_CPU_PATH', ''), 'auto');
  assert.throws(() => parseOption('KILN_CPU_PATH', 'gpu'), /^RangeError: KILN_CPU_PATH must be one of native, wasm, js, auto; got 'gpu'$/);
  assert.equal(parseOption('KILN_PDL', 'all'), 'all');
  assert.equal(parseOption('KILN_PDL', 'on'), '1', 'aliases map to a value');
  assert.throws(() => parseOption('KILN_PDL', 'sometimes'), /KILN_PDL must be one of 0, 1, all, wait; got 'sometimes'/);
  assert.equal(parseOption('KILN_CACHE_DIR', '/tmp/My Cache '), '/tmp/My Cache ');
  assert.equal(parseOption('KILN_CACHE_DIR', '   '), undefined);
  assert.equal(parseOption('KILN_NVCC', undefined), 'nvcc');
  assert.throws(() => parseOption('KILN_NOPE' as OptionName, '1'), /unknown option 'KILN_NOPE'/);
});

test('reads follow the environment; a bad value fails at the read, naming the variable', () => {
  withEnv('KILN_COMPILE_WORKERS', '3', () => {
    assert.equal(getOption('KILN_COMPILE_WORKERS'), 3);
    assert.equal(optionSource('KILN_COMPILE_WORKERS'), 'env');
  });
  assert.equal(optionSource('KILN_COMPILE_WORKERS'), 'default');
  withEnv('KILN_COMPILE_WORKERS', 'many', () => assert.throws(() => getOption('KILN_COMPILE_WORKERS'), /KILN_COMPILE_WORKERS must be a non-negative integer; got 'many'/));
  withEnvOption('KILN_CACHE_DIR', '/tmp/kiln-config-test', () => assert.equal(getOption('KILN_CACHE_DIR'), '/tmp/kiln-config-test'));
  assert.equal(process.env.KILN_CACHE_DIR === '/tmp/kiln-config-test', false, 'withEnvOption restores the variable');
});

test('overrides beat the environment, and undefined goes back to it', () => {
  withEnv('KILN_NUM_THREADS', '3', () => {
    assert.equal(nativeThreads(), 3);
    setNativeThreads(5);
    try {
      assert.equal(getOption('KILN_NUM_THREADS'), 5);
      assert.equal(nativeThreads(), 5);
      assert.equal(optionSource('KILN_NUM_THREADS'), 'override');
    } finally {
      setNativeThreads(undefined);
    }
    assert.equal(nativeThreads(), 3);
    assert.equal(optionSource('KILN_NUM_THREADS'), 'env');
  });
  withEnv('KILN_CPU_PATH', 'js', () => {
    setCpuPath('wasm');
    try {
      assert.equal(getOption('KILN_CPU_PATH'), 'wasm');
    } finally {
      setCpuPath(undefined);
    }
    assert.equal(getOption('KILN_CPU_PATH'), 'js');
  });
  // The torch-style flag is a view of its option.
  const saved = backends.cuda.matmul.allowTf32;
  backends.cuda.matmul.allowTf32 = !saved;
  try {
    assert.equal(getOption('KILN_CUDA_MATMUL_TF32'), !saved);
    assert.equal(optionSource('KILN_CUDA_MATMUL_TF32'), 'override');
  } finally {
    setOption('KILN_CUDA_MATMUL_TF32', undefined);
  }
  assert.equal(backends.cuda.matmul.allowTf32, saved);
  assert.throws(() => setOption('KILN_NUM_THREADS', 0), /setOption\('KILN_NUM_THREADS'\): expected a positive integer, got 0/);
  assert.throws(() => setOption('cuda.longTopk', 'fastest' as never), /expected one of auto, select, segments, radix/);
});

test('the fingerprint follows code-affecting options, not logs, folders or worker counts', () => {
  const base = configFingerprint();
  assert.match(base, /^[0-9a-f]{64}$/);
  assert.equal(configFingerprint(), base, 'stable');
  const parts = { signature: 'g', guardKey: 'k', mode: 'default', backend: 'kiln', devices: ['cpu'] };
  const key = programCacheKey(parts);
  withEnv('KILN_HORIZONTAL_FUSION', '0', () => {
    assert.notEqual(configFingerprint(), base, 'an environment variable that changes codegen');
    assert.notEqual(programCacheKey(parts), key, 'and so the compiled-program cache key');
  });
  assert.equal(configFingerprint(), base);
  setOption('cuda.pointwiseWaves', 4);
  try {
    assert.notEqual(configFingerprint(), base, 'a runtime override that changes codegen');
  } finally {
    setOption('cuda.pointwiseWaves', undefined);
  }
  // Plumbing: neither the environment nor an override of these changes anything.
  withEnv('KILN_LOG', 'graph', () => withEnv('KILN_CACHE_DIR', '/tmp/elsewhere', () => withEnv('KILN_COMPILE_FAST_CALL', '0', () => assert.equal(configFingerprint(), base))));
  setOption('KILN_LOG', 'all');
  setOption('KILN_COMPILE_WORKERS', 0);
  try {
    assert.equal(configFingerprint(), base, 'KILN_LOG and KILN_COMPILE_WORKERS are not part of it');
    assert.equal(programCacheKey(parts), key);
  } finally {
    setOption('KILN_LOG', undefined);
    setOption('KILN_COMPILE_WORKERS', undefined);
  }
  assert.equal(OPTIONS.KILN_LOG.codegen, false);
  assert.equal(OPTIONS.KILN_CACHE_DIR.codegen, false);
});

test('describeOptions and kiln info list every option with value, default, source and doc', () => {
  setOption('cuda.attentionPath', 'math');
  try {
    withEnv('KILN_PDL', 'bogus', () => {
      const infos = describeOptions();
      assert.deepEqual(infos.map((o) => o.name), Object.keys(OPTIONS));
      const byName = new Map(infos.map((o) => [o.name, o]));
      assert.deepEqual(
        { value: byName.get('cuda.attentionPath')!.value, default: byName.get('cuda.attentionPath')!.default, source: byName.get('cuda.attentionPath')!.source },
        { value: 'math', default: 'auto', source: 'override' },
      );
      assert.match(byName.get('KILN_PDL')!.error ?? '', /KILN_PDL must be one of 0, 1, all, wait; got 'bogus'/, 'an invalid variable is reported, not thrown');
      const table = formatOptions(infos);
      for (const name of Object.keys(OPTIONS)) assert.ok(table.includes(name), name);
      assert.match(table, /cuda\.attentionPath\s+math\s+auto\s+override\s+cuda attention/);
      assert.match(table, /KILN_PDL\s+INVALID\s+0\s+env\s+KILN_PDL must be one of/);
      assert.match(table, /\* KILN_AUTOTUNE /, 'code-affecting options are starred');
      assert.match(table, / {2}KILN_LOG /);
    });
  } finally {
    setOption('cuda.attentionPath', undefined);
  }
  for (const o of describeOptions()) assert.ok(o.doc.length > 10, `${o.name} has a doc line`);
});

test('compile modes decode once into named options; an unknown mode names the allowed ones', () => {
  assert.deepEqual(COMPILE_MODES, ['default', 'reduce-overhead', 'max-autotune']);
  assert.deepEqual(decodeMode(undefined), { name: 'default', tuneOnFirstRun: false, cudaGraphs: 'measure', aliasOutputs: false });
  assert.deepEqual(decodeMode('default'), decodeMode(undefined));
  assert.deepEqual(decodeMode('reduce-overhead'), { name: 'reduce-overhead', tuneOnFirstRun: false, cudaGraphs: 'always', aliasOutputs: true });
  assert.deepEqual(decodeMode('max-autotune'), { name: 'max-autotune', tuneOnFirstRun: true, cudaGraphs: 'measure', aliasOutputs: false });
  const unknown = /^Error: kiln\.compile: unknown mode 'fast' \(expected 'default', 'reduce-overhead' or 'max-autotune'\)$/;
  assert.throws(() => decodeMode('fast'), unknown);
  assert.throws(() => decodeMode('toString'), /unknown mode 'toString'/, 'no prototype keys');
  assert.throws(() => decodeMode(3), /unknown mode '3'/);
  assert.throws(() => kiln.compile((x: kiln.Tensor) => x, { mode: 'fast' as never }), unknown, 'kiln.compile decodes at once');
  // The CUDA graph policy reads the decoded mode unless KILN_CUDA_GRAPHS decides.
  withEnv('KILN_CUDA_GRAPHS', undefined, () => {
    for (const m of COMPILE_MODES) assert.equal(graphPolicy(m), decodeMode(m).cudaGraphs, m);
  });
  assert.equal(graphPolicy('reduce-overhead', '0'), 'off');
  assert.throws(() => graphPolicy('default', 'sometimes'), /KILN_CUDA_GRAPHS must be 0\/1, true\/false or on\/off; got 'sometimes'/);
});

test('withOptionSnapshot: the environment is read once per option inside it, overrides still apply, and it is read afresh after', () => {
  withEnv('KILN_CPU_GEMV_ITEM_KIB', '32', () => {
    withOptionSnapshot(() => {
      assert.equal(getOption('KILN_CPU_GEMV_ITEM_KIB'), 32);
      process.env.KILN_CPU_GEMV_ITEM_KIB = '8';
      assert.equal(getOption('KILN_CPU_GEMV_ITEM_KIB'), 32, 'the first read holds inside the snapshot');
      withOptionSnapshot(() => assert.equal(getOption('KILN_CPU_GEMV_ITEM_KIB'), 32, 'a nested call shares it'));
      setOption('KILN_CPU_GEMV_ITEM_KIB', 16);
      try {
        assert.equal(getOption('KILN_CPU_GEMV_ITEM_KIB'), 16, 'an override applies at once');
      } finally {
        setOption('KILN_CPU_GEMV_ITEM_KIB', undefined);
      }
    });
    assert.equal(getOption('KILN_CPU_GEMV_ITEM_KIB'), 8, 'after it the environment is read again');
  });
  assert.equal(getOption('KILN_CPU_GEMV_ITEM_KIB'), 64);
});
