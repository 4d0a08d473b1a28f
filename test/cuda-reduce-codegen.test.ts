/**
 * CPU-side tests of the eager cuda reductions' code generation (no GPU needed; these run in CI):
 * the groups of kernels/cuda/reduce-programs.ts rendered by the fused-group renderer
 * (kernels/cuda/codegen/reduce.ts), their layouts (logical row order for arg reductions, keepdim
 * and not), the compiler's default configs with the scalar fallback, when strided rows are copied
 * first, and what the rendered text must hold (exact libm math, host scalars, arg combines, no
 * split for arg reductions). Numbers: scripts/cuda-reduce-emu.mjs (host emulation) and
 * test/cuda-reductions.test.ts (the device).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import '../src/index.js';
import { eagerGroup, eagerLayout, type LaidOut, needsRowCopy, type ReduceCall, reduceConfig, reduceGroupKey, reducePlan, renderReduce, rowsStrides } from '../src/kernels/cuda/codegen/reduce.js';
import { configSpace, H200_TARGET } from '../src/kernels/cuda/fused/configs.js';
import { kernelSpec } from '../src/kernels/cuda/fused/spec.js';
import { argProgram, momentProgram, reduceProgram, softmaxProgram } from '../src/kernels/cuda/reduce-programs.js';
import type { ReduceGroup } from '../src/kernels/cuda/reduce-group.js';
import type { DType } from '../src/tensor/dtype.js';
import { contiguousStrides } from '../src/tensor/layout.js';

const dense = (shape: number[], dtype: DType = 'float32', strides = contiguousStrides(shape), offset = 0): LaidOut => ({ shape, strides, offset, dtype });

/** A call of group b over x with per-row (or full-size) contiguous results of the given dtypes. */
function call(b: ReduceGroup, x: LaidOut, dims: number[], outs: { dtype: DType; row: boolean; keepdim?: boolean }[], extra: Partial<ReduceCall> = {}): ReduceCall {
  return {
    x,
    dims,
    outs: outs.map((o) => ({ t: dense(o.row ? x.shape.flatMap((s, d) => (dims.includes(d) ? (o.keepdim ? [1] : []) : [s])) : [...x.shape], o.dtype), row: o.row })),
    nodes: b.nodes,
    values: b.values,
    ...extra,
  };
}

function render(c: ReduceCall, label: string): { source: string; names: string[]; config: string } {
  const g = eagerGroup(c);
  const L = eagerLayout(c);
  const p = reducePlan(g, kernelSpec(L), label);
  const cfg = reduceConfig(p, L, H200_TARGET);
  const r = renderReduce(p, cfg, H200_TARGET);
  return { source: r.source, names: r.kernels.map((k) => k.name), config: `${cfg.strategy}/${cfg.vec}` };
}

test('a row sum takes the compiler default for its layout: a block per long row with 16-byte vectors, split for few very long rows, scalar where the vector width cannot run', () => {
  const x = dense([64, 4096]);
  assert.equal(render(call(reduceProgram('sum', x, [1], 'float32'), x, [1], [{ dtype: 'float32', row: true }]), 'sum').config, 'block/4');
  const long = dense([2, 1 << 20], 'bfloat16');
  const split = render(call(reduceProgram('sum', long, [1], 'bfloat16'), long, [1], [{ dtype: 'bfloat16', row: true }]), 'sum');
  assert.equal(split.config, 'split/8');
  assert.deepEqual(
    split.names.map((n) => n.replace(/^kiln_red_sum_[0-9a-f]{12}_/, '')),
    ['split_b512v8_partial', 'split_b512v8_finish'],
  );
  // A row of 4097 elements: no vector width divides it.
  const odd = dense([64, 4097]);
  assert.equal(render(call(reduceProgram('sum', odd, [1], 'float32'), odd, [1], [{ dtype: 'float32', row: true }]), 'sum').config, 'block/1');
  // A misaligned start (offset 1) also runs scalar.
  const off = dense([64, 4096], 'float32', contiguousStrides([64, 4096]), 1);
  assert.equal(render(call(reduceProgram('sum', off, [1], 'float32'), off, [1], [{ dtype: 'float32', row: true }]), 'sum').config, 'block/1');
});

test('integer sums accumulate in the int64 result; mean divides by the row length; dtype= casts the input first', () => {
  const x = dense([8, 300], 'int32');
  const s = render(call(reduceProgram('sum', x, [1], 'int64'), x, [1], [{ dtype: 'int64', row: true }]), 'sum').source;
  assert.match(s, /long long a\d+ = 0LL;/);
  const f = dense([8, 300], 'bfloat16');
  const m = render(call(reduceProgram('mean', f, [1], 'bfloat16'), f, [1], [{ dtype: 'bfloat16', row: true }]), 'mean').source;
  assert.match(m, /a\d+ \/ \(float\)N/);
  const c = render(call(reduceProgram('sum', dense([8, 300]), [1], 'float16', 'float16'), dense([8, 300]), [1], [{ dtype: 'float16', row: true }]), 'sum').source;
  assert.match(c, /kiln_h2f\(kiln_f2h\(/, 'the float32 input is rounded to float16 before it is summed');
});

test('eager groups use exact libm math (no fast exp) and pass host scalars as double arguments', () => {
  const x = dense([16, 1000]);
  const sm = render(call(softmaxProgram('softmax', x, [1], 'float32'), x, [1], [{ dtype: 'float32', row: false }]), 'softmax').source;
  assert.match(sm, /expf\(/);
  assert.doesNotMatch(sm.slice(sm.indexOf('extern "C"')), /kiln_fexp/);
  const v = momentProgram('var', x, [1], 'float32');
  const vs = render(call(v, x, [1], [{ dtype: 'float32', row: true }], { params: { ct: 'float', values: [1 / 999] } }), 'var').source;
  assert.match(vs, /double p_s0/);
  assert.match(vs, /const float s0 = \(float\)p_s0;/);
});

test('arg reductions: pairs combined by warp shuffles (and shared memory across warps), never split, indices in the logical order of the reduced dims', () => {
  const x = dense([2, 1 << 20]);
  const b = argProgram('argmax', x, [1], true);
  const c = call(b, x, [1], [
    { dtype: 'float32', row: true },
    { dtype: 'int64', row: true },
  ]);
  const r = render(c, 'max');
  assert.equal(r.config, 'block/4', 'few very long rows: a block per row (arg reductions have no split)');
  assert.match(r.source, /__shfl_xor_sync\(0xffffffffu, ai\d+, off\)/);
  assert.match(r.source, /__shared__ long long si\d+\[32\];/);
  const g = eagerGroup(c);
  const L = eagerLayout(c);
  assert.ok(!configSpace(reducePlan(g, kernelSpec(L), 'max').ctx, L, H200_TARGET).some((cfg) => cfg.kind === 'reduce' && cfg.strategy === 'split'));
  // argmax over every dim of a transposed [3, 5] view: the row is read in logical order (dims 0, 1), not memory order.
  const t = dense([3, 5], 'float32', [1, 3]);
  const ac = call(argProgram('argmax', t, [0, 1], false), t, [0, 1], [{ dtype: 'int64', row: true }], { keepRowOrder: true });
  assert.deepEqual(eagerLayout(ac).rshape, [3, 5]);
  assert.deepEqual(eagerLayout({ ...ac, keepRowOrder: false }).rshape, [15], 'a sum may walk the memory order instead');
});

test('layouts: results without the reduced dims (keepdim or not) address one element per row; a middle dim is a strided row', () => {
  const x = dense([4, 6, 5]);
  for (const keepdim of [false, true]) {
    const L = eagerLayout(call(reduceProgram('sum', x, [1], 'float32'), x, [1], [{ dtype: 'float32', row: true, keepdim }]));
    assert.deepEqual(L.oshape, [4, 5]);
    assert.deepEqual(L.rshape, [6]);
    assert.deepEqual(L.ost[0], [5, 1], `keepdim ${keepdim}: the result's outer strides`);
    assert.deepEqual(L.rst[0], [0]);
    assert.deepEqual(L.rst[1], [5], 'the input walks its row with stride 5');
  }
});

test('strided rows: read in place when there are enough rows for the thread strategy, copied into dense rows when few and long', () => {
  const spec = (x: LaidOut, dims: number[]) => {
    const c = call(reduceProgram('sum', x, dims, 'float32'), x, dims, [{ dtype: 'float32', row: true }]);
    const L = eagerLayout(c);
    return { L, s: kernelSpec(L) };
  };
  const many = spec(dense([128, 64, 1024]), [1]);
  assert.equal(needsRowCopy(many.s, many.L, 1, H200_TARGET), false, '131072 rows');
  const few = spec(dense([2, 40000, 3]), [1]);
  assert.equal(needsRowCopy(few.s, few.L, 1, H200_TARGET), true, '6 rows of 40000');
  const short = spec(dense([2, 40, 3]), [1]);
  assert.equal(needsRowCopy(short.s, short.L, 1, H200_TARGET), false, 'rows shorter than the copy threshold');
  const contiguous = spec(dense([6, 40000]), [1]);
  assert.equal(needsRowCopy(contiguous.s, contiguous.L, 1, H200_TARGET), false, 'dense rows');
  // The copy puts kept dims outside, reduced dims inside, each in logical order.
  assert.deepEqual(rowsStrides([2, 40000, 3], [1]), [120000, 1, 40000]);
  assert.deepEqual(rowsStrides([4, 5, 6], [0, 2]), [6, 24, 1]);
});

test('group keys tell apart what changes the text: dtypes, casts, 0-d operands', () => {
  const key = (x: LaidOut, out: DType, cast?: DType) => reduceGroupKey(eagerGroup(call(reduceProgram('sum', x, [0], out, cast), x, [0], [{ dtype: out, row: true }])));
  const keys = [key(dense([5]), 'float32'), key(dense([5], 'float16'), 'float16'), key(dense([5], 'float16'), 'float32', 'float32'), key(dense([5], 'int32'), 'int64')];
  assert.equal(new Set(keys).size, keys.length);
  assert.equal(key(dense([5]), 'float32'), key(dense([7]), 'float32'), 'sizes are arguments, not text');
});
