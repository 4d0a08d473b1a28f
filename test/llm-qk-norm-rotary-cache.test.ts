/**
 * llm.qkNormRotaryCache (q/k norm + rotary and the paged-cache write of the rotated k and of v, one
 * op) on the cpu, and the compile pass that maps qkNormRotary + reshapeAndCache onto it
 * (src/llm/qk-norm-rotary-cache-pass.ts): values and cache rows against a float64 loop (a padding
 * slot writes nothing, other slots stay untouched), argument errors named by the op, the pass on a
 * traced Qwen3 decode step (graph interpreted: logits and caches equal the unfused graph's and
 * eager), what it must leave alone, and that it does not fire on the cpu by default. The cuda
 * kernel: cuda-qk-norm-rotary-cache.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { interpret } from '../src/compile/interpret.js';
import { runPasses } from '../src/compile/passes/index.js';
import { autoRewriteRules } from '../src/llm/rewrites.js';
import { fuseQkNormRotary } from '../src/llm/qk-norm-rotary-pass.js';
import { fuseQkNormRotaryCache } from '../src/llm/qk-norm-rotary-cache-pass.js';
import { tinyQwen3Config } from '../src/bench/workloads.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, rand } from './helpers/make.js';
import { refCacheWrite, refNormRotary } from './helpers/qk-norm-rotary-ref.js';
import { nativeRowCalls } from '../src/kernels/cpu/native/rows.js';
import { probeToolchain, setCpuPath } from '../src/kernels/cpu/native/index.js';
import { roundToBfloat16 } from '../src/tensor/half.js';
import { countOps as count, graphInputs as inputsOf, maxAbsDiff as maxDiff } from './helpers/graph-pass.js';

test('llm.qkNormRotaryCache on the cpu: q rotated, k rotated into its slots, v copied, padding and other slots untouched (float64 loop)', () => {
  for (const dtype of ['float32', 'float64'] as DType[]) {
    for (const isNeox of [true, false]) {
      const [N, H, Hkv, D, NB, BS] = [3, 4, 2, 8, 4, 2];
      const q = rand([N, H, D], 1, 'contiguous', dtype);
      const k = rand([N, Hkv, D], 2, 'strided', dtype);
      const v = rand([N, Hkv, D], 3, 'transposed', dtype);
      const qw = rand([D], 4, 'contiguous', dtype);
      const kw = rand([D], 5, 'contiguous', dtype);
      const cos = rand([N, 1, D], 6, 'contiguous', dtype);
      const sin = rand([N, 1, D], 7, 'contiguous', dtype);
      const kc = kiln.zeros([NB, BS, Hkv, D], { dtype });
      const vc = kiln.zeros([NB, BS, Hkv, D], { dtype });
      const slots = [5, -1, 2];
      const r = kiln.llm.qkNormRotaryCache(q, k, v, qw, kw, 1e-6, cos, sin, isNeox, kc, vc, makeTensor(slots, [N], 'int64'));
      assert.equal(r.keyCache, kc, 'the key cache is returned, written in place');
      const tol = dtype === 'float32' ? 1e-5 : 1e-12;
      assert.ok(maxDiff(r.q.contiguous().toFlatArray(), refNormRotary(q, qw, 1e-6, cos, sin, isNeox)) <= tol);
      const kr = refNormRotary(k, kw, 1e-6, cos, sin, isNeox);
      const row = Hkv * D;
      const zeros = new Array<number>(NB * BS * row).fill(0);
      const { keys: wantK, values: wantV } = refCacheWrite(zeros, zeros, kr, v.contiguous().toFlatArray(), slots, row);
      assert.ok(maxDiff(kc.toFlatArray(), wantK) <= tol, `${dtype} ${isNeox}: key cache`);
      assert.deepEqual(vc.toFlatArray(), wantV, `${dtype} ${isNeox}: value cache`);
    }
  }
});

const nativeSkip = probeToolchain().ok ? false : 'native cpu path unavailable';

test('llm.qkNormRotaryCache, cpu native kernel (neox, contiguous, float32 / bfloat16): one call; q and cache rows vs float64, bfloat16 bit-equal to rmsNorm -> applyRotaryEmb -> reshapeAndCache', { skip: nativeSkip }, () => {
  setCpuPath('native');
  try {
    for (const dtype of ['float32', 'bfloat16'] as DType[]) {
      for (const slotDtype of ['int64', 'int32'] as const) {
        const [N, H, Hkv, D, NB, BS, eps] = [3, 4, 2, 16, 4, 2, 1e-6];
        const q = rand([N, H, D], 21, 'contiguous', dtype);
        const k = rand([N, Hkv, D], 22, 'contiguous', dtype);
        const v = rand([N, Hkv, D], 23, 'contiguous', dtype);
        const qw = rand([D], 24, 'contiguous', dtype);
        const kw = rand([D], 25, 'contiguous', dtype);
        const cos = rand([N, 1, D], 26, 'contiguous', dtype);
        const sin = rand([N, 1, D], 27, 'contiguous', dtype);
        const fill = rand([NB, BS, Hkv, D], 28, 'contiguous', dtype);
        const kc = fill.clone();
        const vc = fill.clone();
        const slots = [6, -1, 1];
        const before = nativeRowCalls();
        const r = kiln.llm.qkNormRotaryCache(q, k, v, qw, kw, eps, cos, sin, true, kc, vc, makeTensor(slots, [N], slotDtype));
        assert.equal(nativeRowCalls() - before, 1, `${dtype}: one native call`);
        const round = dtype === 'bfloat16' ? roundToBfloat16 : Math.fround;
        // bfloat16: the reference's one rounding of the output (2^-8 relative) plus float64 vs the
        // kernel's double; float32: float32 rounding of the normalised values and of the output.
        const tolOf = (want: number): number => (dtype === 'bfloat16' ? 2 ** -8 * Math.abs(want) + 1e-6 : 1e-6);
        const qWant = refNormRotary(q, qw, eps, cos, sin, true, round);
        r.q.toFlatArray().forEach((g, i) => assert.ok(Math.abs(g - qWant[i]!) <= tolOf(qWant[i]!), `${dtype} q[${i}]: ${g} vs ${qWant[i]}`));
        const kWant = refNormRotary(k, kw, eps, cos, sin, true, round);
        const { keys: wantK, values: wantV } = refCacheWrite(fill.toFlatArray(), fill.toFlatArray(), kWant, v.toFlatArray(), slots, Hkv * D);
        kc.toFlatArray().forEach((g, i) => assert.ok(Math.abs(g - wantK[i]!) <= tolOf(wantK[i]!), `${dtype} keyCache[${i}]: ${g} vs ${wantK[i]}`));
        assert.deepEqual(vc.toFlatArray(), wantV, `${dtype}: value cache (bit copies; other slots untouched)`);
        if (dtype === 'bfloat16') {
          // The ops the eager decode step ran before (rmsNorm and rotary through the same row kernels).
          const kc2 = fill.clone();
          const vc2 = fill.clone();
          const rot = (x: Tensor, w: Tensor): Tensor => kiln.llm.applyRotaryEmb(kiln.rmsNorm(x, [D], w, eps), cos, sin, true);
          const qUnfused = rot(q, qw);
          kiln.llm.reshapeAndCache(rot(k, kw), v, kc2, vc2, makeTensor(slots, [N], slotDtype));
          assert.deepEqual(r.q.toFlatArray(), qUnfused.toFlatArray(), 'q bit-equal to the unfused ops');
          assert.deepEqual(kc.toFlatArray(), kc2.toFlatArray(), 'key cache bit-equal to the unfused ops');
        }
      }
    }
    // A slot past the cache: a RangeError naming the op and the row.
    const [q, k, w, cs] = [rand([2, 2, 8], 1), rand([2, 1, 8], 2), rand([8], 3), rand([2, 1, 8], 4)];
    const cache = kiln.zeros([2, 2, 1, 8]);
    assert.throws(() => kiln.llm.qkNormRotaryCache(q, k, k, w, w, 1e-6, cs, cs, true, cache, cache.clone(), makeTensor([0, 4], [2], 'int64')), /llm\.qkNormRotaryCache: slotMapping\[1\] = 4 is outside the cache's 4 slots/);
  } finally {
    setCpuPath(undefined);
  }
});

test('llm.qkNormRotaryCache rejects bad arguments naming the op', () => {
  const q = rand([2, 4, 8], 1);
  const k = rand([2, 2, 8], 2);
  const w = rand([8], 3);
  const cs = rand([2, 1, 8], 4);
  const kc = kiln.zeros([3, 2, 2, 8]);
  const slots = makeTensor([0, 1], [2], 'int64');
  const call = (kk: Tensor, cache: Tensor, s: Tensor) => kiln.llm.qkNormRotaryCache(q, kk, kk, w, w, 1e-6, cs, cs, true, cache, cache, s);
  assert.throws(() => call(rand([2, 2, 6], 5), kc, slots), /llm\.qkNormRotaryCache: 'q' \[2, 4, 8\] and 'k' \[2, 2, 6\] must have the same last dim/);
  assert.throws(() => call(k, kiln.zeros([3, 2, 1, 8]), slots), /llm\.qkNormRotaryCache: argument 'key' must be \[N, 1, 8\]/);
  assert.throws(() => call(k, kc, makeTensor([0, 1, 2], [3], 'int64')), /llm\.qkNormRotaryCache: argument 'slotMapping' must be \[2\]/);
});

/** A Qwen3 decode step traced on the cpu (the primitives the cuda compile sees), its caches, its args. */
function tracedDecode() {
  const config = tinyQwen3Config().with({ numHiddenLayers: 2 });
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 3 });
  model.eval();
  model.prepareDecode();
  const { numKeyValueHeads: Hkv, headDim: D } = config;
  const [NB, BS, M] = [6, 4, 3];
  const cache = { keys: [0, 1].map(() => rand([NB, BS, Hkv, D], 10)), values: [0, 1].map(() => rand([NB, BS, Hkv, D], 11)) };
  const fn = (ids: Tensor, positions: Tensor, slotMapping: Tensor, blockTables: Tensor, contextLens: Tensor): Tensor =>
    model.decodeStep({ inputIds: ids, positions, slotMapping, blockTables, contextLens }, cache);
  // Two rows: row 0 at position 5 (slot 9 = block 2, offset 1), row 1 a padding row (slot -1, length 0).
  const args = [
    makeTensor([7, 3], [2], 'int64'),
    makeTensor([5, 0], [2], 'int64'),
    makeTensor([9, -1], [2], 'int64'),
    makeTensor([4, 2, 0, 0, 0, 0], [2, M], 'int32'),
    makeTensor([6, 0], [2], 'int32'),
  ];
  const snapshot = [...cache.keys, ...cache.values].map((t) => t.clone());
  const reset = (): void => [...cache.keys, ...cache.values].forEach((t, i) => kiln.noGrad(() => t.copy_(snapshot[i]!)));
  const caches = (): number[] => [...cache.keys, ...cache.values].flatMap((t) => t.toFlatArray());
  return { fn, args, reset, caches };
}

test('the pass on a traced Qwen3 decode step (cpu, forced on): one llm.qkNormRotaryCache per layer; logits and caches equal the unfused graph and eager', () => {
  const { fn, args, reset, caches } = tracedDecode();
  const want = kiln.noGrad(() => fn(...(args as [Tensor, Tensor, Tensor, Tensor, Tensor]))).toFlatArray();
  const wantCaches = caches();
  reset();
  const { graph } = kiln.noGrad(() => trace(fn as (...a: never[]) => unknown, args));
  reset();
  const base = runPasses(graph, { rewrites: autoRewriteRules, horizontalFusion: true, dce: false });
  const norm = fuseQkNormRotary(base.graph, () => true);
  assert.equal(norm.fused, 2);
  assert.equal(fuseQkNormRotaryCache(norm.graph).fused, 0, 'not on the cpu by default');
  const r = fuseQkNormRotaryCache(norm.graph, () => true);
  assert.equal(r.fused, 2);
  assert.equal(count(r.graph, 'llm.qkNormRotaryCache'), 2);
  assert.equal(count(r.graph, 'llm.qkNormRotary') + count(r.graph, 'llm.reshapeAndCache'), 0, 'both absorbed');
  const unfused = kiln.noGrad(() => interpret(norm.graph, inputsOf(norm.graph, args)) as Tensor).toFlatArray();
  const unfusedCaches = caches();
  reset();
  const got = kiln.noGrad(() => interpret(r.graph, inputsOf(r.graph, args)) as Tensor).toFlatArray();
  const gotCaches = caches();
  reset();
  // The fused op's cpu kernel computes in double (as the native row kernels), the two ops'
  // references in float32 ops: equal up to float32 rounding.
  assert.ok(maxDiff(got, unfused) <= 1e-5, 'logits equal the unfused graph (float32 rounding)');
  assert.ok(maxDiff(gotCaches, unfusedCaches) <= 1e-6, 'caches equal the unfused graph (float32 rounding)');
  assert.ok(maxDiff(got, want) <= 1e-4, 'logits near eager');
  assert.ok(maxDiff(gotCaches, wantCaches) <= 1e-5, 'caches near eager');
  assert.ok(maxDiff(gotCaches, caches()) > 0, 'the step wrote the caches (row 0 at slot 9)');
});

test('the pass leaves a pair alone when the rotated k is read elsewhere or q is read before the write', () => {
  const [q, k, v, w, cs] = [rand([2, 4, 8], 1), rand([2, 2, 8], 2), rand([2, 2, 8], 3), rand([8], 4), rand([2, 1, 8], 5)];
  const kc = kiln.zeros([3, 2, 2, 8]);
  const vc = kiln.zeros([3, 2, 2, 8]);
  const slots = makeTensor([0, 3], [2], 'int64');
  const tables = makeTensor([0, 1, 1, 0], [2, 2], 'int32');
  const lens = makeTensor([3, 4], [2], 'int32');
  const variants: Record<string, (a: Tensor) => Tensor> = {
    fuses: (a) => {
      const r = kiln.llm.qkNormRotary(a, k, w, w, 1e-6, cs, cs, true);
      const c = kiln.llm.reshapeAndCache(r.k, v, kc, vc, slots);
      return kiln.llm.pagedAttention(r.q, c.keyCache, c.valueCache, tables, lens, 0.3);
    },
    kReadElsewhere: (a) => {
      const r = kiln.llm.qkNormRotary(a, k, w, w, 1e-6, cs, cs, true);
      const c = kiln.llm.reshapeAndCache(r.k, v, kc, vc, slots);
      return kiln.add(kiln.llm.pagedAttention(r.q, c.keyCache, c.valueCache, tables, lens, 0.3), r.k.sum());
    },
    qReadBefore: (a) => {
      const r = kiln.llm.qkNormRotary(a, k, w, w, 1e-6, cs, cs, true);
      const s = r.q.sum();
      const c = kiln.llm.reshapeAndCache(r.k, v, kc, vc, slots);
      return kiln.add(kiln.llm.pagedAttention(r.q, c.keyCache, c.valueCache, tables, lens, 0.3), s);
    },
  };
  for (const [name, fn] of Object.entries(variants)) {
    const { graph } = kiln.noGrad(() => trace(fn as (...a: never[]) => unknown, [q]));
    const r = fuseQkNormRotaryCache(graph, () => true);
    assert.equal(r.fused, name === 'fuses' ? 1 : 0, name);
    if (name !== 'fuses') continue;
    const want = kiln.noGrad(() => fn(q)).toFlatArray();
    const got = kiln.noGrad(() => interpret(r.graph, inputsOf(r.graph, [q])) as Tensor).toFlatArray();
    // The fused cpu kernel in double, the eager ops in float32: equal up to float32 rounding.
    assert.ok(maxDiff(got, want) <= 1e-6, `${name}: ${maxDiff(got, want)}`);
  }
});
