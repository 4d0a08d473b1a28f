/**
 * KILN_CUDA_COL_FEW_ROWS on the device: compiled reduce groups over very few long contiguous rows
 * that split cannot run (full-size outputs, several levels) take the col strategy with one row per
 * tile, and their results match float64 references computed on the CPU:
 * - the conv-stack training step's loss shape: mean((relu(x) - t)^2) over a whole channels_last
 *   tensor against an NCHW target, returning the relu and the difference too (one row, stores);
 * - a normalisation over 3 rows of 300000 elements (mean, then variance, then the normalised
 *   output: two levels and a store).
 * Skips without a CUDA device; under the fake libcuda (which runs no kernel) only the choice of col
 * is checked.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import { setOption } from '../src/runtime/config.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

/** Whether kernels really run (the fake libcuda only counts launches). */
const realDevice = (): boolean => !skip && !kiln.getAccelerator('cuda').properties(0).name.startsWith('Fake');

function withFewRows<T>(f: () => T): T {
  setOption('KILN_CUDA_COL_FEW_ROWS', true);
  try {
    return f();
  } finally {
    setOption('KILN_CUDA_COL_FEW_ROWS', undefined);
  }
}

/** The strategies the compiled function's inference program chose for its reduce kernels. */
function strategies(cf: { programs(): { inference: readonly unknown[] } }): string[] {
  const p = cf.programs().inference[0];
  assert.ok(p instanceof CudaGraphProgram, 'expected a cuda program');
  return [...p.describe().matchAll(/"strategy":"(\w+)"/g)].map((m) => m[1]!);
}

/** max |got - want| / (atol + rtol |want|) <= 1 over all elements, want in float64 on the CPU. */
function assertNear(label: string, got: Tensor, want: Tensor, atol: number, rtol: number): void {
  assert.deepEqual([...got.shape], [...want.shape], `${label}: shape`);
  const g = got.to('cpu').toFlatArray();
  const w = want.toFlatArray();
  for (let i = 0; i < w.length; i++) {
    if (!(Math.abs(g[i]! - w[i]!) <= atol + rtol * Math.abs(w[i]!))) assert.fail(`${label}: element ${i}: got ${g[i]}, want ${w[i]}`);
  }
}

test('a whole-tensor loss with full-size outputs (one row of 1.2M elements) runs col and matches float64', { skip }, () => {
  withFewRows(() => {
    const gen = new kiln.Generator(3);
    const xc = kiln.randn([8, 64, 48, 48], { generator: gen });
    const tc = kiln.mul(kiln.randn([8, 64, 48, 48], { generator: gen }), 0.5);
    const x = xc.to('cuda').contiguous('channelsLast');
    const t = tc.to('cuda');
    const f = (a: Tensor, b: Tensor): Tensor[] => {
      const r = kiln.relu(a);
      const d = kiln.sub(r, b);
      return [kiln.mean(kiln.mul(d, d)), r, d];
    };
    const cf = kiln.compile(f, { name: 'col-rows-loss' });
    const [loss, r, d] = kiln.noGrad(() => cf(x, t));
    assert.ok(strategies(cf).includes('col'), `strategies ${strategies(cf).join(', ')}`);
    if (!realDevice()) return;
    const x64 = xc.to('float64');
    const t64 = tc.to('float64');
    const r64 = kiln.relu(x64);
    const d64 = kiln.sub(r64, t64);
    assertNear('relu', r!.to('float64'), r64, 0, 0);
    assertNear('difference', d!.to('float64'), d64, 1e-6, 1e-6);
    assertNear('loss', loss!.to('float64'), kiln.mean(kiln.mul(d64, d64)), 0, 1e-5);
  });
});

test('a normalisation over 3 rows of 300000 elements (two levels and a store) runs col and matches float64', { skip }, () => {
  withFewRows(() => {
    const xc = kiln.add(kiln.mul(kiln.randn([3, 300000], { generator: new kiln.Generator(5) }), 2), 1);
    const f = (a: Tensor): Tensor => {
      const d = kiln.sub(a, kiln.mean(a, [1], true));
      return kiln.mul(d, kiln.rsqrt(kiln.add(kiln.mean(kiln.mul(d, d), [1], true), 1e-5)));
    };
    const cf = kiln.compile(f, { name: 'col-rows-norm' });
    const y = kiln.noGrad(() => cf(xc.to('cuda')));
    assert.deepEqual(strategies(cf), ['col']);
    if (!realDevice()) return;
    assertNear('normalised', y.to('float64'), f(xc.to('float64')), 1e-5, 1e-4);
  });
});
