/**
 * Kiln vs PyTorch golden outputs (test/fixtures/golden.json, made on the device machine by
 * scripts/make_golden.py). Values are PyTorch's float64 results on the same float32 inputs; strides
 * are PyTorch's for the float32 run, compared ignoring size-1 dims (whose strides are arbitrary).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { assertClose } from './helpers/assert.js';
import { makeTensor, type Layout } from './helpers/make.js';

interface Encoded {
  shape: number[];
  dtype: string;
  data: (number | boolean)[];
}
interface Case {
  name: string;
  inputs: (Encoded | number)[];
  layouts: Record<string, string>;
  attrs: Record<string, unknown>;
  outputs: Encoded[];
  strides: number[][];
}

const here = path.dirname(fileURLToPath(import.meta.url));
// Compiled tests run from dist/test; the fixture stays in the source tree.
const fixture = [path.join(here, 'fixtures/golden.json'), path.join(here, '../../test/fixtures/golden.json')].find((p) => fs.existsSync(p))!;
// Python's json writes NaN and Infinity as bare tokens, which JSON.parse rejects: quote them, then revive.
const text = fs.readFileSync(fixture, 'utf8').replace(/(-?Infinity|NaN)(?=[,\]])/g, '"$1"');
const golden = JSON.parse(text, (_k, v: unknown) => (v === 'NaN' ? NaN : v === 'Infinity' ? Infinity : v === '-Infinity' ? -Infinity : v)) as {
  torch: string;
  cases: Case[];
};

const DTYPE_MAP: Record<string, DType> = { float32: 'float32', int64: 'int64', bool: 'bool' };

function input(c: Case, i: number): Tensor {
  const e = c.inputs[i] as Encoded;
  const dtype = DTYPE_MAP[e.dtype];
  if (!dtype) throw new Error(`golden: unsupported dtype ${e.dtype}`);
  const lay = c.layouts[String(i)];
  const layout: Layout = lay === 'channels_last' ? 'channelsLast' : lay === 'transposed' ? 'transposed' : 'contiguous';
  return makeTensor(e.data.map(Number), e.shape, dtype, layout);
}

type Runner = (inp: (i: number) => Tensor) => Tensor | Tensor[];

const runners: Record<string, Runner> = {
  erf: (x) => kiln.erf(x(0)),
  gelu: (x) => kiln.gelu(x(0)),
  gelu_tanh: (x) => kiln.gelu(x(0), 'tanh'),
  silu: (x) => kiln.silu(x(0)),
  sigmoid: (x) => kiln.sigmoid(x(0)),
  softplus: (x) => kiln.softplus(x(0)),
  tanh: (x) => kiln.tanh(x(0)),
  expm1: (x) => kiln.expm1(x(0)),
  log1p_abs: (x) => kiln.log1p(kiln.abs(x(0))),
  rsqrt_abs: (x) => kiln.rsqrt(kiln.add(kiln.abs(x(0)), 0.1)),
  pow_broadcast: (x) => kiln.pow(kiln.abs(x(0)), x(1)),
  remainder: (x) => kiln.remainder(kiln.mul(x(0), 3), kiln.sub(x(1), 3.5)),
  div_floor: (x) => kiln.div(kiln.mul(x(0), 5), kiln.sub(x(1), 3.5), 'floor'),
  atan2: (x) => kiln.atan2(x(0), x(1)),
  add_transposed_strides: (x) => kiln.add(x(0), x(1)),
  mul_channels_last_strides: (x) => kiln.mul(x(0), x(1)),
  softmax_dim1: (x) => kiln.softmax(x(0), 1),
  log_softmax_last: (x) => kiln.logSoftmax(x(0), -1),
  logsumexp_02: (x) => kiln.logsumexp(x(0), [0, 2]),
  var_dim2: (x) => kiln.var(x(0), 2, 1, true),
  std_all_c0: (x) => kiln.std(x(0), null, 0),
  cumsum_dim1: (x) => kiln.cumsum(x(0), 1),
  softmax_channels_last: (x) => kiln.softmax(x(0), 1),
  sort_stable: (x) => {
    const r = kiln.sort(x(0), -1, false, true);
    return [r.values, r.indices];
  },
  sort_desc_stable: (x) => {
    const r = kiln.sort(x(0), -1, true, true);
    return [r.values, r.indices];
  },
  topk_3: (x) => {
    const r = kiln.topk(x(0), 3, 1);
    return [r.values, r.indices];
  },
  argmax_dim0: (x) => kiln.argmax(x(0), 0),
  matmul_batch_broadcast: (x) => kiln.matmul(x(0), x(1)),
  matmul_vec_mat: (x) => kiln.matmul(x(0), x(1)),
  linear: (x) => kiln.linear(x(0), x(1), x(2)),
  addmm: (x) => kiln.addmm(x(0), x(1), x(2), 0.5, 2),
  layer_norm: (x) => kiln.layerNorm(x(0), [4, 5], x(1), x(2), 1e-5),
  rms_norm: (x) => kiln.rmsNorm(x(0), [6], x(1), 1e-6),
  group_norm_cl: (x) => kiln.groupNorm(x(0), 2, x(1), x(2), 1e-5),
  batch_norm_eval: (x) => kiln.batchNorm(x(0), x(1), x(2), x(3), x(4), false, 0.1, 1e-5),
  batch_norm_train: (x) => kiln.batchNorm(x(0), null, null, x(1), x(2), true, 0.1, 1e-5),
  conv2d_s2_p3: (x) => kiln.conv2d(x(0), x(1), x(2), 2, 3),
  conv2d_cl_dil_groups: (x) => kiln.conv2d(x(0), x(1), null, 1, 2, 2, 2),
  conv2d_depthwise_same: (x) => kiln.conv2d(x(0), x(1), null, 1, 'same', 1, 3),
  max_pool_ceil: (x) => kiln.maxPool2d(x(0), 3, 2, 1, 1, true),
  avg_pool_nopad: (x) => kiln.avgPool2d(x(0), 3, 2, 1, false, false),
  sdpa_gqa_causal: (x) => kiln.scaledDotProductAttention(x(0), x(1), x(2), null, 0, true, undefined, true),
  sdpa_bool_mask: (x) => kiln.scaledDotProductAttention(x(0), x(1), x(2), x(3), 0, false, 0.3),
  embedding: (x) => kiln.embedding(x(0), x(1)),
  gather_dim1: (x) => kiln.gather(x(0), 1, x(1)),
  scatter_add_dim0: (x) => kiln.scatterAdd(x(0), 0, x(1), x(2)),
  index_put_acc: (x) => kiln.indexPut(x(0), [x(1)], x(2), true),
  cat_dim1: (x) => kiln.cat([x(0), x(1)], 1),
  tril_m1: (x) => kiln.tril(x(0), -1),
};

function stridesIgnoringUnitDims(shape: readonly number[], strides: readonly number[]): number[] {
  return strides.filter((_, i) => shape[i] !== 1);
}

test('every golden case has a runner', () => {
  const missing = golden.cases.map((c) => c.name).filter((n) => !(n in runners));
  assert.deepEqual(missing, []);
});

for (const c of golden.cases) {
  test(`matches PyTorch ${golden.torch}: ${c.name}`, () => {
    const run = runners[c.name];
    if (!run) return;
    const result = run((i) => input(c, i));
    const outs = Array.isArray(result) ? result : [result];
    assert.equal(outs.length, c.outputs.length, 'number of outputs');
    outs.forEach((o, i) => {
      const want = c.outputs[i]!;
      if (want.dtype === 'int64' || want.dtype === 'bool') {
        assert.deepEqual(o.toFlatArray(), want.data.map(Number), `output ${i} values`);
      } else {
        assertClose(o, want.data.map(Number), want.shape, { atol: 2e-5, rtol: 2e-5 });
      }
      assert.deepEqual(
        stridesIgnoringUnitDims(o.shape, o.strides),
        stridesIgnoringUnitDims(want.shape, c.strides[i]!),
        `output ${i} strides: kiln [${o.strides}] vs torch [${c.strides[i]}]`,
      );
    });
  });
}
