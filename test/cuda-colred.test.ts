/**
 * CPU-side tests of the column strategy of the cuda reduce renderer ('col', kernels/cuda/fused/
 * emit-col.ts): few long strided rows that lie next to each other (BatchNorm over a channels_last
 * activation) get it by default, every other layout keeps its default, arg reductions never get it,
 * and a multi-level group with full-size outputs launches a tile and a finishing kernel per level
 * and a store kernel. With KILN_CUDA_COL_FEW_ROWS a group over one long contiguous row with a
 * full-size output takes col with one row per tile (it had one block). The emulator tests run a
 * BatchNorm-backward-like group's col kernels on the host (scripts/cuda-reduce-emu.mjs: a fiber per
 * CUDA thread) against the CPU when g++ is present, over channels_last rows and over one flat row.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import '../src/index.js';
import { eagerGroup, eagerLayout, type LaidOut, type ReduceCall, reducePlan, renderReduce } from '../src/kernels/cuda/codegen/reduce.js';
import { X } from '../src/kernels/cuda/codegen/reduce.js';
import { type CudaKernelConfig, configSpace, H200_TARGET, launchPlan, reduceShape, rowsAdjacent } from '../src/kernels/cuda/fused/configs.js';
import { kernelSpec } from '../src/kernels/cuda/fused/spec.js';
import { ReduceGroup } from '../src/kernels/cuda/reduce-group.js';
import { argProgram, batchStatsProgram, reduceProgram } from '../src/kernels/cuda/reduce-programs.js';
import type { DType } from '../src/tensor/dtype.js';
import { contiguousStrides } from '../src/tensor/layout.js';
import { setOption } from '../src/runtime/config.js';

const dense = (shape: number[], dtype: DType = 'float32', strides = contiguousStrides(shape)): LaidOut => ({ shape, strides, offset: 0, dtype });
/** NHWC memory seen as [N, C, H, W] (channels_last). */
const channelsLast = ([n, c, h, w]: number[], dtype: DType = 'float32'): LaidOut => dense([n!, c!, h!, w!], dtype, [h! * w! * c!, 1, w! * c!, c!]);

function call(b: ReduceGroup, x: LaidOut, dims: number[], outs: { dtype: DType; row: boolean }[], extra: LaidOut[] = []): ReduceCall {
  return {
    x,
    dims,
    outs: outs.map((o) => ({ t: o.row ? dense(x.shape.filter((_, d) => !dims.includes(d)), o.dtype) : { ...x, dtype: o.dtype }, row: o.row })),
    nodes: b.nodes,
    values: b.values,
    extra,
  };
}

function configs(c: ReduceCall): { all: CudaKernelConfig[]; plan: ReturnType<typeof reducePlan>; L: ReturnType<typeof eagerLayout> } {
  const L = eagerLayout(c);
  const plan = reducePlan(eagerGroup(c), kernelSpec(L), 'colred');
  return { all: configSpace(plan.ctx, L, H200_TARGET), plan, L };
}

/** Runs `f` with the opt-in 'col' strategy on (KILN_CUDA_COL_REDUCE), restoring the setting after. */
function withCol<T>(f: () => T): T {
  setOption('KILN_CUDA_COL_REDUCE', true);
  try {
    return f();
  } finally {
    setOption('KILN_CUDA_COL_REDUCE', undefined);
  }
}

const tag = (cfg: CudaKernelConfig): string => (cfg.kind === 'reduce' ? `${cfg.strategy}/b${cfg.block}/v${cfg.vec}` : 'pointwise');

test('BatchNorm statistics over a channels_last [16, 64, 112, 112] default to col (256 threads), with col at 128/256/512 among the candidates', () => {
  withCol(() => {
    const x = channelsLast([16, 64, 112, 112]);
    for (const b of [reduceProgram('sum', x, [0, 2, 3], 'float32'), batchStatsProgram(x, [0, 2, 3], 'float32')]) {
      const n = b.nodes.filter((nd) => nd.kind === 'reduction').length;
      const { all, plan, L } = configs(call(b, x, [0, 2, 3], Array.from({ length: n }, () => ({ dtype: 'float32' as DType, row: true }))));
      assert.deepEqual(L.oshape, [64]);
      assert.deepEqual(L.rshape, [200704]);
      assert.ok(rowsAdjacent(plan.spec, L));
      assert.equal(tag(all[0]!), 'col/b256/v1');
      assert.deepEqual(all.filter((cfg) => cfg.kind === 'reduce' && cfg.strategy === 'col').map(tag).sort(), ['col/b128/v1', 'col/b256/v1', 'col/b512/v1']);
    }
    // bfloat16 and a few channels (RGB): col too.
    const rgb = channelsLast([8, 3, 224, 224], 'bfloat16');
    assert.equal(tag(configs(call(reduceProgram('sum', rgb, [0, 2, 3], 'float32'), rgb, [0, 2, 3], [{ dtype: 'float32', row: true }])).all[0]!), 'col/b256/v1');
  });
});

test('col leaves the other layouts to their defaults: contiguous rows, NCHW, many strided rows, short rows, arg reductions', () => {
  withCol(() => {
    const def = (x: LaidOut, dims: number[], b = reduceProgram('sum', x, dims, 'float32')): string => tag(configs(call(b, x, dims, [{ dtype: 'float32', row: true }])).all[0]!);
    assert.equal(def(dense([64, 4096]), [1]), 'block/b512/v4');
    assert.equal(def(dense([2, 1 << 20]), [1]), 'split/b512/v4');
    // NCHW BatchNorm statistics: rows are [N, H*W] with a unit inner stride (split, few very long rows).
    assert.equal(def(dense([16, 64, 112, 112]), [0, 2, 3]), 'split/b512/v4');
    // Many strided rows (a reduction over dim 0 of [4096, 8192]): thread per row.
    assert.equal(def(dense([4096, 8192]), [0]), 'thread/b256/v1');
    // Few strided rows that are short: thread per row (M >= 32) as before.
    assert.equal(def(dense([1000, 64]), [0]), 'thread/b256/v1');
    // Strided rows that are not adjacent ([8192, 64] at strides [128, 2]): split as before.
    assert.equal(def(dense([8192, 64], 'float32', [128, 2]), [0]), 'split/b512/v1');
    // argmax over channels_last: never col.
    const x = channelsLast([16, 64, 112, 112]);
    const arg = configs(call(argProgram('argmax', x, [0], false), x, [0], [{ dtype: 'int64', row: true }]));
    assert.ok(!arg.all.some((cfg) => cfg.kind === 'reduce' && cfg.strategy === 'col'));
    // Row-contiguous groups do not offer col at all without KILN_CUDA_COL_FEW_ROWS (with it, col is
    // one more max-autotune candidate for them).
    const rows = dense([64, 4096]);
    withFewRows(() => {
      assert.ok(!configs(call(reduceProgram('sum', rows, [1], 'float32'), rows, [1], [{ dtype: 'float32', row: true }])).all.some((cfg) => cfg.kind === 'reduce' && cfg.strategy === 'col'));
    }, false);
  });
});

/** BatchNorm's input gradient as one group: mean, variance, mean(dy), mean(dy * xhat), then dx. */
function bnBackward(x: LaidOut, dims: number[]): ReduceGroup {
  const F = 'float32';
  const b = new ReduceGroup(x, dims, [x]);
  const DY = X + 1;
  const d = b.pointwise('sub', [X, b.reduction('mean', X, F), { c: 1 }], F);
  const rstd = b.expr([b.reduction('mean', b.pointwise('mul', [d, d], F), F)], '1.0f / sqrtf(a + s0)', 'float', F, { row: true });
  const xhat = b.pointwise('mul', [d, rstd], F);
  const mdy = b.reduction('mean', DY, F, 1);
  const mdx = b.reduction('mean', b.pointwise('mul', [DY, xhat], F), F, 2);
  const t = b.pointwise('sub', [b.pointwise('sub', [DY, mdy, { c: 1 }], F), b.pointwise('mul', [xhat, mdx], F), { c: 1 }], F);
  b.pointwise('mul', [t, rstd], x.dtype, { out: 0 });
  return b;
}

test('a multi-level group with a full-size output: a tile and a finishing launch per level, then the stores; coalesced geometry on the H200', () => {
  withCol(() => {
    const x = channelsLast([16, 64, 112, 112]);
    const c = call(bnBackward(x, [0, 2, 3]), x, [0, 2, 3], [{ dtype: 'float32', row: false }, { dtype: 'float32', row: true }, { dtype: 'float32', row: true }], [x]);
    const { all, plan, L } = configs(c);
    const cfg = all[0]!;
    assert.equal(tag(cfg), 'col/b256/v1');
    const shape = reduceShape(plan.ctx);
    assert.deepEqual(shape, { reductions: 4, levels: 3, stores: true });
    const r = renderReduce(plan, cfg as Extract<CudaKernelConfig, { kind: 'reduce' }>, H200_TARGET);
    assert.deepEqual(
      r.kernels.map((k) => k.name.replace(/^kiln_red_colred_[0-9a-f]{12}_col_b256v1_/, '')),
      ['p0', 'f0', 'p1', 'f1', 'p2', 'f2', 's'],
    );
    const lp = launchPlan(cfg, plan.spec, L, H200_TARGET, shape);
    assert.deepEqual(
      lp.launches.map((l) => l.kernel),
      [0, 1, 2, 3, 4, 5, 6],
    );
    const { G, chunk, TX } = lp.extraInts as { G: number; chunk: number; TX: number };
    // 32 adjacent channels per tile (a warp reads 128 contiguous bytes), 8 slices; about one wave of blocks.
    assert.equal(TX, 32);
    assert.ok(G * chunk >= 200704 && (G - 1) * chunk < 200704 && chunk % 8 === 0);
    assert.ok(lp.launches[0]!.grid === 2 * G && 2 * G <= 132 * 8);
    assert.equal(lp.workspaceBytes, 4 * 64 * (G + 1) * 8);
    assert.ok(r.source.includes('#pragma unroll 4'));
  });
});

test('without KILN_CUDA_COL_REDUCE the BatchNorm layout keeps split (one pass) or a block per row, and col is no candidate', () => {
  const x = channelsLast([16, 64, 112, 112]);
  const sum = configs(call(reduceProgram('sum', x, [0, 2, 3], 'float32'), x, [0, 2, 3], [{ dtype: 'float32', row: true }]));
  assert.equal(tag(sum.all[0]!), 'split/b512/v1');
  assert.ok(!sum.all.some((cfg) => cfg.kind === 'reduce' && cfg.strategy === 'col'));
});

test('col kernels of a BatchNorm-backward-like group match the CPU on the host emulator', (t) => {
  if (spawnSync('g++', ['--version']).status !== 0) {
    t.skip('no g++');
    return;
  }
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  const r = spawnSync(process.execPath, [path.join(root, 'scripts/cuda-reduce-emu.mjs'), '--filter', 'col batchNorm backward float32 nhwc 2x8x9x64'], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, KILN_CUDA_COL_REDUCE: '1' } });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /1 cases, \d+ runs \(3 col\), .* 0 failure\(s\)/);
});

/** Runs `f` with KILN_CUDA_COL_FEW_ROWS set to `on` (the default is on), restoring the setting after. */
function withFewRows<T>(f: () => T, on = true): T {
  setOption('KILN_CUDA_COL_FEW_ROWS', on);
  try {
    return f();
  } finally {
    setOption('KILN_CUDA_COL_FEW_ROWS', undefined);
  }
}

test('KILN_CUDA_COL_FEW_ROWS: one long contiguous row with a full-size output takes col, one row per tile, a wave of chunks; without it a block per row (one block)', () => {
  const x = dense([16, 64, 112, 112]);
  const all = [0, 1, 2, 3];
  const c = call(bnBackward(x, all), x, all, [{ dtype: 'float32', row: false }, { dtype: 'float32', row: true }, { dtype: 'float32', row: true }], [x]);
  withFewRows(() => {
    const before = configs(c);
    assert.equal(tag(before.all[0]!), 'block/b1024/v4');
    assert.equal(launchPlan(before.all[0]!, before.plan.spec, before.L, H200_TARGET, reduceShape(before.plan.ctx)).launches[0]!.grid, 1);
  }, false);
  withFewRows(() => {
    const { all: cfgs, plan, L } = configs(c);
    assert.equal(tag(cfgs[0]!), 'col/b256/v1');
    const lp = launchPlan(cfgs[0]!, plan.spec, L, H200_TARGET, reduceShape(plan.ctx));
    const { G, chunk, TX } = lp.extraInts as { G: number; chunk: number; TX: number };
    const N = 16 * 64 * 112 * 112;
    assert.equal(TX, 1);
    assert.ok(G * chunk >= N && (G - 1) * chunk < N && chunk % 256 === 0);
    assert.equal(lp.launches[0]!.grid, G);
    // About one wave of 256-thread blocks (8 per SM): chunks rounded to whole slices.
    assert.ok(G <= 132 * 8 && G > 132 * 7, `G ${G}`);
    // A single-pass sum stays split; 64 contiguous rows (NCHW BatchNorm) keep their defaults.
    const sum = configs(call(reduceProgram('sum', x, all, 'float32'), x, all, [{ dtype: 'float32', row: true }]));
    assert.equal(tag(sum.all[0]!), 'split/b512/v4');
    const nchw = configs(call(bnBackward(x, [0, 2, 3]), x, [0, 2, 3], [{ dtype: 'float32', row: false }, { dtype: 'float32', row: true }, { dtype: 'float32', row: true }], [x]));
    assert.equal(tag(nchw.all[0]!), 'block/b1024/v4');
  });
});

test('col kernels with one row per tile (a whole tensor as one row) match the CPU on the host emulator', (t) => {
  if (spawnSync('g++', ['--version']).status !== 0) {
    t.skip('no g++');
    return;
  }
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  const r = spawnSync(process.execPath, [path.join(root, 'scripts/cuda-reduce-emu.mjs'), '--filter', 'col batchNorm backward float32 flat 7x100x100'], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, KILN_CUDA_COL_FEW_ROWS: '1' } });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /1 cases, \d+ runs \(3 col\), .* 0 failure\(s\)/);
});
