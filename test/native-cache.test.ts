/**
 * The native build machinery: compiler discovery, the 'cc' compile task (in a worker and
 * in-process), the shared-object cache (hits, corrupt objects detected by hash and rebuilt,
 * compiler diagnostics with the generated line), loading through koffi, and the path selection
 * (KILN_CPU_PATH, fallback to Wasm without a compiler, shown in child processes so the choice is
 * made fresh). Tests that need a compiler skip with the reason where none works.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { annotateDiagnostics, ccTask } from '../src/runtime/pool/cc-task.js';
import { setCompileWorkers, shutdownCompilePool } from '../src/runtime/pool/pool.js';
import {
  buildSharedObject, buildSharedObjectSync, compilerCandidates, cpuFeatures, loadLibrary, nativeCacheStats, NativeCompileError, objectKey, objectsDir, probeToolchain,
} from '../src/kernels/cpu/native/index.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;
const here = path.dirname(fileURLToPath(import.meta.url));

function withCacheDir<T>(fn: (dir: string) => T): T {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-native-test-'));
  const old = process.env.KILN_CACHE_DIR;
  process.env.KILN_CACHE_DIR = dir;
  try {
    return fn(dir);
  } finally {
    if (old === undefined) delete process.env.KILN_CACHE_DIR;
    else process.env.KILN_CACHE_DIR = old;
  }
}

const ADD = (c: number): string => `int kiln_test_add(int a, int b) { return a + b + ${c}; }\n`;

test('toolchain: KILN_CC picks the compiler; features come from /proc/cpuinfo', () => {
  const old = process.env.KILN_CC;
  process.env.KILN_CC = '/nonexistent/kiln-cc';
  try {
    assert.deepEqual(compilerCandidates(), ['/nonexistent/kiln-cc']);
    const p = probeToolchain();
    assert.equal(p.ok, false);
    assert.match(p.ok ? '' : p.reason, /no working C compiler .*\/nonexistent\/kiln-cc: not found/);
  } finally {
    if (old === undefined) delete process.env.KILN_CC;
    else process.env.KILN_CC = old;
  }
  if (process.arch === 'x64' && fs.existsSync('/proc/cpuinfo')) {
    const flags = /^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim().split(/\s+/) ?? [];
    for (const f of cpuFeatures()) assert.ok(flags.includes(f), `${f} reported but not in /proc/cpuinfo`);
    assert.equal(cpuFeatures().includes('avx2'), flags.includes('avx2'));
  }
});

test('toolchain: the probed flags match the CPU and OpenMP links', { skip }, () => {
  assert.ok(probe.ok);
  const t = probe.toolchain;
  assert.ok(path.isAbsolute(t.compiler));
  assert.ok(t.version.length > 0);
  assert.ok(t.flags.includes('-O3') && t.flags.includes('-shared') && t.flags.includes('-fPIC'));
  assert.equal(t.flags.includes('-fopenmp'), t.openmp);
  if (process.arch === 'x64' && t.features.includes('avx2')) {
    assert.ok(t.flags.includes('-march=native') || t.flags.includes('-mavx2'), `flags ${t.flags.join(' ')} do not enable AVX2`);
  }
});

test('cc task: builds in a worker; a hit is served from disk; a corrupt object is detected and rebuilt', { skip }, async () => {
  assert.ok(probe.ok);
  const tc = probe.toolchain;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-native-test-'));
  const old = process.env.KILN_CACHE_DIR;
  process.env.KILN_CACHE_DIR = dir;
  try {
    const s0 = nativeCacheStats();
    const file = await buildSharedObject('kiln_test_add', ADD(1), tc);
    assert.equal(path.dirname(file), objectsDir());
    assert.equal(path.basename(file), `${objectKey(ADD(1), tc)}.so`);
    assert.equal(loadLibrary(file).func('int kiln_test_add(int a, int b)')(2, 3), 6);
    assert.equal(nativeCacheStats().builds, s0.builds + 1);
    // Same source and toolchain: a hit, no build; no temp files left behind.
    assert.equal(buildSharedObjectSync('kiln_test_add', ADD(1), tc), file);
    assert.equal(nativeCacheStats().builds, s0.builds + 1);
    assert.equal(nativeCacheStats().hits, s0.hits + 1);
    assert.deepEqual(fs.readdirSync(objectsDir()).filter((f) => f.includes('.tmp') || f.startsWith('.cc-')), []);
    // Builds are reproducible: a rebuild of the same source gives the same bytes (the hash other
    // processes recorded for the same key stays valid).
    const before = fs.readFileSync(file);
    fs.rmSync(file);
    assert.deepEqual(fs.readFileSync(buildSharedObjectSync('kiln_test_add', ADD(1), tc)), before);
    // A truncated object no longer matches its hash: deleted and rebuilt, never loaded.
    const src2 = ADD(2);
    const f2 = buildSharedObjectSync('kiln_test_add2', src2, tc);
    fs.writeFileSync(f2, 'not an ELF file');
    const f2b = buildSharedObjectSync('kiln_test_add2', src2, tc);
    assert.equal(f2b, f2);
    assert.equal(nativeCacheStats().corrupt, s0.corrupt + 1);
    assert.equal(nativeCacheStats().builds, s0.builds + 4);
    assert.equal(loadLibrary(f2b).func('int kiln_test_add(int a, int b)')(2, 3), 7);
    // A missing object with its cache entry still present: rebuilt too.
    fs.rmSync(f2b);
    assert.equal(buildSharedObjectSync('kiln_test_add2', src2, tc), f2);
    assert.ok(fs.existsSync(f2));
  } finally {
    if (old === undefined) delete process.env.KILN_CACHE_DIR;
    else process.env.KILN_CACHE_DIR = old;
    await shutdownCompilePool();
  }
});

test('cc task: a compile error carries the compiler stderr and the generated line, in a worker and in-process', { skip }, async () => {
  assert.ok(probe.ok);
  const tc = probe.toolchain;
  const bad = 'int ok(void) { return 1; }\nint broken(void) { return undeclared_thing + 1; }\n';
  for (const workers of [1, 0]) {
    setCompileWorkers(workers);
    try {
      await withCacheDir(async () => {
        await assert.rejects(buildSharedObject('kiln_bad', bad, tc), (e: Error) => {
          assert.ok(e instanceof NativeCompileError, `got ${e.name}`);
          assert.match(e.message, /kiln_bad: C compiler exited with status 1/);
          assert.match(e.message, /undeclared_thing/);
          assert.match(e.message, /generated line 2: int broken\(void\) \{ return undeclared_thing \+ 1; \}/);
          return true;
        });
        assert.throws(() => buildSharedObjectSync('kiln_bad', bad, tc), NativeCompileError);
      });
    } finally {
      setCompileWorkers(undefined);
      await shutdownCompilePool();
    }
  }
});

test('cc task: malformed payloads throw; a missing compiler is reported as data', () => {
  assert.throws(() => ccTask({ compiler: 'cc', args: [], libs: [], source: 'x', name: '' }), /'name' must be a non-empty string/);
  assert.throws(() => ccTask({ compiler: 'cc', args: 'x', libs: [], source: 'x', name: 'n', outFile: '/tmp/x.so' }), /'args' must be an array of strings/);
  const out = path.join(os.tmpdir(), `kiln-cc-missing-${process.pid}`, 'x.so');
  const r = ccTask({ compiler: '/nonexistent/kiln-cc', args: [], libs: [], source: 'int x;', name: 'n', outFile: out });
  assert.equal(r.ok, false);
  assert.match(r.ok ? '' : r.error, /n: cannot run C compiler '\/nonexistent\/kiln-cc'/);
  assert.deepEqual(fs.readdirSync(path.dirname(out)), [], 'the temporary source is removed');
});

test('annotateDiagnostics appends the generated line after each file:line:col diagnostic', () => {
  const src = 'int a;\nint b = c;\n';
  const out = annotateDiagnostics("/tmp/k.c:2:9: error: 'c' undeclared\n", '/tmp/k.c', src);
  assert.equal(out, "/tmp/k.c:2:9: error: 'c' undeclared\n    generated line 2: int b = c;");
});

/** Runs a child node process that prints cpuPathInfo() as JSON, with extra environment. */
function childPathInfo(env: Record<string, string>): { status: number | null; out: string; err: string } {
  const mod = path.join(here, '..', 'src', 'kernels', 'cpu', 'native', 'path.js');
  const code = `import(${JSON.stringify(mod)}).then((m) => { try { console.log(JSON.stringify(m.cpuPathInfo())); } catch (e) { console.error(e.message); process.exit(3); } })`;
  const r = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, ...env }, encoding: 'utf8' });
  return { status: r.status, out: r.stdout, err: r.stderr };
}

test('path selection: no compiler -> wasm with the reason; KILN_CPU_PATH forces a path; forced native without a compiler fails clearly', () => {
  const none = childPathInfo({ KILN_CC: '/nonexistent/kiln-cc', KILN_CPU_PATH: '' });
  assert.equal(none.status, 0, none.err);
  const info = JSON.parse(none.out) as { path: string; forced: boolean; reason: string };
  assert.equal(info.path, 'wasm');
  assert.equal(info.forced, false);
  assert.match(info.reason, /no native code: .*\/nonexistent\/kiln-cc: not found/);
  for (const p of ['wasm', 'js']) {
    const r = childPathInfo({ KILN_CPU_PATH: p });
    assert.equal((JSON.parse(r.out) as { path: string; forced: boolean }).path, p);
  }
  const forced = childPathInfo({ KILN_CC: '/nonexistent/kiln-cc', KILN_CPU_PATH: 'native' });
  assert.equal(forced.status, 3);
  assert.match(forced.err, /KILN_CPU_PATH=native, but the native cpu path is unavailable: no working C compiler/);
  const badEnv = childPathInfo({ KILN_CPU_PATH: 'gpu' });
  assert.equal(badEnv.status, 3);
  assert.match(badEnv.err, /KILN_CPU_PATH must be one of native, wasm, js, auto; got 'gpu'/);
});

test('path selection: with a working compiler the automatic choice is native', { skip }, () => {
  const r = childPathInfo({ KILN_CPU_PATH: '' });
  assert.equal(r.status, 0, r.err);
  const info = JSON.parse(r.out) as { path: string; reason: string };
  assert.equal(info.path, 'native');
  assert.match(info.reason, /C compiler works/);
  // The compiler is really there: the same binary answers --version.
  assert.ok(probe.ok && execFileSync(probe.toolchain.compiler, ['--version'], { encoding: 'utf8' }).startsWith(probe.toolchain.version));
});
