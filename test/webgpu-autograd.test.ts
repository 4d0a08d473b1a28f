/**
 * Backward on webgpu of the ops issue #20 brought there: each function's gradients (the formulas
 * dispatch scatterAdd, gather, indexPut with accumulate, conv2d, maxPool2dWithIndices, cumsum,
 * flip, where, ... on the device) against the same function on the CPU in float64. Leaves are
 * float32 on webgpu (strided, transposed or channels_last, kept so), the upstream gradient is a
 * fixed random tensor. Needs a real adapter: skips without one.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { type Layout, makeTensor, randomInts, randomValues } from './helpers/make.js';
import { sameLayoutOnWebgpu, webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

let seed = 7000;
const leaf = (shape: number[], layout: Layout = 'contiguous', lo = -2, hi = 2): Tensor => makeTensor(randomValues(shape.reduce((a, b) => a * b, 1), seed++, lo, hi), shape, 'float32', layout);
const idx = (shape: number[], lo: number, hi: number): Tensor => makeTensor(randomInts(shape.reduce((a, b) => a * b, 1), seed++, lo, hi), shape, 'int64');

interface GradCase {
  readonly label: string;
  /** Differentiable leaves (float32, on the CPU). */
  readonly leaves: readonly Tensor[];
  /** Constants (indices, masks), moved to the device with the leaves. */
  readonly consts?: readonly Tensor[];
  readonly fn: (leaves: Tensor[], consts: Tensor[]) => Tensor;
  readonly tol?: number;
}

function cases(): GradCase[] {
  const sortable = makeTensor(randomInts(60, seed++, 0, 1000).map((v) => v / 7), [4, 15]);
  return [
    { label: 'conv2d (input, weight, bias), stride 2, pad 1', leaves: [leaf([2, 3, 7, 6], 'channelsLast'), leaf([4, 3, 3, 3]), leaf([4])], fn: ([x, w, b]) => kiln.conv2d(x!, w!, b!, 2, 1) },
    { label: 'conv2d groups 2, dilation 2', leaves: [leaf([1, 4, 8, 8], 'strided'), leaf([6, 2, 2, 2])], fn: ([x, w]) => kiln.conv2d(x!, w!, null, 1, 1, 2, 2) },
    { label: 'maxPool2d 3x3 stride 2 pad 1', leaves: [leaf([2, 3, 9, 8], 'strided')], fn: ([x]) => kiln.maxPool2d(x!, 3, 2, 1) },
    { label: 'maxPool2dWithIndices values', leaves: [leaf([1, 2, 6, 6])], fn: ([x]) => kiln.maxPool2dWithIndices(x!, 2).values },
    { label: 'avgPool2d 3x3 pad 1 exclude pad', leaves: [leaf([2, 2, 7, 7], 'channelsLast')], fn: ([x]) => kiln.avgPool2d(x!, 3, 2, 1, false, false) },
    { label: 'gather(1)', leaves: [leaf([4, 6], 'transposed')], consts: [idx([4, 9], 0, 6)], fn: ([x], [i]) => kiln.gather(x!, 1, i!) },
    { label: 'scatter(1) (self and src)', leaves: [leaf([3, 8]), leaf([3, 4])], consts: [idx([3, 4], 0, 8)], fn: ([s, v], [i]) => kiln.scatter(s!, 1, i!, v!) },
    { label: 'scatterAdd(0)', leaves: [leaf([5, 3]), leaf([7, 3], 'strided')], consts: [idx([7, 3], 0, 5)], fn: ([s, v], [i]) => kiln.scatterAdd(s!, 0, i!, v!) },
    { label: 'scatter(1, reduce mean)', leaves: [leaf([3, 5]), leaf([3, 6])], consts: [idx([3, 6], 0, 5)], fn: ([s, v], [i]) => kiln.scatter(s!, 1, i!, v!, 'mean') },
    { label: 'indexSelect (indexPut accumulate)', leaves: [leaf([6, 4])], consts: [idx([9], 0, 6)], fn: ([x], [i]) => kiln.indexSelect(x!, 0, i!) },
    { label: 'embedding', leaves: [leaf([7, 3])], consts: [idx([2, 5], 0, 7)], fn: ([w], [i]) => kiln.embedding(i!, w!) },
    { label: 'indexPut (self and values)', leaves: [leaf([5, 4]), leaf([3, 4])], consts: [makeTensor([4, 0, 2], [3], 'int64')], fn: ([s, v], [i]) => kiln.indexPut(s!, [i!], v!) },
    { label: 'sort values', leaves: [sortable], fn: ([x]) => kiln.sort(x!, 1).values },
    { label: 'topk values', leaves: [sortable], fn: ([x]) => kiln.topk(x!, 4, 1).values },
    { label: 'cumsum(1)', leaves: [leaf([3, 40], 'strided')], fn: ([x]) => kiln.cumsum(x!, 1) },
    { label: 'cumprod(0) with zeros', leaves: [makeTensor([1.5, 0, 0.5, -2, 0, 1, 0.5, 2, 1.25, 0.75, 3, -1], [4, 3])], fn: ([x]) => kiln.cumprod(x!, 0) },
    { label: 'maskedFill (self and 0-d value)', leaves: [leaf([4, 5]), makeTensor([2], [])], consts: [makeTensor(randomInts(5, seed++, 0, 2), [5], 'bool')], fn: ([x, v], [m]) => kiln.maskedFill(x!, m!, v!) },
    { label: 'tril(-1) and triu(1)', leaves: [leaf([2, 4, 5], 'transposed')], fn: ([x]) => kiln.add(kiln.tril(x!, -1), kiln.triu(x!, 1)) },
    { label: 'groupNorm', leaves: [leaf([2, 6, 3, 3], 'strided'), leaf([6]), leaf([6])], fn: ([x, w, b]) => kiln.groupNorm(x!, 3, w!, b!) },
    { label: 'layerNorm', leaves: [leaf([4, 7]), leaf([7]), leaf([7])], fn: ([x, w, b]) => kiln.layerNorm(x!, [7], w!, b!) },
    { label: 'batchNorm training', leaves: [leaf([4, 3, 2, 2], 'channelsLast'), leaf([3]), leaf([3])], fn: ([x, w, b]) => kiln.batchNorm(x!, null, null, w!, b!, true) },
    { label: 'logsumexp and std', leaves: [leaf([5, 6])], fn: ([x]) => kiln.add(kiln.logsumexp(x!, [1]), kiln.std(x!, 1)) },
  ];
}

const toCpu64 = (t: Tensor): Tensor => t.to('cpu').to('float64');

test('backward on webgpu matches the CPU in float64 (pooling, conv, gather/scatter/indexPut, sort/topk, scans, masks, norms)', { skip }, () => {
  const failures: string[] = [];
  for (const c of cases()) {
    try {
      const grads = (device: 'webgpu' | 'cpu'): Tensor[] => {
        const leaves = c.leaves.map((t) => (device === 'webgpu' ? sameLayoutOnWebgpu(t) : t.to('float64')).requiresGrad_());
        const consts = (c.consts ?? []).map((t) => (device === 'webgpu' ? sameLayoutOnWebgpu(t) : t));
        const y = c.fn(leaves, consts);
        kiln.manualSeed(11);
        const g = makeTensor(randomValues(y.numel(), 99, -1, 1), [...y.shape], device === 'webgpu' ? 'float32' : 'float64');
        y.backward(device === 'webgpu' ? g.to('webgpu') : g);
        return leaves.map((l, k) => {
          if (!l.grad) throw new Error(`leaf ${k} has no gradient`);
          if (l.grad.device.type !== device) throw new Error(`leaf ${k}'s gradient is on ${l.grad.device.toString()}`);
          return l.grad;
        });
      };
      const got = grads('webgpu');
      const want = grads('cpu');
      got.forEach((g, k) => {
        const a = toCpu64(g).toFlatArray() as number[];
        const b = want[k]!.toFlatArray() as number[];
        const tol = c.tol ?? 2e-4;
        const scale = Math.max(1, ...b.map(Math.abs));
        const i = b.findIndex((w, j) => !(Math.abs(a[j]! - w) <= tol * scale));
        if (i >= 0) failures.push(`${c.label} leaf ${k} element ${i}: got ${a[i]}, want ${b[i]}`);
      });
    } catch (e) {
      failures.push(`${c.label}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  assert.deepEqual(failures, [], failures.join('\n'));
});
