/**
 * The webgpu tiled GEMM's large form (128x128 tiles, 8x8 blocks per invocation from vec4 workgroup
 * tiles, register double-buffered loads: gemm-tile.ts) and KILN_WEBGPU_GEMM_TILE: the source and
 * the auto rule without a device; with KILN_WEBGPU_GEMM_TILE=large, values against float64
 * references on the CPU computed from the same rounded inputs (ragged shapes that leave partial
 * tiles and K steps, transposed operands read in place, linear with a bias, addmm with beta,
 * batched and broadcast-batched products, float16 and bfloat16 operands), within |A| @ |B| times
 * the output's ulp plus f32 accumulation over K. The device tests skip without an adapter.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import { gemmKey, generateGemm, type GemmSpec } from '../src/kernels/webgpu/gemm-codegen.js';
import { chooseLargeTile, gemmPipelineKeys, gemmStats, LARGE_TILE_MIN } from '../src/kernels/webgpu/linalg.js';
import { dispatch } from '../src/ops/dispatch.js';
import { getOp } from '../src/ops/registry.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { absArgs, argsFor, type GemmCase } from './webgpu-linalg-cases.js';

const skip = webgpuSkipReason();

const SPEC: GemmSpec = { a: 'f32', b: 'f32', c: 'f32', aMajor: 'k', bMajor: 'n', bias: false, beta: false };

test('the large form renders vec4 workgroup tiles, 128x128 tiles and its own pipeline key', () => {
  const small = generateGemm(SPEC);
  const large = generateGemm({ ...SPEC, tile: 'large' });
  assert.notEqual(gemmKey({ ...SPEC, tile: 'large' }), gemmKey(SPEC));
  assert.match(large, /var<workgroup> As: array<vec4<f32>, 512>;/);
  assert.match(large, /var<workgroup> Bs: array<vec4<f32>, 512>;/);
  assert.match(large, /let m0 = tm \* 128u; let n0 = tn \* 128u;/);
  // 64 accumulators, fed by 4 vec4 reads per K step of the inner product.
  assert.equal(large.match(/= fma\(/g)?.length, 64);
  assert.equal(large.match(/let [ab][01] = [AB]s\[/g)?.length, 4);
  // The K step's loads are under the shadowing `let k0 = kn;`.
  assert.match(large, /let k0 = kn;/);
  assert.match(small, /var<workgroup> As: array<f32, 1040>;/);
  assert.doesNotMatch(small, /vec4/);
  // Every epilogue and the split-K partial form render.
  for (const s of [{ ...SPEC, bias: true, beta: true }, { ...SPEC, partial: true }, { ...SPEC, a: 'bf16p', b: 'bf16p', c: 'bf16p', aMajor: 'm', bMajor: 'k' }] as GemmSpec[]) {
    const src = generateGemm({ ...s, tile: 'large' });
    assert.match(src, /array<vec4<f32>, 512>/, gemmKey(s));
  }
});

test('KILN_WEBGPU_GEMM_TILE: auto takes the large form from 256 tiles of 128x128 (all batches); small and large force it', () => {
  assert.equal(LARGE_TILE_MIN, 256);
  assert.equal(chooseLargeTile('auto', 2048, 4096, 1), true);
  assert.equal(chooseLargeTile('auto', 2048, 2048, 1), true); // 16 x 16 tiles
  assert.equal(chooseLargeTile('auto', 2048, 1920, 1), false); // 16 x 15
  assert.equal(chooseLargeTile('auto', 2048, 1921, 1), true); // the ragged column makes 16 x 16
  assert.equal(chooseLargeTile('auto', 128, 128, 256), true);
  assert.equal(chooseLargeTile('auto', 128, 128, 255), false);
  assert.equal(chooseLargeTile('auto', 1, 1, 1), false);
  // Small products over many batches (attention scores) keep the 64x64 tile.
  assert.equal(chooseLargeTile('auto', 64, 64, 4096), false);
  assert.equal(chooseLargeTile('auto', 127, 4096, 64), false);
  assert.equal(chooseLargeTile('large', 1, 1, 1), true);
  assert.equal(chooseLargeTile('small', 8192, 8192, 4), false);
});

/** Runs `fn` with the environment variable `name` set to `value`, the environment restored after. */
function withEnv<T>(name: string, value: string, fn: () => T): T {
  const before = process.env[name];
  process.env[name] = value;
  try {
    return fn();
  } finally {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  }
}

/** Runs `fn` with KILN_WEBGPU_GEMM_TILE set to `mode`. */
const withTile = <T>(mode: string, fn: () => T): T => withEnv('KILN_WEBGPU_GEMM_TILE', mode, fn);

const OUT_ULP: Partial<Record<DType, number>> = { float32: 2 ** -23, float16: 2 ** -10, bfloat16: 2 ** -7 };
const ACC_U = 2 ** -24;

interface Case extends GemmCase {
  /** The contracted size (bounds the accumulation error). */
  readonly k: number;
}

const mm = (m: number, n: number, k: number): Case => ({ label: `mm ${m}x${n}x${k}`, op: 'mm', k, build: (mk) => [mk([m, k]), mk([k, n])] });

const CASES: readonly Case[] = [
  mm(1, 1, 1),
  mm(127, 129, 17),
  mm(130, 250, 33),
  mm(256, 256, 64),
  mm(200, 3, 40),
  mm(3, 140, 200),
  { label: 'mm a transposed 150x131x45', op: 'mm', k: 45, build: (mk) => [mk([45, 150]).t(), mk([45, 131])] },
  { label: 'mm b transposed 150x131x45', op: 'mm', k: 45, build: (mk) => [mk([150, 45]), mk([131, 45]).t()] },
  { label: 'mm both transposed 70x200x35', op: 'mm', k: 35, build: (mk) => [mk([35, 70]).t(), mk([200, 35]).t()] },
  { label: 'mm strided (narrowed) operands', op: 'mm', k: 33, build: (mk) => [mk([140, 61]).narrow(1, 3, 33), mk([33, 150]).narrow(1, 7, 133)] },
  { label: 'linear with bias [2,70,90] @ [110,90]^T', op: 'linear', k: 90, build: (mk) => [mk([2, 70, 90]), mk([110, 90]), mk([110])] },
  { label: 'linear without bias [131,19] @ [129,19]^T', op: 'linear', k: 19, build: (mk) => [mk([131, 19]), mk([129, 19]), null] },
  { label: 'addmm beta 0.5 alpha 2, self [M,N]', op: 'addmm', k: 50, build: (mk) => [mk([140, 133]), mk([140, 50]), mk([50, 133]), 0.5, 2] },
  { label: 'addmm beta 1 alpha 1, self [N]', op: 'addmm', k: 21, build: (mk) => [mk([133]), mk([129, 21]), mk([21, 133]), 1, 1] },
  { label: 'bmm [3,70,90] @ [3,90,110]', op: 'bmm', k: 90, build: (mk) => [mk([3, 70, 90]), mk([3, 90, 110])] },
  { label: 'bmm b transposed [3,70,90] @ [3,110,90]^T', op: 'bmm', k: 90, build: (mk) => [mk([3, 70, 90]), mk([3, 110, 90]).transpose(1, 2)] },
  { label: 'matmul broadcast batch [2,1,40,50] @ [3,50,130]', op: 'matmul', k: 50, build: (mk) => [mk([2, 1, 40, 50]), mk([3, 50, 130])] },
];

/**
 * Half-precision cases (float16, bfloat16): the loads widen to f32. One pipeline per dtype: the
 * packed float16 form takes SwiftShader about 25 s to compile (64 inlined roundings of the stores).
 */
const HALF_CASES: readonly Case[] = [mm(127, 129, 17), CASES.find((c) => c.label.startsWith('bmm [3,70,90]'))!];

/** Runs a case on webgpu and checks it against the float64 reference; returns the output (on the CPU). */
function check(c: Case, dtype: DType): number[] {
  const op = getOp(c.op);
  const refArgs = argsFor(c, dtype, 'cpu', true);
  const want = (dispatch(op, ...(refArgs as never[])) as Tensor).toFlatArray();
  const bound = (dispatch(op, ...(absArgs(refArgs) as never[])) as Tensor).toFlatArray();
  const got = dispatch(op, ...(argsFor(c, dtype, 'webgpu') as never[])) as Tensor;
  assert.equal(got.dtype, dtype, c.label);
  const g = got.to('cpu').toFlatArray();
  assert.equal(g.length, want.length, c.label);
  for (let i = 0; i < want.length; i++) {
    const tol = (OUT_ULP[dtype]! + 2 * (c.k + 2) * ACC_U) * bound[i]! + 1e-30;
    const err = Math.abs(g[i]! - want[i]!);
    if (!(err <= tol)) assert.fail(`${c.label} ${dtype}: element ${i} got ${g[i]}, want ${want[i]} (|err| ${err.toExponential(2)} > ${tol.toExponential(2)})`);
  }
  return g;
}

test('KILN_WEBGPU_GEMM_TILE=large: float32 products on the large form match a float64 reference', { skip }, () => {
  withTile('large', () => {
    for (const c of CASES) {
      const before = gemmStats.large;
      check(c, 'float32');
      assert.equal(gemmStats.large, before + 1, `${c.label}: one dispatch of the large form`);
    }
  });
  assert.ok(gemmPipelineKeys().some((k) => k.endsWith(',large')));
});

test('KILN_WEBGPU_GEMM_TILE=large: float16 and bfloat16 operands match a float64 reference', { skip }, () => {
  // float16 takes the subgroup-matrix kernels where the device has them (the H100 / H200 do):
  // turned off here so that the tiled kernel's large form runs.
  process.env.KILN_WEBGPU_SUBGROUP_MATRIX = '0';
  try {
    withTile('large', () => {
      for (const dtype of ['float16', 'bfloat16'] as const) {
        for (const c of HALF_CASES) {
          const before = gemmStats.large;
          check(c, dtype);
          assert.equal(gemmStats.large, before + 1, `${c.label} ${dtype}: one dispatch of the large form`);
        }
      }
    });
  } finally {
    delete process.env.KILN_WEBGPU_SUBGROUP_MATRIX;
  }
});

test('the large and small forms agree; small, and auto below 256 tiles or 128 rows / columns, take the small form', { skip }, () => {
  const c = CASES.find((x) => x.label.startsWith('addmm beta 0.5'))!;
  const large = withTile('large', () => check(c, 'float32'));
  const smallBefore = gemmStats.small;
  const small = withTile('small', () => check(c, 'float32'));
  assert.equal(gemmStats.small, smallBefore + 1);
  let worst = 0;
  for (let i = 0; i < large.length; i++) worst = Math.max(worst, Math.abs(large[i]! - small[i]!));
  assert.ok(worst < 1e-3, `large and small differ by ${worst}`);
  // auto: 64 batches of 2 x 2 tiles of 128x128 take the large form, 63 the small one; many
  // batches of products narrower than a tile keep the small one.
  for (const [nb, m, n, form] of [[64, 130, 129, 'large'], [63, 130, 129, 'small'], [300, 20, 18, 'small']] as const) {
    const bc: Case = { label: `bmm [${nb},${m},24] @ [${nb},24,${n}] auto`, op: 'bmm', k: 24, build: (mk) => [mk([nb, m, 24]), mk([nb, 24, n])] };
    const before = { ...gemmStats };
    withTile('auto', () => check(bc, 'float32'));
    assert.equal(gemmStats[form], before[form] + 1, bc.label);
  }
});

test('KILN_WEBGPU_GEMM_SPLIT_TILE large (the default) and small: split-K products on the large form (partial sums, then the combine) match a float64 reference', { skip }, () => {
  // Fewer than 256 output tiles and K of 256 or more: K is split; M and N of 128 or more take the
  // 128x128 form for the slices under this option.
  const split: readonly Case[] = [
    mm(130, 250, 600),
    { label: 'linear with bias [1,128,384] @ [200,384]^T', op: 'linear', k: 384, build: (mk) => [mk([1, 128, 384]), mk([200, 384]), mk([200])] },
    { label: 'addmm beta 0.5 alpha 2, self [M,N], K 520', op: 'addmm', k: 520, build: (mk) => [mk([140, 133]), mk([140, 520]), mk([520, 133]), 0.5, 2] },
  ];
  withEnv('KILN_WEBGPU_GEMM_SPLIT_TILE', 'large', () => {
    for (const c of split) check(c, 'float32');
  });
  assert.ok(gemmPipelineKeys().some((k) => k.endsWith(',partial,large')), 'a split-K pipeline of the large form ran');
  // The same products on 64x64 slices (KILN_WEBGPU_GEMM_SPLIT_TILE=small) agree with the reference too.
  withEnv('KILN_WEBGPU_GEMM_SPLIT_TILE', 'small', () => {
    for (const c of split) check(c, 'float32');
  });
});
