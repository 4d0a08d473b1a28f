/**
 * webgpu topk (the radix select of kernels/webgpu/topk-select.ts for k <= 256, the full sort above)
 * against the CPU kernel, values and indices exactly: rows full of ties (few distinct values, so
 * the select continues into the positions), NaN and signed zeros, float32 / float16 / bfloat16 /
 * int32 / uint8, largest and smallest, sorted true and false, every dim of 1- to 3-d inputs,
 * strided and transposed inputs, k = 1, k = len, k at the select's limit and (one case) past it.
 * Skips without a computing adapter.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { makeTensor, randomInts, randomValues, type Layout } from './helpers/make.js';
import { sameLayoutOnWebgpu, webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

interface Case {
  shape: number[];
  dtype: DType;
  /** Distinct values: small gives many ties. 0: continuous values. */
  distinct: number;
  special?: boolean;
  layout?: Layout;
}

function values(c: Case, seed: number): number[] {
  const n = c.shape.reduce((a, b) => a * b, 1);
  const base = c.distinct > 0 ? randomInts(n, seed, 0, c.distinct).map((v) => (c.dtype === 'uint8' ? v : v - Math.floor(c.distinct / 2))) : randomValues(n, seed, -100, 100);
  if (c.special) {
    const sp = [NaN, -0, 0, Infinity, -Infinity];
    for (let i = 0; i < n; i += 7) base[i] = sp[(i / 7) % sp.length]!;
  }
  return base;
}

const CASES: Case[] = [
  { shape: [12, 3000], dtype: 'float32', distinct: 0 },
  { shape: [4, 3000], dtype: 'float32', distinct: 5 },
  { shape: [5, 700], dtype: 'float32', distinct: 3, special: true },
  { shape: [2, 20000], dtype: 'float32', distinct: 2 },
  { shape: [8, 300], dtype: 'float16', distinct: 40 },
  { shape: [4, 500], dtype: 'bfloat16', distinct: 0 },
  { shape: [6, 513], dtype: 'int32', distinct: 9 },
  { shape: [7, 260], dtype: 'uint8', distinct: 4 },
  { shape: [9, 33, 20], dtype: 'float32', distinct: 6, layout: 'transposed' },
  { shape: [4, 5, 90], dtype: 'float32', distinct: 11, layout: 'strided' },
  { shape: [1000], dtype: 'float32', distinct: 50 },
];

test('webgpu topk matches the CPU kernel exactly (ties, NaN, dtypes, dims, layouts, k up to and past the select limit)', { skip }, () => {
  const failures: string[] = [];
  let ran = 0;
  CASES.forEach((c, ci) => {
    const cpu = makeTensor(values(c, 7 + ci), c.shape, c.dtype, c.layout ?? 'contiguous');
    const gpu = sameLayoutOnWebgpu(cpu);
    for (let dim = 0; dim < c.shape.length; dim++) {
      const len = c.shape[dim]!;
      // Many short lines (a big input's leading dim) only cost SwiftShader time: skip them.
      if (c.shape.reduce((a, b) => a * b, 1) / len > 600) continue;
      const ks = [...new Set([1, 7, 50, ...(len >= 300 ? [256] : []), ...(len <= 300 ? [len] : []), ...(ci === 2 ? [257] : [])].filter((k) => k <= len))];
      for (const k of ks) {
        for (const largest of [true, false]) {
          const sorted = (k + dim) % 2 === 0;
          const label = `${c.dtype} [${c.shape}] ${c.layout ?? ''} dim ${dim} k ${k} ${largest ? 'largest' : 'smallest'} sorted ${sorted}`;
          try {
            const want = kiln.topk(cpu, k, dim, largest, sorted);
            const got = kiln.topk(gpu, k, dim, largest, sorted);
            ran++;
            const wi = want.indices.toFlatArray();
            const gi = got.indices.to('cpu').toFlatArray();
            const wv = (want.values.toFlatArray() as number[]).map(Number);
            const gv = (got.values.to('cpu').toFlatArray() as number[]).map(Number);
            assert.deepEqual(got.indices.shape, want.indices.shape);
            assert.deepEqual(gi, wi, 'indices');
            assert.deepEqual(gv, wv, 'values');
          } catch (e) {
            failures.push(`${label}: ${(e as Error).message.split('\n').slice(0, 3).join(' ')}`);
          }
        }
      }
    }
  });
  assert.deepEqual(failures, [], `${failures.length} of ${ran} differ:\n${failures.slice(0, 20).join('\n')}`);
  assert.ok(ran > 100, `ran ${ran} cases`);
});
