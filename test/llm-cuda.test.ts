/**
 * The LLM library's cuda kernels (src/kernels/cuda/llm-*.ts) against the float64 CPU kernels on
 * the same inputs: rmsNorm, addRmsNorm, fusedAddRmsNorm (in place), siluAndMul, geluAndMul
 * (erf, tanh) and rotaryEmbedding (neox, gpt-j, partial rotary dim, int32/int64 positions) in
 * float32, float16 and bfloat16, at odd sizes (rows not a multiple of the vector width, hidden
 * 4096 and 129, 3-d and strided inputs); backward of rmsNorm and the act-and-mul ops on cuda vs
 * float64 CPU gradients; opcheck on cuda for these ops; and kiln.compile on cuda giving exactly
 * the eager results (float32, bfloat16) for a graph of library ops, which run as extern nodes
 * calling the same cuda kernels. Every test skips with the reason where no CUDA device exists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { trace } from '../src/compile/capture.js';
import { lower } from '../src/compile/lower/lower.js';
import { CUDA_FUSION } from '../src/compile/codegen/cuda/backend.js';
import { runPasses } from '../src/compile/passes/index.js';
import { backwardKernel } from '../src/ops/library/backward-kernels.js';
import { assertNoOverlap } from '../src/ops/library/overlap.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import { argumentWriter } from '../src/compile/cuda-graphs/compile-cuda.js';
import { normThreads, normTuning, setNormTuning, type NormTuning } from '../src/kernels/cuda/llm-norm.js';
import { generateNorm, hConstOf, type NormSpec } from '../src/kernels/cuda/codegen/llm.js';
import { rand, type Layout } from './helpers/make.js';
import { llmOpcheckSamples, ropeCache, ropePositions } from './samples/llm.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
const llm = kiln.llm;
type T = kiln.Tensor;
const HALVES: DType[] = ['float32', 'float16', 'bfloat16'];

/**
 * Tolerance against a float64 result: the kernel's one rounding to the dtype (half an ulp:
 * 2^-11 fp16, 2^-8 bf16) plus fp32 accumulation error; inputs are O(1).
 */
function tol(dtype: DType): { atol: number; rtol: number } {
  return dtype === 'bfloat16' ? { atol: 1e-2, rtol: 8e-3 } : dtype === 'float16' ? { atol: 2e-3, rtol: 2e-3 } : { atol: 2e-5, rtol: 2e-5 };
}

function assertNear(label: string, got: T, want: T, dtype: DType): void {
  assert.equal(got.device.type, 'cuda', `${label}: result on ${got.device.toString()}`);
  assert.equal(got.dtype, dtype, `${label}: dtype`);
  assert.deepEqual([...got.shape], [...want.shape], `${label}: shape`);
  const { atol, rtol } = tol(dtype);
  const g = got.toFlatArray();
  const w = want.toFlatArray();
  let worst = 0;
  for (let i = 0; i < w.length; i++) {
    const e = w[i]!;
    const err = Math.abs(g[i]! - e);
    if (!(err <= atol + rtol * Math.abs(e))) assert.fail(`${label}: element ${i}: cuda ${g[i]}, float64 cpu ${e} (atol ${atol}, rtol ${rtol})`);
    worst = Math.max(worst, err);
  }
  assert.ok(Number.isFinite(worst), `${label}: non-finite`);
}

const f64 = (t: T): T => t.to('cpu').to('float64');
const cu = (t: T): T => t.to('cuda');
/** The float64 value of `t` rounded through `dtype` (what storing into the dtype keeps). */
const roundedF64 = (t: T, dtype: DType): T => t.to(dtype).to('float64');

const NORM_SHAPES: [number[], Layout][] = [
  [[5, 4096], 'contiguous'],
  [[7, 129], 'contiguous'],
  [[3, 2, 24], 'contiguous'],
  [[4, 40], 'transposed'],
  [[3, 20000], 'contiguous'],
];

test('rmsNorm / addRmsNorm / fusedAddRmsNorm on cuda match the float64 cpu kernels (fp32, fp16, bf16; odd rows, H 4096, 129, 20000, strided)', { skip }, () => {
  for (const dtype of HALVES) {
    for (const [shape, layout] of NORM_SHAPES) {
      const h = shape.at(-1)!;
      const label = `${dtype} [${shape.join(', ')}] ${layout}`;
      const x = rand(shape, 1, layout, dtype);
      const r = rand(shape, 2, 'contiguous', dtype);
      const w = rand([h], 3, 'contiguous', dtype, 0.5, 1.5);
      kiln.noGrad(() => {
        assertNear(`rmsNorm ${label}`, llm.rmsNorm(cu(x), cu(w), 1e-6), llm.rmsNorm(f64(x), f64(w), 1e-6), dtype);
        // The sum is rounded to the dtype before the norm (vLLM): the reference rounds it too.
        const sum = roundedF64(kiln.add(f64(x), f64(r)), dtype);
        const wantY = llm.rmsNorm(sum, f64(w), 1e-5);
        const o = llm.addRmsNorm(cu(x), cu(r), cu(w), 1e-5);
        assertNear(`addRmsNorm out ${label}`, o.out, wantY, dtype);
        assertNear(`addRmsNorm residual ${label}`, o.residual, sum, dtype);
        const xi = cu(x);
        const ri = cu(r);
        const res = llm.fusedAddRmsNorm(xi, ri, cu(w), 1e-5);
        assert.ok(res.input === xi && res.residual === ri, 'fusedAddRmsNorm returns its arguments');
        assertNear(`fusedAddRmsNorm input ${label}`, xi, wantY, dtype);
        assertNear(`fusedAddRmsNorm residual ${label}`, ri, sum, dtype);
      });
    }
  }
});

test('norm kernels at every setting of their tuning knobs (vectors a thread, grid cap, weight prefetch, serial loads, register bounds, pipelined rows, H compiled in, streaming hints, halves converted twice) match the float64 cpu kernels', { skip }, () => {
  const saved = normTuning();
  const settings: Partial<NormTuning>[] = [
    { vecsPerThread: 1, gridCap: true, prefetchWeight: 'auto', specializeH: true, streaming: false, minThreadsPerSm: 1280 },
    { vecsPerThread: 2, gridCap: false, prefetchWeight: true, fixedTpr: true, minThreadsPerSm: 1024, pipelineRows: true, specializeH: true, streaming: true, resMinThreadsPerSm: 1024, unpackTwice: true },
    { vecsPerThread: 8, gridCap: true, serialLoads: true, fixedTpr: false, specializeH: true },
    { vecsPerThread: 4, gridCap: false, prefetchWeight: false, serialLoads: false, fixedTpr: true, minThreadsPerSm: 0, pipelineRows: true, specializeH: false, streaming: true },
  ];
  try {
    for (const knobs of settings) {
      setNormTuning({ ...saved, ...knobs });
      for (const dtype of ['float32', 'bfloat16'] as DType[]) {
        // 8192: every vector of a thread used; 4104: the last vector of some threads past the row
        // (guarded loads); 4100 fp32 / 4098 bf16: element loads (no 16-byte rows); 2200 x 1024:
        // more rows than the pipelined grid has blocks (a block prefetches its next row).
        for (const shape of [[3, 8192], [5, 4104], [4, dtype === 'float32' ? 4100 : 4098], [2200, 1024]]) {
          const h = shape.at(-1)!;
          const label = `${JSON.stringify(knobs)} ${dtype} [${shape.join(', ')}]`;
          const x = rand(shape, 11, 'contiguous', dtype);
          const r = rand(shape, 12, 'contiguous', dtype);
          const w = rand([h], 13, 'contiguous', dtype, 0.5, 1.5);
          assertNear(`rmsNorm ${label}`, llm.rmsNorm(cu(x), cu(w), 1e-6), llm.rmsNorm(f64(x), f64(w), 1e-6), dtype);
          const sum = roundedF64(kiln.add(f64(x), f64(r)), dtype);
          const xi = cu(x);
          const ri = cu(r);
          llm.fusedAddRmsNorm(xi, ri, cu(w), 1e-6);
          assertNear(`fusedAddRmsNorm input ${label}`, xi, llm.rmsNorm(sum, f64(w), 1e-6), dtype);
          assertNear(`fusedAddRmsNorm residual ${label}`, ri, sum, dtype);
        }
      }
    }
  } finally {
    setNormTuning(saved);
  }
});

test('fusedAddRmsNorm on cuda: bad input gets the same clear errors as on cpu', { skip }, () => {
  const x = cu(rand([3, 8], 1));
  assert.throws(() => llm.fusedAddRmsNorm(x, cu(rand([3, 6], 2)), cu(rand([8], 3))), /llm\.fusedAddRmsNorm: argument 'residual'.*must have the shape of 'input'/);
  assert.throws(() => llm.rmsNorm(x, cu(rand([8], 3, 'contiguous', 'bfloat16'))), /llm\.rmsNorm/);
  assert.throws(() => llm.fusedAddRmsNorm(x, x.narrow(1, 0, 8), cu(rand([8], 3))), /llm\.fusedAddRmsNorm: arguments 'input' .* and 'residual' .* overlap/);
  assert.throws(() => llm.siluAndMul(cu(rand([3, 7], 1))), /llm\.siluAndMul: the last dim of 'input' must be even/);
  assert.throws(() => llm.rotaryEmbedding(cu(kiln.tensor([1.5])), cu(rand([1, 8], 1)), null, 8, cu(ropeCache(4, 8)), true), /llm\.rotaryEmbedding: argument 'positions'/);
  // A position outside the cache: NaN in the rotated features (no host sync to throw), the rest kept.
  const q = cu(rand([2, 8], 5));
  const before = q.toFlatArray();
  llm.rotaryEmbedding(cu(kiln.tensor([1, 9], { dtype: 'int64' })), q, null, 8, cu(ropeCache(4, 4)), true);
  const after = q.toFlatArray();
  assert.ok(after.slice(0, 4).every((v) => Number.isFinite(v)) && after.slice(8, 12).every((v) => Number.isNaN(v)), `rotated: ${after.join(', ')}`);
  assert.deepEqual(after.slice(12), before.slice(12), 'features past the rotary dim are untouched');
});

test('siluAndMul / geluAndMul (erf, tanh) on cuda match the float64 cpu kernels (fp32, fp16, bf16; d 11008, 129, strided rows)', { skip }, () => {
  const shapes: [number[], Layout][] = [
    [[3, 2 * 11008], 'contiguous'],
    [[5, 258], 'contiguous'],
    [[2, 3, 16], 'contiguous'],
    [[4, 20], 'strided'],
  ];
  for (const dtype of HALVES) {
    for (const [shape, layout] of shapes) {
      const x = rand(shape, 4, layout, dtype, -4, 4);
      const label = `${dtype} [${shape.join(', ')}] ${layout}`;
      assertNear(`siluAndMul ${label}`, llm.siluAndMul(cu(x)), llm.siluAndMul(f64(x)), dtype);
      assertNear(`geluAndMul none ${label}`, llm.geluAndMul(cu(x), 'none'), llm.geluAndMul(f64(x), 'none'), dtype);
      assertNear(`geluAndMul tanh ${label}`, llm.geluAndMul(cu(x), 'tanh'), llm.geluAndMul(f64(x), 'tanh'), dtype);
    }
  }
});

test('rotaryEmbedding on cuda matches the float64 cpu kernel (neox, gpt-j, partial rotary, int32/int64 positions, 2-d/3-d, key null, strided)', { skip }, () => {
  const cases: { label: string; T: number; qH: number; kH: number; hs: number; rot: number; neox: boolean; pos: 'int32' | 'int64'; threeD: boolean; keyNull?: boolean; layout?: Layout }[] = [
    { label: 'neox full 128', T: 7, qH: 4, kH: 2, hs: 128, rot: 128, neox: true, pos: 'int64', threeD: false },
    { label: 'gpt-j full 128', T: 5, qH: 3, kH: 1, hs: 128, rot: 128, neox: false, pos: 'int32', threeD: true },
    { label: 'neox partial 32 of 64', T: 3, qH: 2, kH: 2, hs: 64, rot: 32, neox: true, pos: 'int32', threeD: true },
    { label: 'gpt-j partial 6 of 10', T: 4, qH: 3, kH: 2, hs: 10, rot: 6, neox: false, pos: 'int64', threeD: false },
    { label: 'neox key null, strided query', T: 3, qH: 2, kH: 0, hs: 12, rot: 12, neox: true, pos: 'int64', threeD: false, keyNull: true, layout: 'strided' },
  ];
  for (const dtype of HALVES) {
    for (const c of cases) {
      const maxPos = 64;
      const shape = (h: number): number[] => (c.threeD ? [c.T, h, c.hs] : [c.T, h * c.hs]);
      const q = rand(shape(c.qH), 5, c.layout ?? 'contiguous', dtype);
      const k = c.keyNull ? null : rand(shape(c.kH), 6, 'contiguous', dtype);
      const pos = ropePositions(c.T, maxPos, 7, c.pos);
      const cache = ropeCache(maxPos, c.rot);
      const label = `${c.label} ${dtype}`;
      const qw = f64(q);
      const kw = k ? f64(k) : null;
      llm.rotaryEmbedding(pos, qw, kw, c.hs, cache.to('float64'), c.neox);
      const qc = cu(q);
      const kc = k ? cu(k) : null;
      const out = llm.rotaryEmbedding(cu(pos), qc, kc, c.hs, cu(cache), c.neox);
      assert.ok(out.query === qc, 'in place');
      assertNear(`rope q ${label}`, qc, qw, dtype);
      if (kc && kw) assertNear(`rope k ${label}`, kc, kw, dtype);
    }
  }
});

test('backward of rmsNorm and the act-and-mul ops on cuda (backward kernels) match float64 cpu gradients', { skip }, () => {
  for (const op of ['llm.rmsNorm', 'llm.siluAndMul', 'llm.geluAndMul']) assert.ok(backwardKernel(op, 'cuda'), `${op}: a cuda backward kernel is registered`);
  for (const dtype of ['float32', 'bfloat16'] as DType[]) {
    const x = rand([5, 129], 8, 'contiguous', dtype);
    const w = rand([129], 9, 'contiguous', dtype, 0.5, 1.5);
    const g = rand([5, 129], 10, 'contiguous', dtype);
    const grads = (dev: 'cuda' | 'cpu64'): T[] => {
      const mk = (t: T): T => (dev === 'cuda' ? cu(t) : f64(t)).requiresGrad_();
      const xs = mk(x);
      const ws = mk(w);
      const y = llm.rmsNorm(xs, ws, 1e-6);
      y.backward(dev === 'cuda' ? cu(g) : f64(g));
      return [xs.grad!, ws.grad!];
    };
    const [gx, gw] = grads('cuda');
    const [ex, ew] = grads('cpu64');
    // Gradients sum over rows and columns: allow a few roundings more than a forward.
    assertNear(`rmsNorm dx ${dtype}`, gx!, ex!, dtype);
    const wt = tol(dtype);
    const gwv = gw!.toFlatArray();
    ew!.toFlatArray().forEach((e, i) => assert.ok(Math.abs(gwv[i]! - e) <= 4 * (wt.atol + wt.rtol * Math.abs(e)), `rmsNorm dw ${dtype} element ${i}: ${gwv[i]} vs ${e}`));
    for (const [name, fn] of [
      ['siluAndMul', (t: T) => llm.siluAndMul(t)],
      ['geluAndMul none', (t: T) => llm.geluAndMul(t, 'none')],
      ['geluAndMul tanh', (t: T) => llm.geluAndMul(t, 'tanh')],
    ] as [string, (t: T) => T][]) {
      const a = rand([3, 2 * 65], 11, 'contiguous', dtype, -3, 3);
      const up = rand([3, 65], 12, 'contiguous', dtype);
      const ac = cu(a).requiresGrad_();
      fn(ac).backward(cu(up));
      const a64 = f64(a).requiresGrad_();
      fn(a64).backward(f64(up));
      assertNear(`${name} dx ${dtype}`, ac.grad!, a64.grad!, dtype);
    }
  }
});

const MINE = ['llm.rmsNorm', 'llm.fusedAddRmsNorm', 'llm.addRmsNorm', 'llm.siluAndMul', 'llm.geluAndMul', 'llm.rotaryEmbedding'];

test('opcheck passes on cuda for the norm, act-and-mul and rope ops (cuda-kernel implementation included)', { skip }, () => {
  for (const op of MINE) {
    assert.equal(llm.llmChoice(op, 'cuda').name, 'cuda-kernel', `${op}: the default choice on cuda`);
    const report = llm.opcheck(op, llmOpcheckSamples[op]!, { device: 'cuda' });
    assert.ok(report.implementations.includes('cuda-kernel'), `${op}: implementations ${report.implementations.join(', ')}`);
  }
});

function maxDiff(a: T, b: T): number {
  const x = a.toFlatArray();
  const y = b.toFlatArray();
  assert.equal(x.length, y.length);
  let m = 0;
  for (let i = 0; i < x.length; i++) m = Math.max(m, Math.abs(x[i]! - y[i]!));
  return Number.isNaN(m) ? Infinity : m;
}

for (const dtype of ['float32', 'bfloat16'] as DType[]) {
  test(`library ops compiled on cuda give exactly the eager results (max |diff| = 0) [${dtype}]`, { skip }, () => {
    const H = 256;
    const w = cu(rand([H], 1, 'contiguous', dtype, 0.5, 1.5));
    const w2 = cu(rand([64], 2, 'contiguous', dtype, 0.5, 1.5));
    const cache = cu(ropeCache(32, 64));
    const fn = (x: T, res: T, pos: T): T[] => {
      const { input, residual } = llm.fusedAddRmsNorm(x, res, w, 1e-6);
      const g = llm.siluAndMul(input);
      const q = llm.geluAndMul(kiln.cat([g, g], -1), 'tanh');
      const { query } = llm.rotaryEmbedding(pos, q, null, 64, cache, true);
      const { out } = llm.addRmsNorm(query.mul(2), query, w.narrow(0, 0, 128), 1e-5);
      return [llm.rmsNorm(out.reshape([-1, 64]), w2, 1e-5), residual];
    };
    const make = (): [T, T, T] => [cu(rand([5, H], 3, 'contiguous', dtype)), cu(rand([5, H], 4, 'contiguous', dtype)), cu(ropePositions(5, 32, 5))];
    const compiled = kiln.compile(fn, { fullgraph: true, name: `llm-cuda-${dtype}` });
    kiln.noGrad(() => {
      for (let rep = 0; rep < 2; rep++) {
        const ea = make();
        const ca = make();
        const e = fn(...ea);
        const c = compiled(...ca);
        e.forEach((t, i) => assert.equal(maxDiff(c[i]!, t), 0, `output ${i}`));
        ea.forEach((t, i) => assert.equal(maxDiff(ca[i]!, t), 0, `argument ${i} after the call`));
        assert.equal(c[0]!.device.type, 'cuda');
      }
    });
    assert.equal(compiled.counters.graphBreaks, 0);
    assert.equal(compiled.counters.eagerCalls, 0);
    // The library ops stay extern nodes, which dispatch to the policy's choice on cuda: the same kernel as eager.
    const low = lower(runPasses(trace(fn as (...a: never[]) => unknown, make()).graph, { decompose: true }).graph, CUDA_FUSION);
    const kinds = low.nodes.filter((n) => n.op.startsWith('llm.')).map((n) => `${n.op}:${n.kind}`);
    assert.deepEqual(kinds, ['llm.fusedAddRmsNorm:extern', 'llm.siluAndMul:extern', 'llm.geluAndMul:extern', 'llm.rotaryEmbedding:extern', 'llm.addRmsNorm:extern', 'llm.rmsNorm:extern']);
    for (const op of MINE) assert.equal(llm.llmChoice(op, 'cuda').name, 'cuda-kernel');
    // It writes its arguments in place: no CUDA graph (a replay would write static copies).
    const gp = compiled.programs().inference.find((p) => p instanceof CudaGraphProgram);
    assert.ok(gp instanceof CudaGraphProgram, 'the kiln backend cuda program');
    assert.match(gp.stats.disabled ?? '', /writes its arguments in place \(llm\.fusedAddRmsNorm\)/);
  });
}

test('argumentWriter finds ops that write the compiled function\'s arguments in place (no CUDA graph for those calls)', () => {
  const w = rand([8], 1);
  const x = rand([3, 8], 2);
  const r = rand([3, 8], 3);
  const g = (fn: (...a: T[]) => unknown, args: T[]): ReturnType<typeof trace>['graph'] => trace(fn as (...a: never[]) => unknown, args).graph;
  assert.equal(argumentWriter(g((a: T, b: T) => llm.fusedAddRmsNorm(a, b, w, 1e-6).input, [x, r])), 'llm.fusedAddRmsNorm');
  assert.equal(argumentWriter(g((a: T) => llm.rotaryEmbedding(ropePositions(3, 8, 1), a.narrow(1, 0, 8), null, 8, ropeCache(8, 8), true).query, [x])), 'llm.rotaryEmbedding');
  assert.equal(argumentWriter(g((a: T, b: T) => llm.addRmsNorm(a, b, w, 1e-6).out, [x, r])), null);
  // In place on an intermediate only: the arguments are untouched, graphs stay allowed.
  assert.equal(argumentWriter(g((a: T, b: T) => llm.fusedAddRmsNorm(a.mul(2), b.add(1), w, 1e-6).input, [x, r])), null);
});

test('norm kernel geometry: every row vector has a thread, blocks stay within limits, long rows take the loop path', () => {
  for (const nvec of [1, 2, 31, 33, 64, 128, 129, 500, 512, 1024, 2048, 4096, 4097, 10000]) {
    const g = normThreads(nvec);
    assert.ok(g.tpr % 32 === 0 && g.tpr >= 32 && g.tpr <= 512, `nvec ${nvec}: tpr ${g.tpr}`);
    assert.equal(g.warpPerRow, g.tpr === 32 && nvec <= 32 * normTuning().vecsPerThread, `nvec ${nvec}: warp mode`);
    if (g.items > 0) assert.ok(g.items <= 8 && g.tpr * g.items >= nvec && g.tpr * (g.items - 1) < nvec, `nvec ${nvec}: ${g.tpr} threads x ${g.items} vectors`);
    else assert.ok(nvec > 512 * 8, `nvec ${nvec}: loop path only past the register limit`);
  }
});

test('norm codegen: H compiled in only where the row fits the thread slots; bounds checks only on slots that can pass the row end; streaming hints never on the weights', () => {
  const base: NormSpec = { dtype: 'float32', mode: 'plain', vector: true, warpPerRow: false, items: 4, tpr: 512, minThreadsPerSm: 1024, hConst: 8192 };
  assert.equal(hConstOf(base), 8192);
  // 8196 fp32 = 2049 vectors > 512 x 4 slots; 8194 is not a whole number of 4-element vectors.
  for (const bad of [{ hConst: 8196 }, { hConst: 8194 }, { vector: false }, { serialLoads: true }, { items: 0 }, { tpr: undefined }]) assert.equal(hConstOf({ ...base, ...bad }), 0, JSON.stringify(bad));
  const exact = generateNorm(base).source;
  assert.match(exact, /const int H = 8192;/);
  assert.doesNotMatch(exact, /j < nvec\)/);
  // 4104 fp32 = 1026 vectors on 288 threads: slots 0-2 always hold a vector, slot 3 only for some threads.
  const partial = generateNorm({ ...base, tpr: 288, hConst: 4104 }).source;
  assert.match(partial, /if \(it < 3 \|\| j < nvec\)/);
  const generic = generateNorm({ ...base, hConst: undefined }).source;
  assert.match(generic, /int H, long long xs/);
  assert.match(generic, /if \(j < nvec\)/);
  const cs = generateNorm({ ...base, mode: 'addInPlace', prefetchWeight: true, streaming: true }).source;
  for (const b of ['xr', 'rr']) assert.match(cs, new RegExp(`kiln_ldcs<kiln_vec<float, 4>>\\(${b} \\+`));
  assert.match(cs, /kiln_stcs\(orow \+/);
  assert.match(cs, /kiln_stcs\(ror \+/);
  assert.doesNotMatch(cs, /kiln_ldcs<kiln_vec<float, 4>>\(w \+/);
  assert.match(cs, /reinterpret_cast<const kiln_vec<float, 4>\*>\(w \+/);
});

test('overlap check: column slices of one qkv matrix are proven disjoint without a scan; shared elements are still caught', () => {
  const qkv = kiln.empty([4, 3 * 16]);
  const q = qkv.narrow(1, 0, 16);
  const k = qkv.narrow(1, 16, 16);
  assert.doesNotThrow(() => assertNoOverlap('op', ['query', q], ['key', k]));
  assert.doesNotThrow(() => assertNoOverlap('op', ['query', qkv.narrow(1, 32, 16).reshape([4, 2, 8])], ['key', k.reshape([4, 2, 8])]));
  assert.throws(() => assertNoOverlap('op', ['query', q], ['key', qkv.narrow(1, 15, 16)]), /op: arguments 'query' \[4, 16\] and 'key' \[4, 16\] overlap in memory \(element 15/);
  // Rows that wrap past the row stride are not provable and go to the element scan (still exact).
  const base = kiln.empty([8]);
  assert.throws(() => assertNoOverlap('op', ['input', base.asStrided([2, 2], [2, 1], 1)], ['residual', base.asStrided([2, 2], [2, 1], 0)]), /overlap in memory/);
  assert.doesNotThrow(() => assertNoOverlap('op', ['input', base.asStrided([2, 2], [4, 1], 1)], ['residual', base.asStrided([2, 1], [4, 1], 3)]));
});
