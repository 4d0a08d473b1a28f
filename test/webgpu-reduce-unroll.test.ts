/**
 * KILN_WEBGPU_REDUCE_UNROLL (fused/render.ts unrolledPass): a 'workgroup' reduction that loads U
 * elements per invocation per loop step must give the same bits as one element per step (lanes
 * past the row combine the identity; each invocation keeps its order), for row lengths that are
 * and are not multiples of U * 256, several rows, strided rows, every reduce kind the renderer has
 * (sum, mean, amax, amin, argmax with ties, prod), multi-level groups (softmax) and full-size
 * stores (rmsNorm, layerNorm), eager and compiled (add + rmsNorm: two stores per lane). The values
 * themselves are checked against float64 by webgpu-reduction.test.ts and webgpu-linalg.test.ts;
 * the source is checked to be the unrolled one. Skips without a real adapter (Dawn's null backend
 * computes nothing).
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { webgpu } from '../src/kernels/webgpu/device.js';

const skip = webgpuSkipReason();
const dev = 'webgpu';

/** Bits of a tensor's elements (float16 through float32 is exact), NaN as one pattern. */
const bits = (t: Tensor): string[] => (t.to('cpu').to('float32').toFlatArray() as number[]).map((v) => (Number.isNaN(v) ? 'nan' : Object.is(v, -0) ? '-0' : String(v)));

/** Runs f with the option at u, then at 1, and returns both results' bits; and the sources rendered under u. */
function both(f: () => Tensor[], u: number): { a: string[][]; b: string[][]; sources: string[] } {
  const sources: string[] = [];
  const acc = webgpu();
  const orig = acc.kernel.bind(acc);
  acc.kernel = (source: string, label: string) => {
    sources.push(source);
    return orig(source, label);
  };
  try {
    setOption('KILN_WEBGPU_REDUCE_UNROLL', u);
    const a = kiln.noGrad(() => f().map(bits));
    acc.kernel = orig;
    setOption('KILN_WEBGPU_REDUCE_UNROLL', 1);
    const b = kiln.noGrad(() => f().map(bits));
    return { a, b, sources };
  } finally {
    acc.kernel = orig;
    setOption('KILN_WEBGPU_REDUCE_UNROLL', undefined);
  }
}

/**
 * On the H200 (Dawn/Vulkan, subgroups) this test failed in session 16: float32 llm.rmsNorm over
 * 3 x 2500 rows gave other values unrolled (bench/results/h200-s16-final-2026-12-03.json), which is
 * why KILN_WEBGPU_REDUCE_UNROLL defaults to 1. Not found yet; the likely cause (not verified) is
 * the driver's FMA contraction: the loop form's `a = a + v * v` can become one fma, while the
 * unrolled form's `select(0, v * v, jv < N)` between the product and the sum keeps them apart, so
 * the two round differently (both within float32 rounding, not bit-identical). It stays a todo there
 * until checked; on adapters without subgroups (SwiftShader in CI) it must pass.
 */
const todo = skip === undefined && (kiln.getAccelerator('webgpu') as unknown as { hasFeature(f: string): boolean }).hasFeature('subgroups')
  ? 'unrolled reductions differ on an adapter with subgroups (H200, session 16): KILN_WEBGPU_REDUCE_UNROLL is off by default'
  : undefined;

test('webgpu unrolled workgroup reductions equal one element per step, bit for bit', { skip, todo }, () => {
  kiln.manualSeed(7);
  // Pipelines are memoised by structure, not length: the first shape renders them.
  const rendered: string[] = [];
  for (const [rows, n] of [
    [1, 1024],
    [1, 1000],
    [3, 2500],
    [5, 33],
    [2, 4099],
  ] as const) {
    for (const dtype of ['float32', 'float16'] as const) {
      const x = kiln.randn([rows, n], { device: dev }).to(dtype);
      // Ties for argmax: a few values repeated (the first index among equals must win).
      const xt = kiln.round(kiln.mul(x, 2)).to(dtype);
      const w = kiln.randn([n], { device: dev }).to(dtype);
      const xs = kiln.transpose(kiln.randn([n, rows], { device: dev }).to(dtype), 0, 1);
      const { a, b, sources } = both(
        () => [
          kiln.sum(x, 1),
          kiln.mean(x, 1),
          kiln.amax(x, 1),
          kiln.amin(xs, 1),
          kiln.argmax(xt, 1).to('int32'),
          kiln.prod(kiln.add(kiln.mul(x, 0.01), 1), 1),
          kiln.softmax(x, 1),
          kiln.llm.rmsNorm(x, w, 1e-6),
          kiln.nn.functional.layerNorm(x, [n], w, null, 1e-5),
        ],
        4,
      );
      rendered.push(...sources);
      a.forEach((got, k) => assert.deepEqual(got, b[k], `rows ${rows} x ${n} ${dtype}: result ${k} differs between unroll 4 and 1`));
    }
  }
  assert.ok(rendered.filter((s) => s.includes('j0 = j0 + 1024u')).length >= 8, 'the unrolled sources were rendered');
});

test('webgpu compiled add + rmsNorm (two stores per lane) unrolled equals one per step', { skip }, () => {
  kiln.manualSeed(8);
  for (const n of [1024, 1000, 3000]) {
    const x = kiln.randn([1, n], { device: dev }).to('float16');
    const r = kiln.randn([1, n], { device: dev }).to('float16');
    const w = kiln.randn([n], { device: dev }).to('float16');
    const run = (): Tensor[] => {
      // A fresh function per setting: the option is part of the program's kernels' keys.
      const f = kiln.compile((p: Tensor, q: Tensor, g: Tensor) => {
        const s = kiln.add(p, q);
        return [kiln.nn.functional.rmsNorm(s, [n], g, 1e-6), s];
      });
      return f(x, r, w) as Tensor[];
    };
    const { a, b } = both(run, 4);
    a.forEach((got, k) => assert.deepEqual(got, b[k], `n ${n}: output ${k} differs between unroll 4 and 1`));
  }
});
