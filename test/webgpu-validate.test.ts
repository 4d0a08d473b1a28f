/**
 * Runs every webgpu pointwise kernel (every op the WGSL table gives one, every dtype it computes,
 * broadcast, transposed and scalar operands) on Dawn's null backend, which needs no GPU: each
 * generated WGSL program is compiled by Dawn (a shader or pipeline error throws at the op, with the
 * source line), and every dispatch is encoded and submitted (binding, aliasing and metadata-offset
 * errors surface at the synchronize). The null backend computes nothing, so no value is checked
 * here (webgpu-pointwise.test.ts, webgpu-linalg.test.ts and webgpu-reduction.test.ts compare values
 * where an adapter exists). Reductions (eager) and compiled programs are rendered by the fused-group
 * renderer and checked the same way, every strategy and storage form of every compiled group included,
 * as are the hand-written templates (scans, sorts, scatters, pooling, conv: webgpu-ops-cases.ts).
 */
import assert from 'node:assert/strict';
import { dawnSkipReason } from './helpers/dawn.js';
import test from 'node:test';
import type { StorageKind } from '../src/kernels/webgpu/storage.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';

// Before Kiln reads its options: this process's webgpu device is Dawn's null backend.
process.env.KILN_WEBGPU_BACKEND = 'null';
const kiln = await import('../src/index.js');
const { dispatch } = await import('../src/ops/dispatch.js');
const { getOp } = await import('../src/ops/registry.js');
const { pointwiseCases, argsOn } = await import('./webgpu-cases.js');

const skip = dawnSkipReason();

test('the null backend loads as webgpu:0 and says it computes nothing', { skip }, () => {
  const probe = kiln.probeAccelerators().find((p) => p.type === 'webgpu');
  assert.equal(probe?.available, true, probe?.reason);
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  assert.equal(acc.computesNothing, true);
  assert.equal(acc.properties(0).backend, 'null');
  const x = kiln.tensor([1, 2, 3], { device: 'webgpu' });
  assert.equal(x.device.toString(), 'webgpu:0');
  assert.deepEqual([...x.to('cpu').shape], [3]);
});

test('every pointwise kernel compiles and encodes on Dawn (all dtypes, broadcast/strided/scalar)', { skip }, () => {
  const cases = pointwiseCases();
  let ran = 0;
  const rejected: string[] = [];
  for (const c of cases) {
    const op = getOp(c.op);
    const args = argsOn(c, 'webgpu');
    try {
      // The op's meta decides which dtypes it takes; those it rejects are not kernels to check.
      op.meta(...(args as never[]));
    } catch {
      rejected.push(c.label);
      continue;
    }
    try {
      dispatch(op, ...(args as never[]));
      ran++;
    } catch (e) {
      const m = (e as Error).message;
      // The null backend reads back garbage, so a host-side integer divisor check may see a zero.
      if (m.includes('ZeroDivisionError')) continue;
      // Outputs the op's meta makes 64-bit (bool + int scalar gives int64): WGSL has no 64-bit types.
      if (/do not support dtype (int64|float64)/.test(m)) {
        rejected.push(c.label);
        continue;
      }
      assert.fail(`${c.label}: ${m}`);
    }
  }
  kiln.synchronize('webgpu');
  assert.ok(ran > 300, `ran ${ran} cases (meta rejected ${rejected.length})`);
});

test('a WGSL error names the kernel and the offending line; device faults surface at the next sync', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const bad = '@group(0) @binding(0) var<storage, read_write> b0: array<f32>;\n@compute @workgroup_size(64) fn main() { b0[0] = undefinedThing; }';
  assert.throws(
    () => acc.kernel(bad, 'kiln.test-bad'),
    (e: Error) => e.name === 'WebgpuError' && e.message.includes("'kiln.test-bad'") && e.message.includes('undefinedThing') && e.message.includes('line 2'),
  );
  // A dispatch that binds too few buffers: accepted when queued, reported (validation) at the sync.
  const good = acc.kernel('@group(0) @binding(0) var<storage, read_write> b0: array<f32>;\n@group(0) @binding(1) var<storage, read> kmeta: array<u32>;\n@compute @workgroup_size(64) fn main() { b0[0] = f32(kmeta[0]); }', 'kiln.test-good');
  const x = kiln.zeros([4], { device: 'webgpu' });
  acc.dispatch(good, [], new Uint32Array([1]), [1, 1, 1]);
  assert.throws(() => kiln.synchronize('webgpu'), (e: Error) => e.name === 'WebgpuError' && /validation/.test(e.message) && /Kiln|synchroniz/.test(e.message));
  x.dispose();
  kiln.synchronize('webgpu');
});

test('unsupported dtypes fail with a clear error', { skip }, () => {
  const x = kiln.tensor([1, 2], { dtype: 'float64' }).to('webgpu');
  assert.throws(() => kiln.exp(x), /webgpu kernels do not support dtype float64|no form/);
});

test('every GEMM variant compiles, and every matrix-product case encodes on Dawn (float32, float16, bfloat16)', { skip }, async () => {
  const { gemmKernel } = await import('../src/kernels/webgpu/linalg.js');
  const { GEMM_CASES, GEMM_TEST_DTYPES, argsFor } = await import('./webgpu-linalg-cases.js');
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  // Every storage kind (float16 both native and packed, whatever this adapter offers), load mapping, bias and beta.
  let compiled = 0;
  const kinds: StorageKind[] = ['f32', 'f16p', 'bf16p', ...(acc.hasFeature('shader-f16') ? (['f16'] as const) : [])];
  for (const k of kinds) {
    for (const aMajor of ['k', 'm'] as const) {
      for (const bMajor of ['n', 'k'] as const) {
        for (const bias of [false, true]) {
          for (const beta of [false, true]) {
            gemmKernel({ a: k, b: k, c: k, aMajor, bMajor, bias, beta });
            compiled++;
          }
        }
      }
    }
  }
  assert.equal(compiled, kinds.length * 16);
  // Split K: the partial-sum kernels (f32 scratch) of every operand kind and layout, and the combine of every output kind and epilogue.
  const { gemmCombineKernel } = await import('../src/kernels/webgpu/linalg.js');
  for (const k of kinds) {
    for (const aMajor of ['k', 'm'] as const) for (const bMajor of ['n', 'k'] as const) gemmKernel({ a: k, b: k, c: 'f32', aMajor, bMajor, bias: false, beta: false, partial: true });
    for (const bias of [false, true]) for (const beta of [false, true]) gemmCombineKernel(k, bias, beta);
    // The ReLU epilogue (conv2dBatchNorm's) and the GELU ones (llm.linearGelu's, both forms) of the tiled kernels and the combine.
    for (const act of [{ relu: true }, { gelu: 'none' }, { gelu: 'tanh' }] as const) {
      gemmKernel({ a: k, b: k, c: k, aMajor: 'k', bMajor: 'k', bias: true, beta: false, ...act });
      gemmKernel({ a: k, b: k, c: k, aMajor: 'k', bMajor: 'k', bias: true, beta: false, ...act, tile: 'large' });
      gemmCombineKernel(k, true, false, act);
    }
  }
  // The large form (128x128 tiles of vec4s, KILN_WEBGPU_GEMM_TILE) of every kind, load mapping, bias, beta and split-K partial.
  let large = 0;
  for (const k of kinds) {
    for (const aMajor of ['k', 'm'] as const) {
      for (const bMajor of ['n', 'k'] as const) {
        for (const bias of [false, true]) for (const beta of [false, true]) gemmKernel({ a: k, b: k, c: k, aMajor, bMajor, bias, beta, tile: 'large' });
        gemmKernel({ a: k, b: k, c: 'f32', aMajor, bMajor, bias: false, beta: false, partial: true, tile: 'large' });
        large += 5;
      }
    }
  }
  assert.equal(large, kinds.length * 20);
  // The float16 conv's im2col gather (conv-im2col.ts).
  const { im2colSource } = await import('../src/kernels/webgpu/conv-im2col.js');
  acc.kernel(im2colSource(), 'kiln.conv2d.im2col.16');
  // conv2dBatchNorm's fold (conv-bn.ts) over each weight kind, with every operand and with the optional ones absent.
  const { foldSource } = await import('../src/kernels/webgpu/conv-bn.js');
  for (const w of kinds.filter((k) => k === 'f16' || k === 'f16p')) {
    for (const stats of kinds) {
      acc.kernel(foldSource(w, [stats, stats, stats, stats, w]), `conv2dBatchNorm fold ${w} ${stats}`);
      acc.kernel(foldSource(w, [stats, stats, null, null, null]), `conv2dBatchNorm fold ${w} ${stats} (mean and var only)`);
    }
  }
  let ran = 0;
  for (const dtype of GEMM_TEST_DTYPES) {
    for (const c of GEMM_CASES) {
      try {
        dispatch(getOp(c.op), ...(argsFor(c, dtype, 'webgpu') as never[]));
        ran++;
      } catch (e) {
        assert.fail(`${c.label} ${dtype}: ${(e as Error).message}`);
      }
    }
  }
  kiln.synchronize('webgpu');
  assert.equal(ran, GEMM_CASES.length * GEMM_TEST_DTYPES.length);
  assert.throws(() => kiln.matmul(kiln.ones([2, 2], { dtype: 'int32', device: 'webgpu' }), kiln.ones([2, 2], { dtype: 'int32', device: 'webgpu' })), /webgpu GEMM supports float32, float16 and bfloat16, got int32/);
});

test('kiln.Event on webgpu: timestamps encode and resolve (device-timed where timestamp-query exists)', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const a = kiln.ones([96, 96], { device: 'webgpu' });
  const start = new kiln.Event('webgpu');
  const end = new kiln.Event('webgpu');
  start.record();
  kiln.matmul(a, a).dispose();
  end.record();
  end.synchronize();
  const ms = start.elapsedTime(end);
  // The null backend resolves stamps to whatever its memory held; a real device's are nanoseconds
  // after the work (webgpu-linalg.test.ts checks those). Here: encoded, resolved, no device fault.
  assert.ok(Number.isFinite(ms) && ms >= 0, `elapsed ${ms}`);
  assert.ok(acc.hasFeature('timestamp-query'), 'the null adapter offers timestamp-query, so the device-timed path ran');
  // Without timing, elapsedTime refuses; an unrecorded event too.
  const untimed = new kiln.Event('webgpu', { enableTiming: false }).record();
  assert.throws(() => untimed.elapsedTime(end), /enableTiming/);
  assert.throws(() => new kiln.Event('webgpu').elapsedTime(end), /recorded/);
  kiln.synchronize('webgpu');
  a.dispose();
});

// ------------------------------------------------------------------------------------------------
// Reductions and compiled groups: the fused-group renderer (kernels/webgpu/fused/)
// ------------------------------------------------------------------------------------------------

const { reductionCases, compileCases } = await import('./webgpu-reduction-cases.js');
const { trace } = await import('../src/compile/capture.js');
const { lowerFor } = await import('../src/compile/target.js');
const { compileWgsl, webgpuTarget } = await import('../src/compile/codegen/wgsl/target.js');
const { fusedGroup, groupLayout } = await import('../src/compile/codegen/wgsl/group.js');
const { renderFused } = await import('../src/kernels/webgpu/fused/render.js');
const { storageKind } = await import('../src/kernels/webgpu/storage.js');
const { setLogSink } = await import('../src/compile/log.js');

test('every eager webgpu reduction compiles and encodes on Dawn (all dtypes, odd/strided/transposed, keepdim, 0-d, empty)', { skip }, () => {
  const failures: string[] = [];
  let ran = 0;
  for (const c of reductionCases()) {
    try {
      const outs = c.run(c.input.to('webgpu'));
      for (const o of outs) assert.equal(o.device.type, 'webgpu', c.label);
      ran++;
    } catch (e) {
      failures.push(`${c.label}: ${(e as Error).message.split('\n').slice(0, 3).join(' | ')}`);
    }
  }
  kiln.synchronize('webgpu');
  assert.deepEqual(failures, []);
  assert.ok(ran > 150, `ran ${ran} cases`);
});

test('integer sums (an int64 result) fail naming the dtype', { skip }, () => {
  const x = kiln.tensor([1, 2, 3], { dtype: 'int32' }).to('webgpu');
  assert.throws(() => kiln.sum(x), /do not support dtype int64/);
  assert.deepEqual(kiln.sum(x, null, false, 'int32').device.type, 'webgpu');
});

test('every compiled webgpu program fuses, compiles and encodes on Dawn, with no node-by-node fallback', { skip }, () => {
  for (const c of compileCases()) {
    const ins = c.inputs.map((t) => t.to('webgpu'));
    const { graph } = trace(c.fn as never, ins);
    const p = compileWgsl(graph);
    p.run(ins);
    assert.ok(p.kernelCount > 0, `${c.label}: no kernels`);
    assert.equal(p.stats.fallbacks, 0, c.label);
    assert.equal(p.stats.launches, p.kernelCount, `${c.label}: ${p.stats.launches} launches`);
    assert.match(p.describe(), /@compute/, c.label);
  }
  kiln.synchronize('webgpu');
});

test('kiln.compile runs webgpu graphs on the webgpu target (softmax is one row kernel)', { skip }, () => {
  const x = kiln.randn([4, 37]).to('webgpu');
  const code: string[] = [];
  const prev = setLogSink((a, t) => void (a === 'output_code' && code.push(t)));
  try {
    const f = kiln.compile((t: typeof x) => kiln.softmax(kiln.mul(t, 2), -1), { log: ['output_code'] });
    assert.equal(f(x).device.type, 'webgpu');
  } finally {
    setLogSink(prev);
  }
  kiln.synchronize('webgpu');
  assert.equal(code.length, 1);
  assert.match(code[0]!, /wrapper \(webgpu\)/);
  assert.match(code[0]!, /kiln_k0_reduce: 6 ops \[mul, amax, sub, exp, sum, div\]/);
});

test('a group wider than the device binds runs node by node through the eager kernels', { skip }, () => {
  const xs = Array.from({ length: 9 }, (_, i) => kiln.full([5], i).to('webgpu'));
  const f = (...t: (typeof xs)[number][]) => t.reduce((a, b) => kiln.add(a, b));
  const { graph } = trace(f as never, xs);
  const p = compileWgsl(graph);
  const y = p.run(xs) as (typeof xs)[number];
  kiln.synchronize('webgpu');
  assert.equal(p.stats.fallbacks, 1);
  assert.deepEqual([...y.shape], [5]);
  assert.match(p.describe(), /node by node: 10 storage buffers/);
});

test('every strategy of every compiled group validates: thread and workgroup, subgroups on and off, packed and native float16', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  let n = 0;
  for (const c of compileCases()) {
    const ins = c.inputs.map((t) => t.to('webgpu'));
    const { graph } = trace(c.fn as never, ins);
    const { low, sched } = lowerFor(graph, webgpuTarget);
    for (const g of sched.kernels) {
      const fg = fusedGroup(g, low);
      const L = groupLayout(g, (id) => low.values.get(id)!);
      const ops = [...g.outputs, ...g.inputs];
      for (const strategy of g.kind === 'pointwise' ? (['pointwise'] as const) : (['thread', 'workgroup'] as const)) {
        for (const subgroups of [false, true]) {
          for (const nativeF16 of [false, true]) {
            const bindings = ops.map((id, k) => ({ kind: storageKind(low.values.get(id)!.dtype, nativeF16)!, written: k < g.outputs.length }));
            const spec = { strategy, orank: L.oshape.length, rrank: L.rshape.length, bindings, operandBinding: ops.map((_, k) => k), subgroups };
            acc.kernel(renderFused(fg, spec), `${c.label} ${strategy}${subgroups ? ' subgroups' : ''}${nativeF16 ? ' f16' : ''}`);
            n++;
          }
        }
      }
    }
  }
  assert.ok(n > 50, `${n} sources`);
});

test('every vector form of a pointwise kernel validates: each storage kind, 2 and 4 lanes, broadcast lanes, mixed kinds, in place', { skip }, async () => {
  const { hasVectorForm } = await import('../src/kernels/webgpu/storage.js');
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const DT: Record<StorageKind, string> = { f32: 'float32', i32: 'int32', f16: 'float16', f16p: 'float16', bf16p: 'bfloat16', u8p: 'uint8', boolp: 'bool' };
  const kinds: StorageKind[] = ['f32', 'i32', 'f16p', 'bf16p', 'u8p', 'boolp', ...(acc.hasFeature('shader-f16') ? (['f16'] as const) : [])];
  let n = 0;
  for (const out of kinds) {
    for (const inp of [out, 'f32' as StorageKind]) {
      for (const V of [2, 4] as const) {
        if (!hasVectorForm(out, V) || !hasVectorForm(inp, V)) continue;
        // out = v1 + v2 (v2 broadcast along the innermost dim), rank 1 and 2, separate and in place.
        const values = new Map([
          [1, { dtype: DT[inp], shape: [8] }],
          [2, { dtype: DT[inp], shape: [8] }],
          [100, { dtype: DT[out], shape: [8] }],
        ]);
        const cast = DT[out] === 'float32' || DT[out] === 'int32' ? '' : 'f32';
        const g = {
          kind: 'pointwise' as const,
          nodes: [{ kind: 'pointwise' as const, op: 'add', args: [1, 2].map((id) => ({ kind: 'value' as const, id })), outputs: [100], expr: DT[out] === 'int32' || DT[out] === 'uint8' || DT[out] === 'bool' ? `i32(v1) + i32(v2)` : `${cast}(v1) + ${cast}(v2)` }],
          rowScalars: new Set<number>(),
          inputs: [1, 2],
          outputs: [100],
          value: (id: number) => values.get(id) as never,
        };
        for (const orank of [1, 2]) {
          for (const inPlace of inp === out ? [false, true] : [false]) {
            const bindings = inPlace
              ? [{ kind: out, written: true }, { kind: inp, written: false }]
              : [{ kind: out, written: true }, { kind: inp, written: false }, { kind: inp, written: false }];
            // One vector per invocation step, and several (KILN_WEBGPU_VEC_STEPS: all loads first).
            for (const steps of [1, 3]) {
              const spec = { strategy: 'pointwise' as const, orank, rrank: 0, bindings, operandBinding: inPlace ? [0, 0, 1] : [0, 1, 2], subgroups: false, vector: { vec: V, operandVector: [true, true, false], steps } };
              acc.kernel(renderFused(g as never, spec), `vector ${out}<-${inp} v${V}x${steps} r${orank}${inPlace ? ' in place' : ''}`);
              n++;
            }
          }
        }
      }
    }
  }
  assert.ok(n >= 80, `${n} sources`);
});

test('every kernel of webgpu-ops-cases (scans, sorts, scatters, index writes, masks, pooling, conv, norms) compiles and encodes on Dawn', { skip }, async () => {
  const { opCases } = await import('./webgpu-ops-cases.js');
  const { sameLayoutOnWebgpu } = await import('./helpers/webgpu.js');
  const failures: string[] = [];
  let ran = 0;
  // A host-planned indexPut reads its indices back, which the null backend makes garbage.
  for (const c of opCases().filter((o) => o.readsBack !== true)) {
    try {
      c.run(...c.inputs.map(sameLayoutOnWebgpu));
      ran++;
    } catch (e) {
      failures.push(`${c.label}: ${(e as Error).message.split('\n').slice(0, 3).join(' | ')}`);
    }
  }
  kiln.synchronize('webgpu');
  assert.deepEqual(failures, []);
  assert.ok(ran > 200, `ran ${ran} cases`);
});

test('every implicit-GEMM conv2d source (each storage kind, K order, weight walk, bias, split-K partial and combine) compiles on Dawn', { skip }, async () => {
  const { combineSource, generateConvGemm } = await import('../src/kernels/webgpu/conv-gemm.js');
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  let n = 0;
  for (const kind of ['f32', 'f16', 'f16p', 'bf16p'] as StorageKind[]) {
    for (const bias of [false, true]) {
      acc.kernel(combineSource(kind, bias), `conv2d gemm combine ${kind}${bias ? ' bias' : ''}`);
      n++;
    }
    for (const order of ['hwc', 'chw'] as const) {
      for (const bMajor of ['k', 'n'] as const) {
        for (const [bias, partial] of [[false, false], [true, false], [false, true]] as const) {
          acc.kernel(generateConvGemm({ kind, order, bMajor, bias, partial }), `conv2d gemm ${kind} ${order} ${bMajor}${bias ? ' bias' : ''}${partial ? ' partial' : ''}`);
          n++;
        }
      }
    }
  }
  assert.equal(n, 56);
});

// Last in this file: it destroys the process's webgpu device.
test('the webgpu LLM cases and the tiny Qwen3 (forward, compiled forward, generate; float32, float16, bfloat16) encode with no unsupported op', { skip }, async () => {
  const { llmCases } = await import('./webgpu-llm-cases.js');
  for (const c of llmCases()) {
    try {
      c.run('webgpu', false);
    } catch (e) {
      assert.fail(`${c.label}: ${(e as Error).message}`);
    }
  }
  kiln.synchronize('webgpu');
  const { Qwen3ForCausalLM, QWEN3_TINY } = kiln.models;
  kiln.noGrad(() => {
    for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
      const m = Qwen3ForCausalLM.fromConfig(QWEN3_TINY, { seed: 1, dtype }).eval().to('webgpu');
      const ids = kiln.tensor([[1, 5, 7, 9]], { dtype: 'int64' }).to('webgpu');
      const logits = m.forward(ids);
      assert.deepEqual([...logits.shape], [1, 4, QWEN3_TINY.vocabSize]);
      assert.equal(logits.device.type, 'webgpu');
      if (dtype === 'float32') kiln.compile((x: typeof ids) => m.forward(x))(ids);
      // The engine's eager decode (llm.reshapeAndCache, llm.pagedAttention) and its step path (prefill).
      // The null backend reads back garbage, so the sampled ids may be anything in the vocabulary.
      const out = kiln.generate(m, [[1, 5, 7, 9]], { maxNewTokens: 3 });
      assert.equal(out.shape[0], 1);
      kiln.synchronize('webgpu');
    }
  });
});

test('a lost device fails every later call with an error that says what Kiln held', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const x = kiln.ones([1024], { device: 'webgpu' });
  kiln.synchronize('webgpu');
  acc.loseDeviceForTesting();
  const lost = (e: Error): boolean => e.name === 'WebgpuError' && (e as { kind?: string }).kind === 'lost' && /device was lost/.test(e.message) && /Kiln holds .* in \d+ live buffers/.test(e.message);
  assert.throws(() => kiln.synchronize('webgpu'), lost);
  // Sticky: the next call (a readback) says the same, not a confusing validation error.
  assert.throws(() => x.toArray(), lost);
  x.dispose();
  assert.throws(() => kiln.synchronize('webgpu'), lost);
});

