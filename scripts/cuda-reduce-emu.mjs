#!/usr/bin/env node
// Dev check without a GPU: runs the CUDA C of the eager cuda reductions (every reduce program of
// src/kernels/cuda/reduce-programs.ts, rendered by the fused-group renderer) on the host and compares
// the numbers with the CPU kernels (float64 references for float results, the same dtype for exact
// ones: indices, extremes, any/all, integer sums). Each kernel runs in several configs (thread, warp
// and block per row, split, scalar and vector), over contiguous, transposed, offset and 3-d inputs,
// empty rows, NaN and ties. scripts/cuda-emu/emu.h emulates the CUDA subset: a fiber per CUDA
// thread, barriers for __syncthreads and warp shuffles; one g++ translation unit for all cases.
// The 'col' cases run the column strategy (few long strided rows next to each other: BatchNorm
// over channels_last) on NHWC, NCHW, 2-d and 2-d-outer layouts from 1 to 300 rows of up to 1e5
// elements, and rows read at unit stride (a whole tensor as one row, a few contiguous rows:
// KILN_CUDA_COL_FEW_ROWS), float32/float16/bfloat16, sum/mean/var/amax, batchNorm statistics and a BatchNorm-
// backward-like group (three levels of reductions, two row outputs, a full-size output), each in
// its default config and col at every block size, on a larger emulated device (more chunks).
//   npm run build && node scripts/cuda-reduce-emu.mjs [--keep] [--filter substring] [--nvcc]
// --nvcc also compiles every kernel's CUDA C as generated (one translation unit behind the prelude)
// with `nvcc -arch=sm_90 -cubin`. Numbers only: the H200 tests (test/cuda-reductions.test.ts) are
// what checks the device.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const imp = (p) => import(pathToFileURL(path.join(root, 'dist', p)).href);
const kiln = await imp('src/index.js');
const P = await imp('src/kernels/cuda/reduce-programs.js');
const { eagerGroup, eagerLayout, reducePlan, renderReduce } = await imp('src/kernels/cuda/codegen/reduce.js');
const { configSpace, configTag, inapplicable, intArg, launchPlan, reduceShape } = await imp('src/kernels/cuda/fused/configs.js');
const { ReduceGroup } = await imp('src/kernels/cuda/reduce-group.js');
const { X } = await imp('src/kernels/cuda/codegen/reduce.js');
const { kernelSpec } = await imp('src/kernels/cuda/fused/spec.js');
const { prelude } = await imp('src/kernels/cuda/fused/prelude.js');
const { storageArray, encoder, decoder } = await imp('src/tensor/typed.js');
const { itemSize } = await imp('src/tensor/dtype.js');
const { contiguousStrides } = await imp('src/tensor/layout.js');

const keep = process.argv.includes('--keep');
const nvcc = process.argv.includes('--nvcc');
const fi = process.argv.indexOf('--filter');
const filter = fi > 0 ? process.argv[fi + 1] : '';

// A small device: grids of a few blocks, so grid-stride loops and split partials are exercised.
const TARGET = { arch: 'sm_90', sms: 1, maxThreadsPerSm: 1024, halfMode: 'ptx' };

let seed = 12345;
const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);

/** A cpu tensor of `shape` and its bytes: values from gen(i), rounded by the dtype. */
function base(shape, dtype, gen) {
  const n = shape.reduce((a, b) => a * b, 1);
  const enc = encoder(dtype);
  const dec = decoder(dtype);
  const bytes = new Uint8Array(Math.max(1, n) * itemSize(dtype));
  const arr = storageArray(dtype, bytes.buffer, 0, n);
  const vals = [];
  for (let i = 0; i < n; i++) {
    arr[i] = enc(gen(i));
    vals.push(dec(arr[i]));
  }
  const t = kiln.reshape(kiln.tensor(dtype === 'bool' ? vals.map((v) => v !== 0) : vals, { dtype }), shape);
  return { t, bytes };
}

const FLOATS = ['float32', 'float16', 'bfloat16', 'float64'];
const isFloat = (d) => FLOATS.includes(d);
const data = {
  normal: (d) => () => (isFloat(d) ? (rnd() - 0.5) * 6 : Math.floor(rnd() * 21) - 10),
  positive: (d) => () => (isFloat(d) ? 0.6 + rnd() * 0.8 : 1 + Math.floor(rnd() * 2)),
  ties: (d) => () => (d === 'bool' ? Math.floor(rnd() * 3) % 2 : Math.floor(rnd() * 5) - 2),
  nan: () => (i) => (i % 37 === 5 ? NaN : (rnd() - 0.5) * 6),
  bool: () => () => (rnd() < 0.3 ? 1 : 0),
};

/** Views applied to a base tensor: [name, base shape, fn(base) -> view]. */
const LAYOUTS = {
  rows: { shape: [9, 70], view: (t) => t },
  transposed: { shape: [70, 9], view: (t) => kiln.transpose(t, 0, 1) },
  offset: { shape: [9, 72], view: (t) => kiln.narrow(t, 1, 1, 70) },
  cube: { shape: [3, 5, 40], view: (t) => t },
  long: { shape: [2, 5000], view: (t) => t },
  empty: { shape: [4, 0], view: (t) => t },
  scalar: { shape: [], view: (t) => t },
};

const cases = [];
/**
 * A case: `program(x, dims)` builds the group; `ref(x)` gives the CPU results (tensors) in result
 * order; `rows[k]`: result k is per row. `f64` compares float results against the op on a float64
 * copy of x. Extra inputs and params as the kernels pass them.
 */
function add(name, spec) {
  if (filter && !name.includes(filter)) return;
  cases.push({ name, ...spec });
}

const reduceOps = ['sum', 'mean', 'prod', 'amax', 'amin'];
const api = { sum: kiln.sum, mean: kiln.mean, prod: kiln.prod, amax: kiln.amax, amin: kiln.amin };
for (const op of reduceOps) {
  for (const dtype of ['float32', 'float16', 'bfloat16', 'float64', 'int32', 'int64', 'bool', 'uint8']) {
    if (op === 'mean' && !isFloat(dtype)) continue;
    for (const layout of ['rows', 'transposed', 'offset', 'cube', 'long', 'empty', 'scalar']) {
      if ((op === 'amax' || op === 'amin') && layout === 'empty') continue;
      if (layout === 'long' && !['float32', 'bfloat16', 'int32'].includes(dtype)) continue;
      if (['cube', 'empty', 'scalar'].includes(layout) && !['float32', 'int64', 'bfloat16'].includes(dtype)) continue;
      for (const dims of layout === 'cube' ? [[1], [0, 2], [0, 1, 2]] : layout === 'scalar' ? [[]] : [[1], [0]]) {
        const gen = op === 'prod' ? data.positive(dtype) : dtype === 'bool' ? data.bool() : data.normal(dtype);
        add(`${op} ${dtype} ${layout} dims ${dims}`, {
          dtype,
          layout,
          dims,
          gen,
          outs: (x) => [{ dtype: api[op](x, dims.length ? dims : null).dtype, row: true }],
          program: (x, outs) => P.reduceProgram(op, x, dims, outs[0].dtype),
          ref: (x) => [api[op](x, dims.length ? dims : null)],
          exact: !isFloat(dtype) || op === 'amax' || op === 'amin',
        });
      }
    }
  }
}
add('sum bfloat16 -> float32 (cast first)', {
  dtype: 'bfloat16',
  layout: 'rows',
  dims: [1],
  gen: data.normal('bfloat16'),
  outs: () => [{ dtype: 'float32', row: true }],
  program: (x) => P.reduceProgram('sum', x, [1], 'float32', 'float32'),
  ref: (x) => [kiln.sum(x, 1, false, 'float32')],
});
add('sum float32 -> float16 (rounds the input first)', {
  dtype: 'float32',
  layout: 'rows',
  dims: [1],
  gen: data.normal('float32'),
  outs: () => [{ dtype: 'float16', row: true }],
  program: (x) => P.reduceProgram('sum', x, [1], 'float16', 'float16'),
  ref: (x) => [kiln.sum(x, 1, false, 'float16')],
});
for (const op of ['any', 'all']) {
  for (const dtype of ['bool', 'float32', 'int64', 'uint8', 'bfloat16']) {
    for (const layout of ['rows', 'transposed', 'empty']) {
      for (const dims of [[1], [0]]) {
        add(`${op} ${dtype} ${layout} dims ${dims}`, {
          dtype,
          layout,
          dims,
          gen: dtype === 'bool' ? data.bool() : (i) => (rnd() < (op === 'any' ? 0.02 : 0.98) ? 1 : i % 53 === 7 && isFloat(dtype) ? NaN : 0),
          outs: (x) => [{ dtype: kiln[op](x, dims).dtype, row: true }],
          program: (x, outs) => P.logicalProgram(op, x, dims, outs[0].dtype),
          ref: (x) => [kiln[op](x, dims)],
          exact: true,
        });
      }
    }
  }
}
for (const op of ['var', 'std']) {
  for (const dtype of FLOATS) {
    for (const layout of ['rows', 'transposed', 'cube', 'long']) {
      if (layout === 'long' && dtype !== 'float32') continue;
      for (const correction of [1, 0, 80]) {
        const dims = layout === 'cube' ? [0, 2] : [1];
        add(`${op} ${dtype} ${layout} correction ${correction}`, {
          dtype,
          layout,
          dims,
          gen: data.normal(dtype),
          outs: () => [{ dtype, row: true }],
          program: (x) => P.momentProgram(op, x, dims, dtype),
          params: (x) => [P.momentScale(dims.reduce((a, d) => a * x.shape[d], 1), correction)],
          ref: (x) => [kiln[op](x, dims, correction)],
          f64: true,
        });
      }
    }
  }
}
for (const dtype of [...FLOATS, 'int32']) {
  for (const layout of ['rows', 'transposed', 'long', 'empty']) {
    const lseGens = dtype === 'int32' ? [data.normal(dtype)] : [data.normal(dtype), (i) => (i % 11 === 0 ? -Infinity : i % 29 === 3 ? Infinity : (rnd() - 0.5) * 20)];
    for (const gen of lseGens) {
      add(`logsumexp ${dtype} ${layout} data ${lseGens.indexOf(gen)}`, {
        dtype,
        layout,
        dims: [1],
        gen,
        outs: () => [{ dtype: isFloat(dtype) ? dtype : 'float32', row: true }],
        program: (x, outs) => P.logsumexpProgram(x, [1], outs[0].dtype),
        ref: (x) => [kiln.logsumexp(x, [1])],
        f64: isFloat(dtype),
      });
    }
  }
}
add('logsumexp all -inf rows', {
  dtype: 'float32',
  layout: 'rows',
  dims: [1],
  gen: (i) => (i < 140 ? -Infinity : 1),
  outs: () => [{ dtype: 'float32', row: true }],
  program: (x) => P.logsumexpProgram(x, [1], 'float32'),
  ref: (x) => [kiln.logsumexp(x, [1])],
});
for (const kind of ['argmax', 'argmin']) {
  for (const dtype of ['float32', 'float16', 'bfloat16', 'float64', 'int32', 'int64', 'uint8']) {
    for (const layout of ['rows', 'transposed', 'offset', 'cube', 'long']) {
      if (layout === 'long' && !['float32', 'bfloat16'].includes(dtype)) continue;
      for (const values of [false, true]) {
        for (const dims of layout === 'cube' ? (values ? [[1]] : [[1], [0, 1, 2]]) : [[1], [0]]) {
          const gens = isFloat(dtype) ? [data.ties(dtype), data.nan(dtype), data.normal(dtype)] : [data.ties(dtype)];
          for (const gen of gens) {
            const full = dims.length === 3;
            add(`${kind}${values ? ' (values)' : ''} ${dtype} ${layout} dims ${dims} data ${gens.indexOf(gen)}`, {
              dtype,
              layout,
              dims,
              gen,
              keepRowOrder: true,
              outs: () => (values ? [{ dtype, row: true }, { dtype: 'int64', row: true }] : [{ dtype: 'int64', row: true }]),
              program: (x) => P.argProgram(kind, x, dims, values),
              ref: (x) => {
                if (!values) return [full ? kiln[kind](x) : kiln[kind](x, dims[0])];
                const r = kiln[kind === 'argmax' ? 'max' : 'min'](x, dims[0]);
                return [r.values, r.indices];
              },
              exact: true,
            });
          }
        }
      }
    }
  }
}
add('max (values) bool rows', {
  dtype: 'bool',
  layout: 'rows',
  dims: [1],
  gen: data.bool(),
  keepRowOrder: true,
  outs: () => [{ dtype: 'bool', row: true }, { dtype: 'int64', row: true }],
  program: (x) => P.argProgram('argmax', x, [1], true),
  ref: (x) => {
    const r = kiln.max(x, 1);
    return [r.values, r.indices];
  },
  exact: true,
});
for (const kind of ['softmax', 'logSoftmax']) {
  for (const dtype of FLOATS) {
    for (const layout of ['rows', 'transposed', 'offset', 'cube', 'long']) {
      if (layout === 'long' && dtype !== 'bfloat16') continue;
      for (const dim of layout === 'cube' ? [1, 2] : [1, 0]) {
        add(`${kind} ${dtype} ${layout} dim ${dim}`, {
          dtype,
          layout,
          dims: [dim],
          gen: (i) => (i % 23 === 4 ? -Infinity : (rnd() - 0.5) * 8),
          outs: () => [{ dtype, row: false }],
          program: (x) => P.softmaxProgram(kind, x, [dim], dtype),
          ref: (x) => [kiln[kind](x, dim)],
          f64: true,
        });
      }
    }
  }
}
add('softmax bfloat16 -> float32 (cast first)', {
  dtype: 'bfloat16',
  layout: 'rows',
  dims: [1],
  gen: data.normal('bfloat16'),
  outs: () => [{ dtype: 'float32', row: false }],
  program: (x) => P.softmaxProgram('softmax', x, [1], 'float32', 'float32'),
  ref: (x) => [kiln.softmax(x, 1, 'float32')],
});
add('softmax with all -inf rows', {
  dtype: 'float32',
  layout: 'rows',
  dims: [1],
  gen: (i) => (i < 70 ? -Infinity : i < 140 ? (i % 2 ? -Infinity : 0) : rnd()),
  outs: () => [{ dtype: 'float32', row: false }],
  program: (x) => P.softmaxProgram('softmax', x, [1], 'float32'),
  ref: (x) => [kiln.softmax(x, 1)],
});
for (const kind of ['layerNorm', 'rmsNorm']) {
  for (const dtype of FLOATS) {
    for (const layout of ['rows', 'transposed', 'cube', 'long']) {
      if (layout === 'long' && dtype !== 'float16') continue;
      for (const affine of [true, false]) {
        const nd = layout === 'cube' ? 2 : 1;
        add(`${kind} ${dtype} ${layout}${affine ? ' affine' : ''}`, {
          dtype,
          layout,
          dims: layout === 'cube' ? [1, 2] : [1],
          gen: data.normal(dtype),
          extra: (x) => {
            if (!affine) return [];
            const shape = x.shape.slice(-nd);
            const w = base(shape, dtype, () => 0.5 + rnd());
            const b = base(shape, dtype, () => rnd() - 0.5);
            return kind === 'layerNorm' ? [w, b] : [w];
          },
          outs: () => [{ dtype, row: false }],
          program: (x, _outs, extra) => P.normProgram(kind, x, layout === 'cube' ? [1, 2] : [1], dtype, extra[0]?.t ?? null, extra[1]?.t ?? null),
          params: () => [1e-5],
          ref: (x, extra) =>
            kind === 'layerNorm' ? [kiln.layerNorm(x, x.shape.slice(-nd), extra[0] ?? null, extra[1] ?? null, 1e-5)] : [kiln.rmsNorm(x, x.shape.slice(-nd), extra[0] ?? null, 1e-5)],
          f64: true,
        });
      }
    }
  }
}
for (const dtype of ['float32', 'float64']) {
  add(`batchNorm statistics ${dtype} cube`, {
    dtype,
    layout: 'cube',
    dims: [0, 2],
    gen: data.normal(dtype),
    outs: () => [
      { dtype, row: true },
      { dtype, row: true },
    ],
    program: (x) => P.batchStatsProgram(x, [0, 2], dtype),
    ref: (x) => [kiln.mean(x, [0, 2]), kiln.var(x, [0, 2], 0)],
    f64: true,
  });
}

// ------------------------------------------------------------------------------------------------
// Column reductions (the 'col' strategy): layouts given per case; forced configs.

/** A device with more SMs than TARGET, so col makes tens of chunks per row (finish lanes loop). */
const COL_TARGET = { arch: 'sm_90', sms: 24, maxThreadsPerSm: 1024, halfMode: 'ptx' };
const COL_CONFIGS = [128, 256, 512].map((block) => ({ kind: 'reduce', strategy: 'col', block, vec: 1 }));
const COL_LAYOUTS = [
  // NHWC memory ([N, H, W, C] contiguous) seen as [N, C, H, W], reduced over all but C.
  ...[
    [2, 3, 5, 1],
    [1, 1, 7, 3],
    [4, 10, 10, 16],
    [2, 8, 9, 64],
    [1, 32, 32, 33],
    [3, 7, 11, 300],
    [2, 50, 100, 8],
    [1, 1, 100000, 2],
  ].map((s) => ({ name: `nhwc ${s.join('x')}`, shape: s, view: (t) => kiln.permute(t, [0, 3, 1, 2]), dims: [0, 2, 3] })),
  // NCHW: strided rows that are not adjacent (col is not a default there; forced).
  ...[
    [2, 5, 3, 7],
    [4, 64, 6, 6],
    [1, 3, 150, 200],
  ].map((s) => ({ name: `nchw ${s.join('x')}`, shape: s, view: (t) => t, dims: [0, 2, 3] })),
  // [R, C] over dim 0, and two outer dims that do not coalesce ([R, 4, 7] narrowed to [R, 4, 6]).
  { name: 'cols 100000x1', shape: [100000, 1], view: (t) => t, dims: [0] },
  { name: 'cols 5000x37', shape: [5000, 37], view: (t) => t, dims: [0] },
  { name: 'cols 1x5', shape: [1, 5], view: (t) => t, dims: [0] },
  { name: 'outer2 300x4x6', shape: [300, 4, 7], view: (t) => kiln.narrow(t, 2, 0, 6), dims: [0] },
  // Rows read at unit stride (one row per tile, TX = 1): a whole tensor as one row (the default
  // under KILN_CUDA_COL_FEW_ROWS=1 from 2^16 elements), a few contiguous rows, an offset row.
  { name: 'flat 7x100x100', shape: [7, 100, 100], view: (t) => t, dims: [0, 1, 2] },
  { name: 'flat nhwc 2x9x10x8', shape: [2, 9, 10, 8], view: (t) => kiln.permute(t, [0, 3, 1, 2]), dims: [0, 1, 2, 3] },
  { name: 'rows 3x20000', shape: [3, 20000], view: (t) => t, dims: [1] },
  { name: 'rows offset 2x999', shape: [2, 1001], view: (t) => kiln.narrow(t, 1, 2, 999), dims: [1] },
];

/** A BatchNorm-backward-like group: mean, variance, mean(dy) and mean(dy * xhat), then dx (s0 = eps). */
function bnBackwardProgram(x, dims, dy, out) {
  const F = 'float32';
  const b = new ReduceGroup(x, dims, [dy]);
  const DY = X + 1;
  const d = b.pointwise('sub', [X, b.reduction('mean', X, F), { c: 1 }], F);
  const rstd = b.expr([b.reduction('mean', b.pointwise('mul', [d, d], F), F)], '1.0f / sqrtf(a + s0)', 'float', F, { row: true });
  const xhat = b.pointwise('mul', [d, rstd], F);
  const mdy = b.reduction('mean', DY, F, 1);
  const mdx = b.reduction('mean', b.pointwise('mul', [DY, xhat], F), F, 2);
  const t = b.pointwise('sub', [b.pointwise('sub', [DY, mdy, { c: 1 }], F), b.pointwise('mul', [xhat, mdx], F), { c: 1 }], F);
  b.pointwise('mul', [t, rstd], out, { out: 0 });
  return b;
}

function bnBackwardRef(x, dy, dims) {
  const mean = kiln.mean(x, dims, true);
  const d = kiln.sub(x, mean);
  const rstd = kiln.rsqrt(kiln.add(kiln.mean(kiln.mul(d, d), dims, true), 1e-5));
  const xhat = kiln.mul(d, rstd);
  const mdy = kiln.mean(dy, dims, true);
  const mdx = kiln.mean(kiln.mul(dy, xhat), dims, true);
  const dx = kiln.mul(kiln.sub(kiln.sub(dy, mdy), kiln.mul(xhat, mdx)), rstd);
  return [dx, kiln.mean(dy, dims), kiln.mean(kiln.mul(dy, xhat), dims)];
}

for (const L of COL_LAYOUTS) {
  const base1 = { layoutSpec: L, layout: L.name, dims: L.dims, target: COL_TARGET, configs: COL_CONFIGS, f64: true };
  const big = L.shape.reduce((a, b) => a * b, 1) > 50000;
  for (const dtype of big ? ['float32', 'bfloat16'] : ['float32', 'float16', 'bfloat16']) {
    for (const op of big ? ['sum', 'var'] : ['sum', 'mean', 'amax', 'var']) {
      if (op === 'var') {
        add(`col var ${dtype} ${L.name}`, {
          ...base1,
          dtype,
          gen: data.normal(dtype),
          outs: () => [{ dtype, row: true }],
          program: (x) => P.momentProgram('var', x, L.dims, dtype),
          params: (x) => [P.momentScale(L.dims.reduce((a, d) => a * x.shape[d], 1), 1)],
          ref: (x) => [kiln.var(x, L.dims, 1)],
        });
        continue;
      }
      add(`col ${op} ${dtype} ${L.name}`, {
        ...base1,
        dtype,
        gen: op === 'amax' ? data.nan(dtype) : data.normal(dtype),
        outs: (x) => [{ dtype: api[op](x, L.dims).dtype, row: true }],
        program: (x, outs) => P.reduceProgram(op, x, L.dims, outs[0].dtype),
        ref: (x) => [api[op](x, L.dims)],
        exact: op === 'amax',
        f64: op !== 'amax',
      });
    }
  }
  add(`col batchNorm statistics float32 ${L.name}`, {
    ...base1,
    dtype: 'float32',
    gen: data.normal('float32'),
    outs: () => [
      { dtype: 'float32', row: true },
      { dtype: 'float32', row: true },
    ],
    program: (x) => P.batchStatsProgram(x, L.dims, 'float32'),
    ref: (x) => [kiln.mean(x, L.dims), kiln.var(x, L.dims, 0)],
  });
  for (const dtype of ['float32', 'bfloat16']) {
    add(`col batchNorm backward ${dtype} ${L.name}`, {
      ...base1,
      dtype,
      gen: data.normal(dtype),
      extra: () => {
        const b = base(L.shape, dtype, () => (rnd() - 0.5) * 4);
        return [{ t: L.view(b.t), bytes: b.bytes }];
      },
      outs: () => [
        { dtype, row: false },
        { dtype: 'float32', row: true },
        { dtype: 'float32', row: true },
      ],
      program: (x, _outs, extra) => bnBackwardProgram(x, L.dims, extra[0].t, dtype),
      params: () => [1e-5],
      ref: (x, extra) => bnBackwardRef(x, extra[0], L.dims),
    });
  }
}

// ------------------------------------------------------------------------------------------------
// Build every case's runs (configs), one C++ file for all.

/** A few configs per case: the default, and one of each strategy in scalar and vector form. */
let rotation = 0;
function pickConfigs(ctx, L, c) {
  const target = c.target ?? TARGET;
  if (c.configs) {
    // Forced configs (col cases): the default (or, as a program does, the first config that can
    // run the layout when the default's vector width cannot), then these.
    const def = configSpace(ctx, L, target).find((x) => inapplicable(x, ctx.spec, L) === null);
    return [...new Map([def, ...c.configs].map((x) => [configTag(x), x])).values()];
  }
  const all = configSpace(ctx, L, target).filter((c) => inapplicable(c, ctx.spec, L) === null);
  const picked = new Map();
  const keyOf = (c) => `${c.strategy}/${c.vec > 1}`;
  picked.set('default', all[0]);
  let i = rotation++;
  for (const c of all) {
    const k = keyOf(c);
    if (picked.has(k)) continue;
    // Rotate block sizes across cases so all are seen without running all of them everywhere.
    const same = all.filter((x) => keyOf(x) === k);
    picked.set(k, same[i++ % same.length]);
  }
  return [...new Map([...picked.values()].map((c) => [configTag(c), c])).values()];
}

const cpp = [];
const kernels = new Map();
const cudaBodies = new Map();
const runs = [];
const inputs = [];
let inBytes = 0;
const bodyOf = (src) => src.slice(prelude('ptx').length);
const emuSource = (s) => s.replace(/extern __shared__/g, 'extern').replace(/__shared__/g, 'static');

for (const c of cases) {
  const layout = c.layoutSpec ?? LAYOUTS[c.layout];
  const target = c.target ?? TARGET;
  const b = base(layout.shape, c.dtype, c.gen);
  const x = layout.view(b.t);
  const extra = c.extra ? c.extra(x) : [];
  const outMetas = c.outs(x).map((o) => {
    const shape = o.row ? x.shape.filter((_, d) => !c.dims.includes(d)) : [...x.shape];
    return { shape, strides: contiguousStrides(shape), offset: 0, dtype: o.dtype, row: o.row };
  });
  const group = c.program(x, outMetas, extra);
  const params = c.params ? c.params(x) : undefined;
  const call = {
    x: { shape: x.shape, strides: x.strides, offset: x.offset, dtype: x.dtype },
    dims: c.dims,
    outs: outMetas.map((o) => ({ t: o, row: o.row })),
    nodes: group.nodes,
    values: group.values,
    extra: extra.map((e) => ({ shape: e.t.shape, strides: e.t.strides, offset: e.t.offset, dtype: e.t.dtype })),
    ...(params ? { params: { ct: outMetas[0].dtype === 'float64' ? 'double' : 'float', values: params } } : {}),
    keepRowOrder: c.keepRowOrder,
  };
  const g = eagerGroup(call);
  const L = eagerLayout(call);
  const spec = kernelSpec(L);
  const plan = reducePlan(g, spec, c.name.split(' ')[0]);
  // Input buffers: x's base, then the extras' bases; outputs are poisoned (0xff) buffers.
  const inputBufs = [b.bytes, ...extra.map((e) => e.bytes)];
  const inputOffsets = inputBufs.map((buf) => {
    const off = inBytes;
    inputs.push(buf);
    inBytes += buf.length;
    return off;
  });
  c.x = x;
  c.extraT = extra.map((e) => e.t);
  c.outMetas = outMetas;
  c.runs = [];
  for (const cfg of pickConfigs(plan.ctx, L, c)) {
    const r = renderReduce(plan, cfg, target);
    if (!kernels.has(r.kernels[0].name)) {
      kernels.set(r.kernels[0].name, emuSource(bodyOf(r.source)));
      cudaBodies.set(r.kernels[0].name, bodyOf(r.source));
    }
    const lp = launchPlan(cfg, spec, L, target, reduceShape(plan.ctx));
    const id = runs.length;
    const operands = [...outMetas, call.x, ...call.extra];
    const bufOf = (k) => (k < outMetas.length ? `o${k}` : `i${k - outMetas.length}`);
    const lines = [];
    lines.push(`static void run${id}(const unsigned char* in, FILE* out) {`);
    outMetas.forEach((o, k) => {
      const bytes = Math.max(1, o.shape.reduce((a, s) => a * s, 1)) * itemSize(o.dtype);
      lines.push(`  std::vector<unsigned char> o${k}(${bytes}, 0xff);`);
    });
    inputBufs.forEach((buf, k) => lines.push(`  std::vector<unsigned char> i${k}(in + ${inputOffsets[k]}, in + ${inputOffsets[k] + buf.length});`));
    lines.push(`  std::vector<unsigned char> ws(${lp.workspaceBytes + 16});`);
    for (const l of lp.launches) {
      const k = r.kernels[l.kernel];
      const args = k.params.map((p) => {
        const s = p.source;
        if (s.kind === 'operand') return `AnyPtr{(void*)(${bufOf(s.k)}.data() + ${operands[s.k].offset * itemSize(operands[s.k].dtype)})}`;
        if (s.kind === 'workspace') return 'AnyPtr{(void*)ws.data()}';
        if (s.kind === 'scalar') {
          const v = params[Number(s.what.slice(1))];
          return Number.isFinite(v) ? `(double)${v.toPrecision(17)}` : v > 0 ? 'INFINITY' : '-INFINITY';
        }
        const v = intArg(s.what, L, lp.extraInts);
        return p.type === 'i64' ? `(long long)${v}LL` : `(int)${v}`;
      });
      lines.push(`  emu_launch(${l.grid}, ${l.block}, [&] { ${k.name}(${args.join(', ')}); });`);
    }
    outMetas.forEach((o, k) => lines.push(`  fwrite(o${k}.data(), 1, o${k}.size(), out);`));
    lines.push('}');
    cpp.push(lines.join('\n'));
    runs.push({ c, cfg: configTag(cfg), launches: lp.launches.length, extraInts: lp.extraInts });
    c.runs.push(id);
  }
}

const preludeEmu = prelude('ptx')
  .split('\n')
  .filter((l) => !l.includes('asm('))
  .join('\n');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-reduce-emu-'));
const main = `int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb");
  std::vector<unsigned char> in(${Math.max(1, inBytes)});
  if (${inBytes} > 0 && fread(in.data(), 1, ${inBytes}, f) != ${inBytes}) return 2;
  fclose(f);
  FILE* out = fopen(argv[2], "wb");
${runs.map((_, i) => `  run${i}(in.data(), out);`).join('\n')}
  fclose(out);
  return 0;
}`;
const text = `#include "${path.join(root, 'scripts/cuda-emu/emu.h')}"\n#include <cstdio>\n${preludeEmu}\n${[...kernels.values()].join('\n')}\n${cpp.join('\n\n')}\n${main}\n`;
fs.writeFileSync(path.join(dir, 'emu.cpp'), text);
const inFile = path.join(dir, 'in.bin');
fs.writeFileSync(inFile, Buffer.concat(inputs.map((b) => Buffer.from(b))));
if (nvcc) {
  const cu = path.join(dir, 'all.cu');
  fs.writeFileSync(cu, `${prelude('ptx')}\n${[...cudaBodies.values()].join('\n')}\n`);
  const n0 = Date.now();
  execFileSync('nvcc', ['-arch=sm_90', '-cubin', '-std=c++17', '-o', path.join(dir, 'all.cubin'), cu], { stdio: 'inherit' });
  console.log(`nvcc -arch=sm_90 -cubin: ${cudaBodies.size} kernel sources compiled in ${((Date.now() - n0) / 1000).toFixed(1)} s`);
}
const t0 = Date.now();
execFileSync('g++', ['-std=c++17', '-O1', '-w', '-o', path.join(dir, 'emu'), path.join(dir, 'emu.cpp')], { stdio: 'inherit' });
const t1 = Date.now();
execFileSync(path.join(dir, 'emu'), [inFile, path.join(dir, 'out.bin')], { stdio: 'inherit' });
const t2 = Date.now();

// ------------------------------------------------------------------------------------------------
// Compare.

const outBuf = fs.readFileSync(path.join(dir, 'out.bin'));
let pos = 0;
let failures = 0;
const tol = { float32: [1e-5, 1e-5], float64: [1e-12, 1e-12], float16: [2e-3, 2e-3], bfloat16: [1.6e-2, 1.6e-2] };
for (let i = 0; i < runs.length; i++) {
  const { c, cfg, launches, extraInts } = runs[i];
  const refs = c.ref(c.x, c.extraT);
  const refs64 = c.f64 ? c.ref(c.x.to('float64'), c.extraT.map((t) => t.to('float64'))) : null;
  c.outMetas.forEach((o, k) => {
    const n = o.shape.reduce((a, s) => a * s, 1);
    const bytes = Math.max(1, n) * itemSize(o.dtype);
    const chunk = new Uint8Array(outBuf.subarray(pos, pos + bytes));
    pos += bytes;
    const arr = storageArray(o.dtype, chunk.buffer, chunk.byteOffset, n);
    const dec = decoder(o.dtype);
    const got = Array.from(arr, (w) => dec(w));
    const want = (refs64 ? refs64[k] : refs[k]).toFlatArray().map(Number);
    const same = refs[k].toFlatArray().map(Number);
    const label = `${c.name} [${cfg}${cfg.startsWith('col') ? ` ${launches} launches ${JSON.stringify(extraInts)}` : ''}] result ${k}`;
    if (want.length !== got.length) {
      console.error(`FAIL ${label}: ${got.length} values, reference ${want.length}`);
      failures++;
      return;
    }
    const [atol, rtol] = tol[o.dtype] ?? [0, 0];
    for (let j = 0; j < n; j++) {
      const a = got[j];
      const e = want[j];
      const ok = Number.isNaN(e) ? Number.isNaN(a) : !Number.isFinite(e) ? a === e : c.exact ? a === same[j] : Math.abs(a - e) <= atol * Math.max(1, Math.abs(e)) + rtol * Math.abs(e) || a === same[j];
      if (!ok) {
        if (failures < 40) console.error(`FAIL ${label}: element ${j}: got ${a}, want ${e} (cpu ${same[j]})`);
        failures++;
        break;
      }
    }
  });
}
const colRuns = runs.filter((r) => r.cfg.startsWith('col')).length;
console.log(`${cases.length} cases, ${runs.length} runs (${colRuns} col), ${kernels.size} kernels: g++ ${((t1 - t0) / 1000).toFixed(1)} s, run ${((t2 - t1) / 1000).toFixed(1)} s; ${failures} failure(s) (${dir})`);
if (!keep && failures === 0) fs.rmSync(dir, { recursive: true, force: true });
process.exit(failures === 0 ? 0 : 1);
