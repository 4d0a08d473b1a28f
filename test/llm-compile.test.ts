/**
 * The library under kiln.compile: graphs that call library ops (in-place ones included) compile
 * with fullgraph and give exactly the eager results (library ops are extern nodes that call the
 * same kernels), in float32 and bfloat16; a small Qwen3-MoE-style block and a small mHC residual
 * block compile with fullgraph and match within 1e-4 (they also contain linears and core pointwise
 * ops, which the backend compiles into its own float32 GEMM and Wasm kernels, so bits may differ); and the rewrite rules turn core-op compositions into library ops.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { interpret } from '../src/compile/interpret.js';
import { lower } from '../src/compile/lower/lower.js';
import { CPU_FUSION } from '../src/compile/codegen/js/fusion.js';
import { runPasses } from '../src/compile/passes/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { rand } from './helpers/make.js';
import { ropeCache, ropePositions } from './samples/llm.js';

const llm = kiln.llm;
type T = kiln.Tensor;

function maxDiff(a: T, b: T): number {
  const x = a.toFlatArray();
  const y = b.toFlatArray();
  assert.equal(x.length, y.length);
  let m = 0;
  for (let i = 0; i < x.length; i++) m = Math.max(m, Math.abs(x[i]! - y[i]!));
  return Number.isNaN(m) ? Infinity : m;
}

function flat(r: unknown): T[] {
  if (r instanceof kiln.Tensor) return [r];
  if (Array.isArray(r)) return r.flatMap(flat);
  if (r && typeof r === 'object') return Object.values(r).flatMap(flat);
  return [];
}

/** Runs fn eagerly and compiled (fullgraph) on equal fresh inputs; returns the compiled function. */
function parity<A extends unknown[]>(name: string, fn: (...a: A) => unknown, make: () => A, exact = true): kiln.CompiledFunction<(...a: A) => unknown> {
  const compiled = kiln.compile(fn, { fullgraph: true, name });
  kiln.noGrad(() => {
    for (let rep = 0; rep < 2; rep++) {
      const eagerArgs = make();
      const compiledArgs = make();
      const e = flat(fn(...eagerArgs));
      const c = flat(compiled(...compiledArgs));
      assert.equal(c.length, e.length);
      e.forEach((t, i) => {
        const d = maxDiff(c[i]!, t);
        assert.ok(exact ? d === 0 : d < 1e-4, `${name}: output ${i} max|compiled - eager| = ${d}`);
      });
      // In-place ops wrote the same values into the arguments.
      flat(eagerArgs).forEach((t, i) => assert.equal(maxDiff(flat(compiledArgs)[i]!, t), 0, `${name}: argument ${i} after the call`));
    }
  });
  assert.equal(compiled.counters.graphBreaks, 0);
  assert.equal(compiled.counters.eagerCalls, 0);
  return compiled;
}

for (const dtype of ['float32', 'bfloat16'] as DType[]) {
  test(`library ops compile with fullgraph and match eager exactly [${dtype}]`, () => {
    const H = 16;
    const w = rand([H], 1, 'contiguous', dtype);
    const cache = ropeCache(32, 8);
    parity(
      `norm-act-rope ${dtype}`,
      (x: T, res: T, pos: T) => {
        const { input, residual } = llm.fusedAddRmsNorm(x, res, w, 1e-6);
        const g = llm.siluAndMul(input);
        const q = llm.geluAndMul(kiln.cat([g, g], -1), 'tanh');
        const { query } = llm.rotaryEmbedding(pos, q, null, 8, cache, false);
        return { y: llm.rmsNorm(query, llm.rmsNorm(w.reshape([2, 8]), w.narrow(0, 0, 8)).reshape([H]).narrow(0, 0, 8), 1e-5), residual };
      },
      (): [T, T, T] => [rand([5, H], 2, 'contiguous', dtype), rand([5, H], 3, 'contiguous', dtype), ropePositions(5, 32, 4)],
    );
  });

  test(`a Qwen3-MoE-style block compiles with fullgraph and matches eager [${dtype}]`, () => {
    const [Tk, H, nH, nKv, hs, E, I] = [6, 32, 4, 2, 8, 4, 16];
    const p = (shape: number[], seed: number): T => rand(shape, seed, 'contiguous', dtype, -0.3, 0.3);
    const W = { ln1: p([H], 1).add(1), ln2: p([H], 2).add(1), wq: p([nH * hs, H], 3), wk: p([nKv * hs, H], 4), wv: p([nKv * hs, H], 5), wo: p([H, nH * hs], 6), gate: p([E, H], 7), w13: p([E, 2 * I, H], 8), w2: p([E, H, I], 9) };
    const cache = ropeCache(64, hs);
    const block = (x: T, positions: T): T => {
      const h = llm.rmsNorm(x, W.ln1, 1e-6);
      const q = kiln.linear(h, W.wq);
      const k = kiln.linear(h, W.wk);
      const v = kiln.linear(h, W.wv);
      llm.rotaryEmbedding(positions, q, k, hs, cache, true);
      const heads = (t: T, n: number): T => t.reshape([Tk, n, hs]).transpose(0, 1);
      const attn = kiln.scaledDotProductAttention(heads(q, nH), heads(k, nKv), heads(v, nKv), null, 0, true, null, true);
      const o = kiln.linear(attn.transpose(0, 1).reshape([Tk, nH * hs]), W.wo);
      const { out, residual } = llm.addRmsNorm(o, x, W.ln2, 1e-6);
      const { weights, ids } = llm.topkSoftmax(kiln.linear(out, W.gate), 2, true);
      return kiln.add(residual, llm.fusedMoe(out, W.w13, W.w2, weights, ids, 'silu'));
    };
    parity(`qwen3-moe block ${dtype}`, block, (): [T, T] => [rand([Tk, H], 10, 'contiguous', dtype), ropePositions(Tk, 64, 11)], false);
  });

  test(`an mHC residual block compiles with fullgraph and matches eager [${dtype}]`, () => {
    const [N, n, H, F] = [5, 4, 8, 12];
    const p = (shape: number[], seed: number, lo = -0.3, hi = 0.3): T => rand(shape, seed, 'contiguous', 'float32', lo, hi);
    const phi = p([n * (n + 2), n * H], 1);
    const alpha = p([3], 2, 0.5, 1.5);
    const bias = p([n * (n + 2)], 3, -1, 1);
    const hPhi = p([n, n * H], 4);
    const hAlpha = p([1], 5, 0.5, 1.5);
    const hBias = p([n], 6);
    const norm = rand([H], 7, 'contiguous', dtype, 0.5, 1.5);
    const up = rand([2 * F, H], 8, 'contiguous', dtype, -0.3, 0.3);
    const down = rand([H, F], 9, 'contiguous', dtype, -0.3, 0.3);
    const block = (streams: T): T => {
      let s = streams;
      for (let layer = 0; layer < 2; layer++) {
        const { layerInput, post, comb } = llm.mhcPre(s, phi, alpha, bias, { sinkhornIters: 20 });
        const f = kiln.linear(llm.siluAndMul(kiln.linear(llm.rmsNorm(layerInput, norm), up)), down);
        s = llm.mhcPost(f, s, post, comb);
      }
      return llm.mhcHeadCollapse(s, hPhi, hAlpha, hBias);
    };
    parity(`mhc block ${dtype}`, block, (): [T] => [rand([N, n, H], 10, 'contiguous', dtype)], false);
  });
}

test('dynamic token counts reuse one compiled entry (no recompile per size beyond the automatic-dynamic one)', () => {
  const w = rand([8], 1);
  const f = kiln.compile((x: T) => llm.siluAndMul(llm.rmsNorm(x, w)), { fullgraph: true, dynamic: true });
  kiln.noGrad(() => {
    for (const t of [3, 5, 9]) {
      const x = rand([t, 8], t);
      assert.equal(maxDiff(f(x), llm.siluAndMul(llm.rmsNorm(x, w))), 0);
    }
  });
  assert.equal(f.counters.recompiles, 0);
});

// ---------------------------------------------------------------------------------------------
// rewrites

function rewritten(fn: (...a: T[]) => unknown, args: T[]): { ops: string[]; run: () => unknown } {
  const g = trace(fn as (...a: never[]) => unknown, args).graph;
  const { graph } = runPasses(g, { rewrites: 'default', decompose: false });
  return { ops: graph.nodes.map((n) => n.op), run: () => interpret(graph, args) };
}

function assertClose(a: T, b: T, tol: number, what: string): void {
  const d = maxDiff(a, b);
  assert.ok(d < tol, `${what}: max diff ${d}`);
}

test('rewrite: x * rsqrt(mean(x^2) + eps) * w becomes llm.rmsNorm (pow, square and x*x forms, either order)', () => {
  const x = rand([4, 16], 1);
  const w = rand([16], 2);
  const forms: ((x: T, w: T) => T)[] = [
    (x, w) => x.mul(kiln.rsqrt(kiln.add(kiln.mean(kiln.pow(x, 2), [-1], true), 1e-6))).mul(w),
    (x, w) => kiln.mul(w, kiln.mul(kiln.rsqrt(kiln.add(kiln.mean(kiln.square(x), [1], true), 1e-5)), x)),
    (x, w) => x.mul(kiln.rsqrt(kiln.add(kiln.mean(x.mul(x), -1, true), 1e-6))).mul(w),
  ];
  for (const [i, f] of forms.entries()) {
    const r = rewritten(f as (...a: T[]) => T, [x, w]);
    assert.deepEqual(r.ops, ['llm.rmsNorm'], `form ${i}: ${r.ops.join(', ')}`);
    assertClose(r.run() as T, f(x, w), 1e-5, `form ${i}`);
  }
  // Not the last dim, or a weight of another shape: left alone.
  const notLast = rewritten((x: T, w: T) => x.mul(kiln.rsqrt(kiln.add(kiln.mean(kiln.pow(x, 2), [0], true), 1e-6))).mul(w.narrow(0, 0, 1)), [x, w]);
  assert.ok(!notLast.ops.includes('llm.rmsNorm'));
});

test('rewrite: add then the rmsNorm pattern becomes the out-of-place llm.addRmsNorm, and the sum stays readable', () => {
  const a = rand([3, 8], 3);
  const r = rand([3, 8], 4);
  const w = rand([8], 5);
  const f = (a: T, r: T, w: T): T[] => {
    const s = kiln.add(a, r);
    const y = s.mul(kiln.rsqrt(kiln.add(kiln.mean(kiln.pow(s, 2), [-1], true), 1e-6))).mul(w);
    return [y, s.mul(2)];
  };
  const rw = rewritten(f as (...a: T[]) => unknown, [a, r, w]);
  assert.ok(rw.ops.includes('llm.addRmsNorm') && !rw.ops.includes('add') && !rw.ops.includes('rsqrt'), rw.ops.join(', '));
  const [y, s2] = rw.run() as T[];
  const [ey, es2] = f(a, r, w);
  assertClose(y!, ey!, 1e-5, 'normed');
  assert.equal(maxDiff(s2!, es2!), 0);
});

test('rewrite: silu/gelu of the first half times the second half becomes siluAndMul / geluAndMul', () => {
  const x = rand([3, 12], 6);
  const forms: [string, (x: T) => T][] = [
    ['llm.siluAndMul', (x) => kiln.silu(x.narrow(-1, 0, 6)).mul(x.narrow(-1, 6, 6))],
    ['llm.siluAndMul', (x) => x.slice(1, 6, 12).mul(kiln.silu(x.slice(1, 0, 6)))],
    ['llm.siluAndMul', (x) => {
      const [g, u] = kiln.chunk(x, 2, -1);
      return kiln.silu(g!).mul(u!);
    }],
    ['llm.geluAndMul', (x) => kiln.gelu(x.narrow(1, 0, 6), 'tanh').mul(x.narrow(1, 6, 6))],
  ];
  for (const [op, f] of forms) {
    const r = rewritten(f as (...a: T[]) => T, [x]);
    assert.ok(r.ops.includes(op) && !r.ops.includes('mul'), `${op}: ${r.ops.join(', ')}`);
    assertClose(r.run() as T, f(x), 1e-5, op);
  }
  // Halves swapped (up * silu(gate) with gate the second half) are not siluAndMul.
  const swapped = rewritten((x: T) => kiln.silu(x.narrow(-1, 6, 6)).mul(x.narrow(-1, 0, 6)), [x]);
  assert.ok(!swapped.ops.includes('llm.siluAndMul'));
});

test('rewritten graphs compile with fullgraph through kiln.compile (passes.rewrites = default)', () => {
  const w = rand([16], 7);
  const f = (x: T): T => {
    const y = x.mul(kiln.rsqrt(kiln.add(kiln.mean(kiln.pow(x, 2), [-1], true), 1e-6))).mul(w);
    return kiln.silu(y.narrow(-1, 0, 8)).mul(y.narrow(-1, 8, 8));
  };
  const c = kiln.compile(f, { fullgraph: true, passes: { rewrites: 'default' } });
  const x = rand([4, 16], 8);
  kiln.noGrad(() => assertClose(c(x), f(x), 1e-5, 'compiled rewritten'));
  assert.equal(c.counters.graphBreaks, 0);
});

test('the kiln backend lowers library ops to extern nodes (called through the dispatcher, never fused)', () => {
  const w = rand([8], 1);
  const g = trace(((x: T) => llm.siluAndMul(llm.rmsNorm(x.mul(2), w)).add(1)) as (...a: never[]) => unknown, [rand([3, 8], 2)]).graph;
  const low = lower(runPasses(g, { decompose: true }).graph, CPU_FUSION);
  const kinds = low.nodes.filter((n) => n.op.startsWith('llm.')).map((n) => `${n.op}:${n.kind}`);
  assert.deepEqual(kinds, ['llm.rmsNorm:extern', 'llm.siluAndMul:extern']);
});

test('native ops decompose into fusible core ops only when the frozen choice is the reference', () => {
  const w = rand([8], 1);
  const r = rand([3, 8], 3);
  const f = (x: T): T[] => {
    const { out, residual } = llm.addRmsNorm(x, r, w, 1e-6);
    return [llm.siluAndMul(llm.rmsNorm(out, w, 1e-5)), llm.geluAndMul(residual, 'tanh'), llm.moeSum(x.reshape([3, 2, 4]))];
  };
  const x = rand([3, 8], 2);
  const decomposed = (): string[] => runPasses(trace(f as (...a: never[]) => unknown, [x]).graph, { decompose: true }).graph.nodes.map((n) => n.op);
  llm.thawLlmPolicy();
  llm.resetLlmPolicy();
  assert.deepEqual(decomposed().filter((o) => o.startsWith('llm.')).sort(), ['llm.addRmsNorm', 'llm.geluAndMul', 'llm.moeSum', 'llm.rmsNorm', 'llm.siluAndMul']);
  llm.setLlmPolicy({ prefer: ['reference'] });
  try {
    assert.deepEqual(decomposed().filter((o) => o.startsWith('llm.')), []);
    const c = kiln.compile(f, { fullgraph: true, name: 'native-reference' });
    const eager = f(x);
    kiln.noGrad(() => c(x)).forEach((t, i) => assertClose(t, eager[i]!, 1e-5, `native output ${i}`));
  } finally {
    llm.thawLlmPolicy();
    llm.resetLlmPolicy();
  }
});
