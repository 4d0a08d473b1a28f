/**
 * Samples of the LLM library ops, written once for two users: opcheck (llmOpcheckSamples: built on
 * any device at any size of the dynamic dim T) and the meta-vs-real test (samples: cpu, default
 * sizes). In-place samples are built so that a correct kernel changes every mutated argument
 * (positions are never 0, where RoPE is the identity).
 */
import type { OpcheckSample } from '../../src/llm/opcheck.js';
import * as llmApi from '../../src/api/llm.js';
import { Device } from '../../src/runtime/device.js';
import type { DType } from '../../src/tensor/dtype.js';
import type { Tensor } from '../../src/tensor/tensor.js';
import { type Layout, makeTensor, rand, randomInts, rng } from '../helpers/make.js';
import type { OpSample } from './types.js';

type Dims = Readonly<Record<string, number>>;

const on = (t: Tensor, device: Device): Tensor => (device.type === 'cpu' ? t : t.to(device));
const r = (shape: number[], seed: number, device: Device, layout: Layout = 'contiguous', dtype: DType = 'float32', lo = -2, hi = 2): Tensor =>
  on(rand(shape, seed, layout, dtype, lo, hi), device);
const f64grad = (shape: number[], seed: number, device: Device): Tensor => r(shape, seed, device, 'contiguous', 'float64').requiresGrad_();

/** Real rotary tables: cos(p * theta_i) then sin(p * theta_i), theta_i = 10000^(-2i/rot). */
export function ropeCache(maxPos: number, rot: number, dtype: DType = 'float32'): Tensor {
  const half = rot / 2;
  const v: number[] = [];
  for (let p = 0; p < maxPos; p++) {
    const row: number[] = [];
    for (let i = 0; i < half; i++) row.push(Math.cos(p * 10000 ** (-i / half)));
    for (let i = 0; i < half; i++) row.push(Math.sin(p * 10000 ** (-i / half)));
    v.push(...row);
  }
  return makeTensor(v, [maxPos, rot], dtype);
}

/** Token positions in [1, maxPos) (position 0 would leave RoPE's input unchanged). */
export function ropePositions(t: number, maxPos: number, seed: number, dtype: DType = 'int64'): Tensor {
  return makeTensor(randomInts(t, seed, 1, maxPos), [t], dtype);
}

/** Distinct expert ids per token, as a router would give. */
export function routedIds(t: number, k: number, experts: number, seed: number): Tensor {
  const g = rng(seed);
  const ids: number[] = [];
  for (let i = 0; i < t; i++) {
    const pool = Array.from({ length: experts }, (_, e) => e).sort(() => g() - 0.5);
    ids.push(...pool.slice(0, k));
  }
  return makeTensor(ids, [t, k], 'int32');
}

/** Zeros on `device` (the caches a reshapeAndCache sample writes into). */
const zerosOn = (shape: number[], device: Device, dtype: DType = 'float32'): Tensor => on(makeTensor(new Array<number>(shape.reduce((a, b) => a * b, 1)).fill(0), shape, dtype), device);

/** `n` distinct slots in [0, capacity) (the first -1 when `pad`: a skipped padding token). */
function distinctSlots(n: number, capacity: number, seed: number, pad: boolean, dtype: DType = 'int64'): Tensor {
  const g = rng(seed);
  const pool = Array.from({ length: capacity }, (_, i) => i).sort(() => g() - 0.5);
  const slots = pool.slice(0, n);
  if (pad && n > 1) slots[0] = -1;
  return makeTensor(slots, [n], dtype);
}

/** A block table [rows, width] of random block ids in [0, numBlocks). */
function blockTable(rows: number, width: number, numBlocks: number, seed: number, dtype: DType = 'int32'): Tensor {
  return makeTensor(randomInts(rows * width, seed, 0, numBlocks), [rows, width], dtype);
}

const T = (d: Dims): number => d.T ?? 3;

export const llmOpcheckSamples: Record<string, OpcheckSample[]> = {
  'llm.rmsNorm': [
    {
      label: 'float32 contiguous',
      dims: { T: 3 },
      make: (d, dev) => [r([T(d), 16], 1, dev), r([16], 2, dev), 1e-6],
      grad: { inputs: (dev) => [f64grad([3, 6], 3, dev), f64grad([6], 4, dev)], fn: (x, w) => llmApi.rmsNorm(x!, w!, 1e-5) },
    },
    { label: 'bfloat16 strided', dims: { T: 4 }, make: (d, dev) => [r([T(d), 8], 5, dev, 'strided', 'bfloat16'), r([8], 6, dev, 'contiguous', 'bfloat16'), 1e-5] },
    { label: 'float16 3-d transposed', dims: { T: 2 }, make: (d, dev) => [r([T(d), 3, 8], 7, dev, 'transposed', 'float16'), r([8], 8, dev, 'contiguous', 'float16'), 1e-6] },
  ],
  'llm.fusedAddRmsNorm': [
    { label: 'float32', dims: { T: 3 }, make: (d, dev) => [r([T(d), 8], 1, dev), r([T(d), 8], 2, dev), r([8], 3, dev), 1e-6] },
    { label: 'bfloat16 strided input', dims: { T: 2 }, make: (d, dev) => [r([T(d), 8], 4, dev, 'strided', 'bfloat16'), r([T(d), 8], 5, dev, 'contiguous', 'bfloat16'), r([8], 6, dev, 'contiguous', 'bfloat16'), 1e-6] },
  ],
  'llm.addRmsNorm': [
    { label: 'float32, transposed residual', dims: { T: 3 }, make: (d, dev) => [r([T(d), 8], 1, dev), r([T(d), 8], 2, dev, 'transposed'), r([8], 3, dev), 1e-6] },
    {
      label: 'float64 gradient',
      dims: { T: 2 },
      make: (d, dev) => [r([T(d), 4], 11, dev, 'contiguous', 'float64'), r([T(d), 4], 12, dev, 'contiguous', 'float64'), r([4], 13, dev, 'contiguous', 'float64'), 1e-3],
      grad: { inputs: (dev) => [f64grad([2, 4], 14, dev), f64grad([2, 4], 15, dev), f64grad([4], 16, dev)], fn: (x, res, w) => { const o = llmApi.addRmsNorm(x!, res!, w!, 1e-3); return [o.out, o.residual]; } },
    },
    { label: 'float16', dims: { T: 2 }, make: (d, dev) => [r([T(d), 6], 4, dev, 'contiguous', 'float16'), r([T(d), 6], 5, dev, 'contiguous', 'float16'), r([6], 6, dev, 'contiguous', 'float16'), 1e-6] },
  ],
  'llm.applyRotaryEmb': [
    {
      label: 'float32 neox, [T, D] tables against a transposed [B, H, T, D] input',
      dims: { T: 3 },
      make: (d, dev) => [r([2, T(d), 3, 8], 1, dev).transpose(1, 2), r([T(d), 8], 2, dev), r([T(d), 8], 3, dev), true],
      grad: { inputs: (dev) => [f64grad([2, 2, 3, 4], 4, dev), f64grad([3, 4], 5, dev), f64grad([1, 3, 4], 6, dev)], fn: (x, c, sn) => llmApi.applyRotaryEmb(x!, c!, sn!, true) },
    },
    {
      label: 'float64 gpt-j gradient',
      dims: { T: 2 },
      make: (d, dev) => [r([T(d), 2, 6], 7, dev, 'contiguous', 'float64'), r([T(d), 1, 6], 8, dev, 'contiguous', 'float64'), r([T(d), 1, 6], 9, dev, 'contiguous', 'float64'), false],
      grad: { inputs: (dev) => [f64grad([2, 2, 6], 10, dev), f64grad([2, 1, 6], 11, dev), f64grad([2, 1, 6], 12, dev)], fn: (x, c, sn) => llmApi.applyRotaryEmb(x!, c!, sn!, false) },
    },
    { label: 'bfloat16 neox strided', dims: { T: 4 }, make: (d, dev) => [r([T(d), 8], 13, dev, 'strided', 'bfloat16'), r([T(d), 8], 14, dev, 'contiguous', 'bfloat16'), r([8], 15, dev, 'contiguous', 'bfloat16'), true] },
    { label: 'float16 gpt-j', dims: { T: 2 }, make: (d, dev) => [r([T(d), 4], 16, dev, 'contiguous', 'float16'), r([T(d), 4], 17, dev, 'contiguous', 'float16'), r([T(d), 4], 18, dev, 'contiguous', 'float16'), false] },
  ],
  'llm.qkNormRotary': [
    {
      label: 'float32 neox, transposed [B, H, T, D] q (4 heads) and k (2 heads), [T, D] tables',
      dims: { T: 3 },
      make: (d, dev) => [r([2, T(d), 4, 8], 1, dev).transpose(1, 2), r([2, T(d), 2, 8], 2, dev).transpose(1, 2), r([8], 3, dev), r([8], 4, dev), 1e-6, r([T(d), 8], 5, dev), r([T(d), 8], 6, dev), true],
    },
    {
      label: 'bfloat16 gpt-j, [T, H, D] q and k, [T, 1, D] tables',
      dims: { T: 2 },
      make: (d, dev) => [r([T(d), 3, 6], 7, dev, 'contiguous', 'bfloat16'), r([T(d), 1, 6], 8, dev, 'contiguous', 'bfloat16'), r([6], 9, dev, 'contiguous', 'bfloat16'), r([6], 10, dev, 'contiguous', 'bfloat16'), 1e-5, r([T(d), 1, 6], 11, dev, 'contiguous', 'bfloat16'), r([T(d), 1, 6], 12, dev, 'contiguous', 'bfloat16'), false],
    },
    { label: 'float64 strided', dims: { T: 4 }, make: (d, dev) => [r([T(d), 8], 13, dev, 'strided', 'float64'), r([T(d), 8], 14, dev, 'contiguous', 'float64'), r([8], 15, dev, 'contiguous', 'float64'), r([8], 16, dev, 'contiguous', 'float64'), 1e-6, r([T(d), 8], 17, dev, 'contiguous', 'float64'), r([8], 18, dev, 'contiguous', 'float64'), true] },
  ],
  'llm.siluAndMul': [
    { label: 'float32', dims: { T: 3 }, make: (d, dev) => [r([T(d), 10], 1, dev)], grad: { inputs: (dev) => [f64grad([2, 6], 2, dev)], fn: (x) => llmApi.siluAndMul(x!) } },
    { label: 'bfloat16 transposed 3-d', dims: { T: 2 }, make: (d, dev) => [r([T(d), 2, 6], 3, dev, 'transposed', 'bfloat16')] },
  ],
  'llm.geluAndMul': [
    { label: 'float32 erf', dims: { T: 3 }, make: (d, dev) => [r([T(d), 8], 1, dev), 'none'], grad: { inputs: (dev) => [f64grad([2, 6], 2, dev)], fn: (x) => llmApi.geluAndMul(x!, 'none') } },
    { label: 'float16 tanh strided', dims: { T: 2 }, make: (d, dev) => [r([T(d), 8], 3, dev, 'strided', 'float16'), 'tanh'], grad: { inputs: (dev) => [f64grad([2, 4], 4, dev)], fn: (x) => llmApi.geluAndMul(x!, 'tanh') } },
  ],
  'llm.rotaryEmbedding': [
    {
      label: 'neox, float32, q 4 heads, k 2 heads',
      dims: { T: 3 },
      make: (d, dev) => [on(ropePositions(T(d), 16, 1), dev), r([T(d), 4 * 8], 2, dev), r([T(d), 2 * 8], 3, dev), 8, on(ropeCache(16, 8), dev), true],
    },
    {
      label: 'gpt-j, partial rotary dim 4 of 8, bfloat16 3-d, int32 positions',
      dims: { T: 2 },
      make: (d, dev) => [on(ropePositions(T(d), 10, 4, 'int32'), dev), r([T(d), 3, 8], 5, dev, 'contiguous', 'bfloat16'), r([T(d), 1, 8], 6, dev, 'contiguous', 'bfloat16'), 8, on(ropeCache(10, 4), dev), false],
    },
    { label: 'neox, key null, strided query', dims: { T: 2 }, make: (d, dev) => [on(ropePositions(T(d), 12, 7), dev), r([T(d), 2 * 6], 8, dev, 'strided'), null, 6, on(ropeCache(12, 6), dev), true] },
  ],
  'llm.topkSoftmax': [
    { label: 'float32 k=2 renormalised', dims: { T: 4 }, make: (d, dev) => [r([T(d), 8], 1, dev), 2, true] },
    { label: 'float64 gradient of the weights', dims: { T: 2 }, make: (d, dev) => [r([T(d), 5], 3, dev, 'contiguous', 'float64'), 2, true], grad: { inputs: (dev) => [f64grad([3, 5], 4, dev)], fn: (g) => llmApi.topkSoftmax(g!, 2, true).weights } },
    { label: 'bfloat16 k=3 strided', dims: { T: 3 }, make: (d, dev) => [r([T(d), 6], 2, dev, 'strided', 'bfloat16'), 3, false] },
  ],
  'llm.groupedTopk': [
    { label: 'softmax, 4 groups keep 2, k=3', dims: { T: 3 }, make: (d, dev) => [r([T(d), 8], 1, dev), 3, false, 4, 2, 'softmax', null, 1] },
    {
      label: 'float64 gradient, sigmoid with bias',
      dims: { T: 2 },
      make: (d, dev) => [r([T(d), 8], 4, dev, 'contiguous', 'float64'), 3, true, 4, 2, 'sigmoid', r([8], 5, dev, 'contiguous', 'float64', -0.3, 0.3), 1.5],
      grad: {
        inputs: (dev) => [f64grad([2, 8], 6, dev)],
        fn: (g) => llmApi.groupedTopk(g!, 3, true, { numExpertGroup: 4, topkGroup: 2, scoringFunc: 'sigmoid', eScoreCorrectionBias: r([8], 5, g!.device, 'contiguous', 'float64', -0.3, 0.3), routedScalingFactor: 1.5 }).weights,
      },
    },
    {
      label: 'sigmoid with correction bias, renormalised, scaled',
      dims: { T: 4 },
      make: (d, dev) => [r([T(d), 12], 2, dev), 4, true, 3, 2, 'sigmoid', r([12], 3, dev, 'contiguous', 'float32', -0.5, 0.5), 2.5],
    },
  ],
  'llm.moeSum': [
    { label: 'float32', dims: { T: 3 }, make: (d, dev) => [r([T(d), 3, 5], 1, dev)] },
    { label: 'float64 gradient', dims: { T: 2 }, make: (d, dev) => [r([T(d), 2, 3], 3, dev, 'contiguous', 'float64')], grad: { inputs: (dev) => [f64grad([2, 2, 3], 4, dev)], fn: (x) => llmApi.moeSum(x!) } },
    { label: 'bfloat16 transposed', dims: { T: 2 }, make: (d, dev) => [r([T(d), 2, 4], 2, dev, 'transposed', 'bfloat16')] },
  ],
  'llm.fusedMoe': [
    {
      label: 'silu float32, 4 experts top-2',
      dims: { T: 5 },
      make: (d, dev) => [r([T(d), 6], 1, dev), r([4, 10, 6], 2, dev, 'contiguous', 'float32', -0.5, 0.5), r([4, 6, 5], 3, dev, 'contiguous', 'float32', -0.5, 0.5), r([T(d), 2], 4, dev, 'contiguous', 'float32', 0, 1), on(routedIds(T(d), 2, 4, 5), dev), 'silu'],
      grad: {
        inputs: (dev) => [f64grad([3, 4], 20, dev), f64grad([3, 6, 4], 21, dev), f64grad([3, 4, 3], 22, dev), f64grad([3, 2], 23, dev)],
        fn: (x, w13, w2, tw) => llmApi.fusedMoe(x!, w13!, w2!, tw!, on(routedIds(3, 2, 3, 24), x!.device), 'silu'),
      },
    },
    {
      label: 'gelu bfloat16, 3 experts top-1',
      dims: { T: 3 },
      make: (d, dev) => [
        r([T(d), 4], 6, dev, 'contiguous', 'bfloat16'),
        r([3, 6, 4], 7, dev, 'contiguous', 'bfloat16', -0.5, 0.5),
        r([3, 4, 3], 8, dev, 'contiguous', 'bfloat16', -0.5, 0.5),
        r([T(d), 1], 9, dev, 'contiguous', 'float32', 0, 1),
        on(routedIds(T(d), 1, 3, 10), dev),
        'gelu',
      ],
    },
  ],
  'llm.mhcPre': [
    {
      label: 'float32 n=4',
      dims: { T: 3 },
      make: (d, dev) => [r([T(d), 4, 6], 1, dev), r([24, 24], 2, dev, 'contiguous', 'float32', -0.3, 0.3), r([3], 3, dev, 'contiguous', 'float32', 0.5, 1.5), r([24], 4, dev, 'contiguous', 'float32', -1, 1), 1e-6, 1e-6, 2, 20, 1e-6],
      grad: {
        inputs: (dev) => [f64grad([2, 3, 2], 30, dev), r([15, 6], 31, dev, 'contiguous', 'float64', -0.3, 0.3).requiresGrad_(), f64grad([3], 32, dev), f64grad([15], 33, dev)],
        fn: (s, phi, a, b) => {
          const o = llmApi.mhcPre(s!, phi!, a!, b!, { sinkhornIters: 6, preEps: 1e-3, rmsEps: 1e-3 });
          return [o.layerInput, o.post, o.comb];
        },
      },
    },
    {
      label: 'bfloat16 streams n=2, transposed',
      dims: { T: 2 },
      make: (d, dev) => [r([T(d), 2, 5], 5, dev, 'transposed', 'bfloat16'), r([8, 10], 6, dev, 'contiguous', 'float32', -0.3, 0.3), r([3], 7, dev, 'contiguous', 'float32', 0.5, 1.5), r([8], 8, dev), 1e-6, 0, 2, 5, 1e-6],
    },
  ],
  'llm.mhcPost': [
    { label: 'float32 n=3', dims: { T: 3 }, make: (d, dev) => [r([T(d), 6], 1, dev), r([T(d), 3, 6], 2, dev), r([T(d), 3], 3, dev, 'contiguous', 'float32', 0, 2), r([T(d), 3, 3], 4, dev, 'contiguous', 'float32', 0, 1)] },
    {
      label: 'float64 gradient',
      dims: { T: 2 },
      make: (d, dev) => [r([T(d), 3], 9, dev, 'contiguous', 'float64'), r([T(d), 2, 3], 10, dev, 'contiguous', 'float64'), r([T(d), 2], 11, dev, 'contiguous', 'float64'), r([T(d), 2, 2], 12, dev, 'contiguous', 'float64')],
      grad: { inputs: (dev) => [f64grad([2, 3], 13, dev), f64grad([2, 2, 3], 14, dev), f64grad([2, 2], 15, dev), f64grad([2, 2, 2], 16, dev)], fn: (f, s, p, c) => llmApi.mhcPost(f!, s!, p!, c!) },
    },
    { label: 'bfloat16 streams, strided comb', dims: { T: 2 }, make: (d, dev) => [r([T(d), 4], 5, dev, 'contiguous', 'bfloat16'), r([T(d), 2, 4], 6, dev, 'contiguous', 'bfloat16'), r([T(d), 2], 7, dev), r([T(d), 2, 2], 8, dev, 'strided')] },
  ],
  'llm.mhcHeadCollapse': [
    { label: 'float32 n=4', dims: { T: 3 }, make: (d, dev) => [r([T(d), 4, 5], 1, dev), r([4, 20], 2, dev, 'contiguous', 'float32', -0.3, 0.3), r([1], 3, dev, 'contiguous', 'float32', 0.5, 1.5), r([4], 4, dev), 1e-6, 1e-6] },
    {
      label: 'float64 gradient',
      dims: { T: 2 },
      make: (d, dev) => [r([T(d), 2, 3], 9, dev, 'contiguous', 'float64'), r([2, 6], 10, dev, 'contiguous', 'float64', -0.3, 0.3), r([1], 11, dev, 'contiguous', 'float64'), r([2], 12, dev, 'contiguous', 'float64'), 1e-3, 0.01],
      grad: { inputs: (dev) => [f64grad([2, 2, 3], 13, dev), f64grad([2, 6], 14, dev), f64grad([1], 15, dev), f64grad([2], 16, dev)], fn: (s, phi, a, b) => llmApi.mhcHeadCollapse(s!, phi!, a!, b!, { rmsEps: 1e-3, eps: 0.01 }) },
    },
    { label: 'float16 n=2', dims: { T: 2 }, make: (d, dev) => [r([T(d), 2, 3], 5, dev, 'contiguous', 'float16'), r([2, 6], 6, dev, 'contiguous', 'float16', -0.3, 0.3), r([1], 7, dev, 'contiguous', 'float16', 0.5, 1.5), r([2], 8, dev, 'contiguous', 'float16'), 1e-6, 0] },
  ],
  'llm.reshapeAndCache': [
    { label: 'float32, one padding slot', dims: { T: 3 }, make: (d, dev) => [r([T(d), 2, 8], 1, dev), r([T(d), 2, 8], 2, dev), zerosOn([6, 4, 2, 8], dev), zerosOn([6, 4, 2, 8], dev), on(distinctSlots(T(d), 24, 3, true), dev)] },
    { label: 'bfloat16 strided key, int32 slots', dims: { T: 2 }, make: (d, dev) => [r([T(d), 1, 4], 4, dev, 'strided', 'bfloat16'), r([T(d), 1, 4], 5, dev, 'contiguous', 'bfloat16'), zerosOn([3, 2, 1, 4], dev, 'bfloat16'), zerosOn([3, 2, 1, 4], dev, 'bfloat16'), on(distinctSlots(T(d), 6, 6, false, 'int32'), dev)] },
  ],
  'llm.linearSiluAndMul': [
    { label: 'float32 with bias', dims: { T: 3 }, make: (d, dev) => [r([T(d), 8], 1, dev), r([12, 8], 2, dev), r([12], 3, dev)] },
    { label: 'bfloat16 3-d, no bias', dims: { T: 2 }, make: (d, dev) => [r([T(d), 2, 16], 4, dev, 'contiguous', 'bfloat16'), r([6, 16], 5, dev, 'contiguous', 'bfloat16'), null] },
  ],
  'llm.linearGelu': [
    { label: 'float32 with bias, erf form', dims: { T: 3 }, make: (d, dev) => [r([T(d), 8], 1, dev), r([6, 8], 2, dev), r([6], 3, dev), 'none'] },
    { label: 'bfloat16 3-d, no bias, tanh form', dims: { T: 2 }, make: (d, dev) => [r([T(d), 2, 16], 4, dev, 'contiguous', 'bfloat16'), r([5, 16], 5, dev, 'contiguous', 'bfloat16'), null, 'tanh'] },
  ],
  'llm.gateUpSiluAndMul': [
    { label: 'float32, 3 rows (the cpu GEMV path)', dims: { T: 3 }, make: (d, dev) => [r([T(d), 40], 1, dev), r([12, 40], 2, dev), r([12, 40], 3, dev)] },
    { label: 'bfloat16 3-d, 2 x 2 rows', dims: { T: 2 }, make: (d, dev) => [r([T(d), 2, 64], 4, dev, 'contiguous', 'bfloat16'), r([9, 64], 5, dev, 'contiguous', 'bfloat16'), r([9, 64], 6, dev, 'contiguous', 'bfloat16')] },
  ],
  'llm.qkvLinear': [
    { label: 'float32, 3 rows (the cpu GEMV path), GQA widths', dims: { T: 3 }, make: (d, dev) => [r([T(d), 40], 1, dev), r([16, 40], 2, dev), r([8, 40], 3, dev), r([8, 40], 4, dev)] },
    { label: 'bfloat16 3-d, 2 x 2 rows', dims: { T: 2 }, make: (d, dev) => [r([T(d), 2, 64], 5, dev, 'contiguous', 'bfloat16'), r([24, 64], 6, dev, 'contiguous', 'bfloat16'), r([9, 64], 7, dev, 'contiguous', 'bfloat16'), r([9, 64], 8, dev, 'contiguous', 'bfloat16')] },
  ],
  'llm.addRmsNormLinear': [
    { label: 'float32 with residual and bias', dims: { T: 3 }, make: (d, dev) => [r([T(d), 8], 1, dev), r([T(d), 8], 2, dev), r([8], 3, dev), 1e-6, r([6, 8], 4, dev), r([6], 5, dev), false] },
    { label: 'bfloat16 3-d gated, no residual', dims: { T: 2 }, make: (d, dev) => [r([T(d), 2, 16], 6, dev, 'contiguous', 'bfloat16'), null, r([16], 7, dev, 'contiguous', 'bfloat16'), 1e-5, r([8, 16], 8, dev, 'contiguous', 'bfloat16'), null, true] },
  ],
  'llm.qkNormRotaryCache': [
    {
      label: 'float32 neox, 4 q heads over 2 kv heads, [T, 1, D] tables, one padding slot',
      dims: { T: 3 },
      make: (d, dev) => [r([T(d), 4, 8], 1, dev), r([T(d), 2, 8], 2, dev), r([T(d), 2, 8], 3, dev), r([8], 4, dev), r([8], 5, dev), 1e-6, r([T(d), 1, 8], 6, dev), r([T(d), 1, 8], 7, dev), true, zerosOn([6, 4, 2, 8], dev), zerosOn([6, 4, 2, 8], dev), on(distinctSlots(T(d), 24, 8, true), dev)],
    },
    {
      label: 'bfloat16 gpt-j, strided k and v, int32 slots',
      dims: { T: 2 },
      make: (d, dev) => [r([T(d), 2, 6], 9, dev, 'contiguous', 'bfloat16'), r([T(d), 1, 6], 10, dev, 'strided', 'bfloat16'), r([T(d), 1, 6], 11, dev, 'strided', 'bfloat16'), r([6], 12, dev, 'contiguous', 'bfloat16'), r([6], 13, dev, 'contiguous', 'bfloat16'), 1e-5, r([T(d), 1, 6], 14, dev, 'contiguous', 'bfloat16'), r([T(d), 1, 6], 15, dev, 'contiguous', 'bfloat16'), false, zerosOn([3, 2, 1, 6], dev, 'bfloat16'), zerosOn([3, 2, 1, 6], dev, 'bfloat16'), on(distinctSlots(T(d), 6, 16, false, 'int32'), dev)],
    },
  ],
  'llm.qkNormRotaryPagedAttention': [
    {
      label: 'float32 neox, 4 q heads over 2 kv heads, one padding slot, ragged lengths',
      dims: { T: 3 },
      make: (d, dev) => [r([T(d), 4, 8], 1, dev), r([T(d), 2, 8], 2, dev), r([T(d), 2, 8], 3, dev), r([8], 4, dev), r([8], 5, dev), 1e-6, r([T(d), 1, 8], 6, dev), r([T(d), 1, 8], 7, dev), true, r([6, 4, 2, 8], 8, dev), r([6, 4, 2, 8], 9, dev), on(distinctSlots(T(d), 24, 8, true), dev), on(blockTable(T(d), 3, 6, 4), dev), on(makeTensor(randomInts(T(d), 5, 1, 13), [T(d)], 'int32'), dev), 0.35],
    },
  ],
  'llm.pagedAttention': [
    {
      label: 'float32, 4 query heads over 2 kv heads, ragged lengths',
      dims: { T: 3 },
      make: (d, dev) => [r([T(d), 4, 8], 1, dev), r([6, 4, 2, 8], 2, dev), r([6, 4, 2, 8], 3, dev), on(blockTable(T(d), 3, 6, 4), dev), on(makeTensor(randomInts(T(d), 5, 1, 13), [T(d)], 'int32'), dev), 0.35],
    },
    {
      label: 'bfloat16, int64 tables, a row of length 0',
      dims: { T: 2 },
      make: (d, dev) => [r([T(d), 2, 16], 6, dev, 'contiguous', 'bfloat16'), r([5, 2, 2, 16], 7, dev, 'contiguous', 'bfloat16'), r([5, 2, 2, 16], 8, dev, 'contiguous', 'bfloat16'), on(blockTable(T(d), 4, 5, 9, 'int64'), dev), on(makeTensor([0, ...randomInts(T(d) - 1, 10, 1, 9)], [T(d)], 'int64'), dev), 0.25],
    },
    { label: 'float64, one kv head per query head', dims: { T: 2 }, make: (d, dev) => [r([T(d), 2, 4], 11, dev, 'contiguous', 'float64'), r([4, 3, 2, 4], 12, dev, 'contiguous', 'float64'), r([4, 3, 2, 4], 13, dev, 'contiguous', 'float64'), on(blockTable(T(d), 2, 4, 14), dev), on(makeTensor(randomInts(T(d), 15, 1, 7), [T(d)], 'int32'), dev), 0.5] },
  ],
};

const CPU_DEVICE = new Device('cpu');

export const samples: OpSample[] = Object.entries(llmOpcheckSamples).flatMap(([op, list]) =>
  list.map((s) => ({ op, label: s.label, args: () => s.make(s.dims ?? {}, CPU_DEVICE) })),
);

