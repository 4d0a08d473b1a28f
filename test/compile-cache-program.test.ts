/**
 * Whole compiled programs in the disk cache, in one process: the identity-preserving encoder, a
 * fresh compiled function of the same graph loading the stored program (disk hit, no lowering or
 * codegen, same results as eager), keys that change with what changes the output (dtype, mode,
 * code-affecting KILN_* options) and not with what does not (KILN_LOG), lifted parameters taken from
 * the new trace (not the stored one), and damaged program entries discarded and rebuilt.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, beforeEach, test } from 'node:test';
import * as kiln from '../src/index.js';
import { encodeEntry, getDiskCache } from '../src/runtime/cache/index.js';
import { NotSerializable, decodeObjectGraph, encodeObjectGraph } from '../src/compile/cache/object-graph.js';
import { compilerCodeHash, programCacheKey } from '../src/compile/cache/program-key.js';
import { PROGRAM_NAMESPACE } from '../src/compile/codegen/js/program-cache.js';

const tmpDirs: string[] = [];
const savedDir = process.env.KILN_CACHE_DIR;
function freshCacheDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-program-cache-'));
  tmpDirs.push(d);
  process.env.KILN_CACHE_DIR = d;
  return d;
}
beforeEach(() => freshCacheDir());
after(() => {
  if (savedDir === undefined) delete process.env.KILN_CACHE_DIR;
  else process.env.KILN_CACHE_DIR = savedDir;
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

function programFiles(dir: string): string[] {
  const root = path.join(dir, PROGRAM_NAMESPACE);
  if (!fs.existsSync(root)) return [];
  return fs.readdirSync(root, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

const maxDiff = (a: kiln.Tensor, b: kiln.Tensor): number => kiln.amax(kiln.abs(kiln.sub(a, b))).item() as number;

// softmax and layerNorm-like rows, a pointwise chain: several kernels, views and an extern (matmul).
const fn = (x: kiln.Tensor, w: kiln.Tensor): kiln.Tensor => {
  const h = kiln.gelu(kiln.matmul(x, w));
  const m = kiln.mean(h, -1, true);
  return kiln.softmax(kiln.mul(kiln.sub(h, m), 1.5), -1).transpose(0, 1);
};

test('object graph: shared references, cycles, Maps, Sets and special numbers survive; functions do not encode', () => {
  const shared = { id: 7, tags: new Set(['a', 'b']) };
  const cyc: Record<string, unknown> = { name: 'cyc' };
  cyc.self = cyc;
  const typed = new Float32Array([1.5, -2, 3]);
  const root = {
    list: [shared, shared],
    byKey: new Map<unknown, unknown>([[shared, 'first'], ['k', [NaN, -0, Infinity, -Infinity, undefined, 10n]]]),
    cyc,
    typed: [typed, typed, new BigInt64Array([-(2n ** 40n)]), new Uint8Array(new ArrayBuffer(8), 3, 2).fill(7)],
  };
  const back = decodeObjectGraph(JSON.parse(JSON.stringify(encodeObjectGraph(root)))) as typeof root;
  assert.equal(back.list[0], back.list[1], 'one object referenced twice stays one object');
  assert.deepEqual([...back.list[0]!.tags], ['a', 'b']);
  assert.equal(back.byKey.get(back.list[0]), 'first', 'an object as a Map key keeps its identity');
  const nums = back.byKey.get('k') as unknown[];
  assert.ok(Number.isNaN(nums[0]));
  assert.ok(Object.is(nums[1], -0));
  assert.deepEqual(nums.slice(2), [Infinity, -Infinity, undefined, 10n]);
  assert.equal(back.cyc.self, back.cyc);
  assert.ok(back.typed[0] instanceof Float32Array);
  assert.deepEqual([...back.typed[0]], [1.5, -2, 3]);
  assert.equal(back.typed[0], back.typed[1]);
  assert.deepEqual([...(back.typed[2] as BigInt64Array)], [-(2n ** 40n)]);
  assert.deepEqual([...(back.typed[3] as Uint8Array)], [7, 7], 'a view encodes only its own bytes');
  assert.throws(() => encodeObjectGraph({ f: () => 1 }), NotSerializable);
  assert.throws(() => encodeObjectGraph({ d: new Date(0) }), /cannot encode a Date instance at \$\.d/);
  assert.throws(() => decodeObjectGraph({ slots: [{ a: [{ r: 5 }] }], root: { r: 0 } }), /dangling reference 5/);
  assert.throws(() => decodeObjectGraph({ slots: [{ q: 1 }], root: null }), /unknown form/);
});

test('a fresh compiled function loads the stored program: disk hit, same results as eager', () => {
  const dir = process.env.KILN_CACHE_DIR!;
  const g = new kiln.Generator(3);
  const x = kiln.randn([6, 24], { generator: g });
  const w = kiln.randn([24, 16], { generator: g });
  const ref = fn(x, w);

  const first = kiln.compile(fn);
  const y1 = kiln.noGrad(() => first(x, w));
  assert.equal(first.counters.diskMisses, 1);
  assert.equal(first.counters.diskHits, 0);
  assert.equal(programFiles(dir).length, 1, 'one program entry on disk');
  assert.ok(maxDiff(y1, ref) < 1e-6);

  getDiskCache().clearMemory(); // read it back from the file, not from the in-memory layer
  const second = kiln.compile(fn);
  const y2 = kiln.noGrad(() => second(x, w));
  assert.equal(second.counters.diskHits, 1, 'the second compiled function loaded the program');
  assert.equal(second.counters.diskMisses, 0);
  assert.equal(second.counters.compiles, 1);
  assert.deepEqual(y2.shape, ref.shape);
  assert.deepEqual(y2.strides, y1.strides, 'the loaded program plans the same layouts');
  assert.ok(maxDiff(y2, ref) < 1e-6);
  // Other inputs of the same class run through the loaded program too.
  const x2 = kiln.randn([6, 24], { generator: g });
  assert.ok(maxDiff(kiln.noGrad(() => second(x2, w)), fn(x2, w)) < 1e-6);
  assert.equal(second.counters.cacheHits, 1);
});

test('the key follows dtype, mode and code-affecting KILN_* options, but not KILN_LOG or undeclared variables', () => {
  const g = new kiln.Generator(4);
  const x = kiln.randn([4, 8], { generator: g });
  const w = kiln.randn([8, 8], { generator: g });
  const run = (cf: kiln.CompiledFunction<typeof fn>, a = x, b = w): { hits: number; misses: number } => {
    kiln.noGrad(() => cf(a, b));
    return { hits: cf.counters.diskHits, misses: cf.counters.diskMisses };
  };
  assert.deepEqual(run(kiln.compile(fn)), { hits: 0, misses: 1 });
  assert.deepEqual(run(kiln.compile(fn)), { hits: 1, misses: 0 });
  assert.deepEqual(run(kiln.compile(fn), x.to('float64'), w.to('float64')), { hits: 0, misses: 1 }, 'another dtype is another program');
  assert.deepEqual(run(kiln.compile(fn, { mode: 'max-autotune' })), { hits: 0, misses: 1 }, 'another mode is another program');
  assert.deepEqual(run(kiln.compile(fn), kiln.randn([4, 9]), kiln.randn([9, 8])), { hits: 0, misses: 1 }, 'other static sizes');
  const saved = { fusion: process.env.KILN_HORIZONTAL_FUSION, knob: process.env.KILN_TEST_CODEGEN_KNOB, log: process.env.KILN_LOG };
  const restore = (name: keyof typeof saved, env: string): void => {
    if (saved[name] === undefined) delete process.env[env];
    else process.env[env] = saved[name];
  };
  try {
    // A declared option that changes code generation (runtime/config.ts, codegen: true) changes the key...
    process.env.KILN_HORIZONTAL_FUSION = '0';
    assert.deepEqual(run(kiln.compile(fn)), { hits: 0, misses: 1 }, 'a code-affecting KILN_* option is part of the key');
    delete process.env.KILN_HORIZONTAL_FUSION;
    assert.deepEqual(run(kiln.compile(fn)), { hits: 1, misses: 0 }, 'back to the default: the first program again');
    // ...an undeclared variable is no configuration (config.test.ts makes sure src/ reads none).
    process.env.KILN_TEST_CODEGEN_KNOB = '1';
    assert.deepEqual(run(kiln.compile(fn)), { hits: 1, misses: 0 }, 'an undeclared KILN_* variable is not in the key');
    process.env.KILN_LOG = 'none';
    assert.deepEqual(run(kiln.compile(fn)), { hits: 1, misses: 0 }, 'KILN_LOG does not');
  } finally {
    restore('fusion', 'KILN_HORIZONTAL_FUSION');
    restore('knob', 'KILN_TEST_CODEGEN_KNOB');
    restore('log', 'KILN_LOG');
  }
  const parts = { signature: 'in %0 arg[0] float32 [4] c cpu', guardKey: '1|arg0:float32@cpu[4]contiguous', mode: 'default', backend: 'kiln', devices: ['cpu'] };
  assert.match(compilerCodeHash() ?? '', /^[0-9a-f]{64}$/, "the compiler's own files are found and hashed (else nothing would be cached)");
  assert.match(programCacheKey(parts) ?? '', /^[0-9a-f]{64}$/);
  assert.notEqual(programCacheKey(parts), programCacheKey({ ...parts, backend: 'other' }));
  assert.equal(programCacheKey({ ...parts, signature: `${parts.signature}\n%1=op(o#12)` }), null, 'identity constants are not cacheable across processes');
});

test('lifted parameters come from the new trace: another model with the same shapes, other weights', () => {
  class Block extends kiln.nn.Module {
    lin: kiln.nn.Linear;
    norm: kiln.nn.LayerNorm;
    constructor(seed: number) {
      super();
      const generator = new kiln.Generator(seed);
      this.lin = new kiln.nn.Linear(12, 10, true, { generator });
      this.norm = new kiln.nn.LayerNorm(10);
    }
    forward(x: kiln.Tensor): kiln.Tensor {
      return kiln.relu(this.norm.forward(this.lin.forward(x)));
    }
  }
  const make = (seed: number): Block => new Block(seed).eval();
  const x = kiln.randn([5, 12], { generator: new kiln.Generator(9) });
  const a = make(1);
  const b = make(2);
  const ca = kiln.compile(a);
  const ya = kiln.noGrad(() => ca(x));
  const cb = kiln.compile(b);
  const yb = kiln.noGrad(() => cb(x));
  assert.equal(ca.counters.diskMisses, 1);
  assert.equal(cb.counters.diskHits, 1, "b's graph has the same signature as a's");
  const ra = kiln.noGrad(() => a.forward(x));
  const rb = kiln.noGrad(() => b.forward(x));
  assert.ok(maxDiff(ra, rb) > 1e-2, 'the two models differ');
  assert.ok(maxDiff(ya, ra) < 1e-5);
  assert.ok(maxDiff(yb, rb) < 1e-5, "b's loaded program reads b's weights");
});

test('damaged program entries are discarded and rebuilt with the same results', () => {
  const dir = process.env.KILN_CACHE_DIR!;
  const x = kiln.randn([3, 20], { generator: new kiln.Generator(11) });
  const w = kiln.randn([20, 5], { generator: new kiln.Generator(12) });
  const ref = fn(x, w);
  kiln.noGrad(() => kiln.compile(fn)(x, w));
  const [file] = programFiles(dir);
  assert.ok(file);
  const good = fs.readFileSync(file, 'utf8');
  const nl = good.indexOf('\n');
  const key = (JSON.parse(good.slice(0, nl)) as { key: string }).key;
  const cases: [string, () => void][] = [
    ['truncated (a partial write)', () => fs.writeFileSync(file, good.slice(0, Math.floor(good.length / 2)))],
    ['a flipped byte in a kernel source', () => fs.writeFileSync(file, good.replace('function', 'fUnction'))],
    ['garbage', () => fs.writeFileSync(file, 'not a cache entry')],
    // Checksums verify, but the body is not a program (e.g. written by a build with another format).
    ['a valid entry that is not a program', () => fs.writeFileSync(file, encodeEntry(key, JSON.stringify({ format: 1, inputs: ['arg', 'arg'], program: { slots: [], root: null } })))],
    ['a valid entry whose kernel does not compile', () => fs.writeFileSync(file, encodeEntry(key, good.slice(nl + 1).replace('return function', 'return ((function')))],
  ];
  for (const [what, damage] of cases) {
    damage();
    getDiskCache().clearMemory();
    const corruptBefore = getDiskCache().stats().corrupt;
    const cf = kiln.compile(fn);
    const y = kiln.noGrad(() => cf(x, w));
    assert.equal(cf.counters.diskHits, 0, `${what}: not used`);
    assert.equal(cf.counters.diskMisses, 1, `${what}: counted as a miss`);
    assert.ok(maxDiff(y, ref) < 1e-6, `${what}: rebuilt program is right`);
    if (!what.startsWith('a valid')) assert.equal(getDiskCache().stats().corrupt, corruptBefore + 1, `${what}: detected by the checksum`);
    assert.ok(fs.existsSync(file), `${what}: the entry is written again`);
    getDiskCache().clearMemory();
    const again = kiln.compile(fn);
    kiln.noGrad(() => again(x, w));
    assert.equal(again.counters.diskHits, 1, `${what}: the rebuilt entry loads`);
  }
});

test('graphs with constants compared by identity (a Generator) are not stored: the key would not mean the same elsewhere', () => {
  const dir = process.env.KILN_CACHE_DIR!;
  const g = new kiln.Generator(1);
  const f = (x: kiln.Tensor): kiln.Tensor => kiln.add(kiln.rand([4], { generator: g }), x);
  const cf = kiln.compile(f);
  const y = kiln.noGrad(() => cf(kiln.ones([4])));
  assert.equal(y.shape[0], 4);
  assert.equal(cf.counters.compiles, 1);
  assert.deepEqual([cf.counters.diskHits, cf.counters.diskMisses], [0, 0]);
  assert.deepEqual(programFiles(dir), []);
});

test('dynamic: true: a program stored at one size is loaded for another and computes the new size right', () => {
  const g = new kiln.Generator(21);
  const w = kiln.randn([24, 16], { generator: g });
  const x6 = kiln.randn([6, 24], { generator: g });
  const x10 = kiln.randn([10, 24], { generator: g });
  const first = kiln.compile(fn, { dynamic: true });
  kiln.noGrad(() => first(x6, w));
  assert.equal(first.counters.diskMisses, 1);
  getDiskCache().clearMemory();
  const second = kiln.compile(fn, { dynamic: true });
  const y = kiln.noGrad(() => second(x10, w));
  assert.equal(second.counters.diskHits, 1, 'symbolic sizes: same key at another batch size');
  assert.deepEqual(y.shape, [16, 10]);
  assert.ok(maxDiff(y, fn(x10, w)) < 1e-6);
});
