/**
 * Vectorised webgpu pointwise kernels (kernels/webgpu/fused/vector.ts, issue #20): which layouts
 * get which vector plan (pure, no device), and, where an adapter computes (SwiftShader in CI),
 * that every vectorised launch writes exactly the bits of the scalar kernel (the same call with
 * KILN_WEBGPU_VEC_POINTWISE=0) and values close to a float64 cpu reference: odd sizes (every tail
 * length), broadcasts along and across the innermost dim, offsets that allow 2 or no lanes,
 * transposed operands, in-place ops on packed words, mixed storage kinds (casts, comparisons to
 * bool, uint8), eager one-node programs and kiln.compile'd chains, float32 / float16 / bfloat16.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { webgpu } from '../src/kernels/webgpu/device.js';
import { fusedStats, vectorGroups } from '../src/kernels/webgpu/fused/run.js';
import type { FusedLayout } from '../src/kernels/webgpu/fused/layout.js';
import type { FusedBinding } from '../src/kernels/webgpu/fused/render.js';
import { vectorPlan } from '../src/kernels/webgpu/fused/vector.js';
import type { StorageKind } from '../src/kernels/webgpu/storage.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { elementwiseForward } from '../src/bench/workloads.js';
import { tolFor } from './helpers/assert.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

// ------------------------------------------------------------------------------------------------
// The plan (no device)
// ------------------------------------------------------------------------------------------------

const pw = (oshape: number[], ost: number[][], offsets: number[]): FusedLayout => ({ kind: 'pointwise', oshape, ost, rshape: [], rst: ost.map(() => []), offsets });
const binds = (...kinds: StorageKind[]): FusedBinding[] => kinds.map((kind, i) => ({ kind, written: i === 0 }));
const ident = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
const plan = (L: FusedLayout, kinds: StorageKind[], caps: number[] | null = null): string => {
  const p = vectorPlan(L, 1, binds(...kinds), ident(kinds.length), caps);
  return p === null ? 'scalar' : `v${p.vec}:${p.operandVector.map((v) => (v ? 'v' : 's')).join('')}`;
};

test('vector plans: 4 lanes where offsets and strides allow, else 2, else the scalar kernel', () => {
  // Contiguous, any length (one coalesced dim: a scalar tail covers n % 4).
  assert.equal(plan(pw([1023], [[1], [1]], [0, 0]), ['f32', 'f32']), 'v4:vv');
  assert.equal(plan(pw([3], [[1], [1]], [0, 0]), ['bf16p', 'bf16p']), 'v4:vv');
  // A row broadcast ([M, N] + [N]) and a column broadcast ([M, N] * [M, 1]: stride 0 innermost).
  assert.equal(plan(pw([6, 12], [[12, 1], [12, 1], [0, 1]], [0, 0, 0]), ['f32', 'f32', 'f32']), 'v4:vvv');
  assert.equal(plan(pw([6, 12], [[12, 1], [1, 0]], [0, 0]), ['f16p', 'f16p']), 'v4:vs');
  // Rows that 4 does not divide: 2 lanes; odd rows: scalar (no vector may cross a row).
  assert.equal(plan(pw([6, 10], [[10, 1], [0, 1]], [0, 0]), ['f32', 'f32']), 'v2:vv');
  assert.equal(plan(pw([6, 7], [[7, 1], [0, 1]], [0, 0]), ['f32', 'f32']), 'scalar');
  // Offsets: a multiple of 2 but not of 4 gives 2 lanes; an odd one none.
  assert.equal(plan(pw([100], [[1], [1]], [0, 2]), ['f32', 'f32']), 'v2:vv');
  assert.equal(plan(pw([100], [[1], [1]], [0, 1]), ['f32', 'f32']), 'scalar');
  // An outer stride not a multiple of the lanes (a [6, 8] view of rows of 10).
  assert.equal(plan(pw([6, 8], [[8, 1], [10, 1]], [0, 0]), ['f32', 'f32']), 'v2:vv');
  // A transposed operand (innermost stride 6), and int64 outputs: scalar.
  assert.equal(plan(pw([6, 8], [[8, 1], [1, 6]], [0, 0]), ['f32', 'f32']), 'scalar');
  assert.equal(vectorPlan(pw([8], [[1], [1]], [0, 0]), 1, [{ kind: 'i64', written: true }, { kind: 'f32', written: false }], [0, 1], null), null);
  // 8-bit kinds only in whole words (4 lanes).
  assert.equal(plan(pw([100], [[1], [1]], [0, 0]), ['boolp', 'f32']), 'v4:vv');
  assert.equal(plan(pw([100], [[1], [1]], [0, 2]), ['f32', 'u8p']), 'scalar');
  // A single element (coalesced to stride 0): scalar. A broadcast output is impossible, an empty space too.
  assert.equal(plan(pw([1], [[0], [0]], [0, 0]), ['f32', 'f32']), 'scalar');
  assert.equal(plan(pw([0], [[0], [0]], [0, 0]), ['f32', 'f32']), 'scalar');
  // A buffer whose size is not a whole number of vectors.
  assert.equal(plan(pw([8], [[1], [1]], [0, 0]), ['f32', 'f32'], [512, 40]), 'v2:vv');
  assert.equal(plan(pw([8], [[1], [1]], [0, 0]), ['f32', 'f32'], [512, 512]), 'v4:vv');
  // Switched off.
  process.env.KILN_WEBGPU_VEC_POINTWISE = '0';
  try {
    assert.equal(plan(pw([1024], [[1], [1]], [0, 0]), ['f32', 'f32']), 'scalar');
  } finally {
    delete process.env.KILN_WEBGPU_VEC_POINTWISE;
  }
});

// ------------------------------------------------------------------------------------------------
// Values (an adapter that computes)
// ------------------------------------------------------------------------------------------------

/** fn's result computed with the vectorised kernels and with the scalar ones (and whether any launch vectorised). */
function ab(fn: () => Tensor): { vec: Tensor; scalar: Tensor; vectorised: number } {
  const before = fusedStats.vectorised;
  const vec = fn().to('cpu');
  const vectorised = fusedStats.vectorised - before;
  process.env.KILN_WEBGPU_VEC_POINTWISE = '0';
  try {
    const mid = fusedStats.vectorised;
    const scalar = fn().to('cpu');
    assert.equal(fusedStats.vectorised, mid, 'KILN_WEBGPU_VEC_POINTWISE=0 launched a vectorised kernel');
    return { vec, scalar, vectorised };
  } finally {
    delete process.env.KILN_WEBGPU_VEC_POINTWISE;
  }
}

/** The values' bits (float16 and bfloat16 as their float32 values, exact; NaN payloads as the store writes them). */
function bits(t: Tensor): number[] {
  const f = new Float32Array(t.to('float32').toFlatArray() as number[]);
  return [...new Uint32Array(f.buffer)];
}

function sameBits(label: string, a: Tensor, b: Tensor): void {
  assert.equal(a.dtype, b.dtype, label);
  assert.deepEqual([...a.shape], [...b.shape], label);
  const x = bits(a);
  const y = bits(b);
  const i = x.findIndex((v, k) => v !== y[k]);
  assert.equal(i, -1, `${label}: element ${i}: vectorised ${x[i]?.toString(16)} scalar ${y[i]?.toString(16)}`);
}

function close(label: string, got: Tensor, want: Tensor, scale = 1): void {
  const tol = tolFor(got.dtype);
  const g = got.to('float64').toFlatArray() as number[];
  const w = want.to('float64').toFlatArray() as number[];
  assert.equal(g.length, w.length, label);
  for (let i = 0; i < w.length; i++) {
    const a = g[i]!;
    const b = w[i]!;
    if (Number.isNaN(b)) assert.ok(Number.isNaN(a), `${label}: element ${i}: got ${a}, want NaN`);
    else if (a !== b) assert.ok(Math.abs(a - b) <= scale * (tol.atol + tol.rtol * Math.abs(b)), `${label}: element ${i}: got ${a}, want ${b}`);
  }
}

/** Samples in about [-4, 4] (a fixed linear congruential sequence) with special values among them (NaN, infinities, -0, a float16 subnormal, a float16 overflow). */
function sample(shape: number[], seed: number): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  let s = (seed * 2654435761) >>> 0;
  const data = Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32) * 8 - 4;
  });
  [Number.NaN, Infinity, -Infinity, -0, 3e-6, 70000].forEach((v, i) => {
    if (i * 3 + 1 < n) data[i * 3 + 1] = v;
  });
  return kiln.tensor(data).reshape(shape);
}

const FLOATS = ['float32', 'float16', 'bfloat16'] as const;
const SIZES = [1, 2, 3, 4, 5, 6, 7, 9, 13, 1023, 4099];

test('eager pointwise ops: vectorised launches write the scalar kernel\'s bits, every tail length, close to float64', { skip }, () => {
  for (const dt of FLOATS) {
    for (const n of SIZES) {
      const xc = sample([n], n);
      const yc = sample([n], n + 100);
      const x = xc.to(dt).to('webgpu');
      const y = yc.to(dt).to('webgpu');
      const label = `${dt} n=${n}`;
      const add = ab(() => kiln.add(x, y));
      sameBits(`add ${label}`, add.vec, add.scalar);
      assert.ok(add.vectorised > 0 || n === 1, `add ${label}: vectorised`);
      close(`add ${label}`, add.vec, kiln.add(xc.to(dt).to('float64'), yc.to(dt).to('float64')).to(dt));
      const sig = ab(() => kiln.sigmoid(x));
      sameBits(`sigmoid ${label}`, sig.vec, sig.scalar);
      const tanh = ab(() => kiln.tanh(kiln.mul(x, 0.5)));
      sameBits(`tanh ${label}`, tanh.vec, tanh.scalar);
    }
  }
});

test('broadcasts, offsets, transposes, in-place on packed words: the scalar kernel\'s bits', { skip }, () => {
  for (const dt of FLOATS) {
    const on = (t: Tensor): Tensor => t.to(dt).to('webgpu');
    const a = sample([6, 12], 1);
    const rowB = sample([12], 2);
    const colB = sample([6, 1], 3);
    const odd = sample([6, 10], 4);
    const oddRow = sample([10], 5);
    const flat = sample([103], 6);
    const cases: [string, () => Tensor, boolean][] = [
      ['row broadcast [6,12]+[12]', () => kiln.add(on(a), on(rowB)), true],
      ['column broadcast [6,12]*[6,1]', () => kiln.mul(on(a), on(colB)), true],
      ['rows of 10 (2 lanes)', () => kiln.sub(on(odd), on(oddRow)), true],
      ['offset 4 (4 lanes, tail)', () => kiln.mul(on(flat).narrow(0, 4, 97), 3), true],
      ['offset 2 (2 lanes)', () => kiln.mul(on(flat).narrow(0, 2, 99), 3), true],
      ['offset 1 (scalar)', () => kiln.mul(on(flat).narrow(0, 1, 100), 3), false],
      ['transposed operand (scalar)', () => kiln.add(on(a).t().contiguous(), on(a.t())), false],
      ['in place add_', () => on(a).add_(on(rowB)), true],
      ['in place mul_ scalar, odd length', () => on(flat).mul_(0.75), true],
      ['clamp (two broadcast scalars)', () => kiln.clamp(on(a), -1, 1), true],
      ['where(bool, x, y)', () => kiln.where(kiln.gt(on(a), 0), on(a), on(rowB)), true],
    ];
    for (const [label, fn, vectorised] of cases) {
      const r = ab(fn);
      sameBits(`${dt} ${label}`, r.vec, r.scalar);
      assert.equal(r.vectorised > 0, vectorised, `${dt} ${label}: vectorised`);
    }
    // A reference for the in-place and broadcast forms.
    close(`${dt} in place add_`, on(a).add_(on(rowB)).to('cpu'), kiln.add(a.to(dt).to('float64'), rowB.to(dt).to('float64')).to(dt));
    close(`${dt} column broadcast`, kiln.mul(on(a), on(colB)).to('cpu'), kiln.mul(a.to(dt).to('float64'), colB.to(dt).to('float64')).to(dt));
  }
});

test('mixed storage kinds: casts between float32 and 16-bit, comparisons to bool, uint8 and int32 arithmetic', { skip }, () => {
  for (const n of [5, 8, 1027]) {
    const xc = sample([n], 7 + n);
    const x = xc.to('webgpu');
    const cases: [string, () => Tensor][] = [
      ['float32 -> bfloat16', () => x.to('bfloat16')],
      ['float32 -> float16', () => x.to('float16')],
      ['bfloat16 -> float32', () => x.to('bfloat16').to('float32')],
      ['float16 -> bfloat16', () => x.to('float16').to('bfloat16')],
      ['x > 0 (bool)', () => kiln.gt(x, 0)],
      ['logical_not (bool -> bool)', () => kiln.logicalNot(kiln.gt(x, 0))],
      ['uint8 add (wraps)', () => kiln.add(kiln.arange(n, { dtype: 'uint8' }).to('webgpu'), 200)],
      ['int32 mul', () => kiln.mul(kiln.arange(n, { dtype: 'int32' }).to('webgpu'), -7)],
    ];
    for (const [label, fn] of cases) {
      const r = ab(fn);
      sameBits(`${label} n=${n}`, r.vec, r.scalar);
      assert.ok(r.vectorised > 0, `${label} n=${n}: vectorised`);
    }
    close(`bfloat16 cast n=${n}`, x.to('bfloat16').to('cpu'), xc.to('bfloat16'));
    close(`float16 cast n=${n}`, x.to('float16').to('cpu'), xc.to('float16'));
    assert.deepEqual(kiln.gt(x, 0).to('cpu').toFlatArray(), kiln.gt(xc, 0).toFlatArray());
    assert.deepEqual(kiln.add(kiln.arange(n, { dtype: 'uint8' }).to('webgpu'), 200).to('cpu').toFlatArray(), kiln.add(kiln.arange(n, { dtype: 'uint8' }), 200).toFlatArray());
  }
});

test('the compiled elementwise chain (the elementwise-4096 workload\'s) vectorised: the scalar kernel\'s bits, close to float64', { skip }, () => {
  for (const dt of FLOATS) {
    for (const shape of [[33, 35], [16, 16], [3, 1]]) {
      const xc = sample(shape, shape[0]!);
      const x = xc.to(dt).to('webgpu');
      const f = kiln.compile(elementwiseForward, { name: `vec-ew-${dt}-${shape.join('x')}` });
      const r = ab(() => kiln.noGrad(() => f(x)));
      sameBits(`compiled ${dt} ${shape.join('x')}`, r.vec, r.scalar);
      assert.ok(r.vectorised > 0, `compiled ${dt} ${shape.join('x')}: vectorised`);
      close(`compiled ${dt} ${shape.join('x')}`, r.vec, elementwiseForward(xc.to(dt).to('float64')).to(dt), 2);
    }
  }
});

/** fn's result (on the cpu) with the environment option `name` set to `value`. */
function withEnv(name: string, value: number, fn: () => Tensor): Tensor {
  process.env[name] = String(value);
  try {
    return fn().to('cpu');
  } finally {
    delete process.env[name];
  }
}
const withSteps = (steps: number, fn: () => Tensor): Tensor => withEnv('KILN_WEBGPU_VEC_STEPS', steps, fn);

test('several vectors per invocation step (KILN_WEBGPU_VEC_STEPS): the bits of one, whole and partial steps, tails', { skip }, () => {
  // With 256 invocations, 4 lanes and 3 steps a workgroup step covers 3072 elements: sizes below
  // one step, at whole steps, just past them (a partial last step) and across several workgroups.
  const sizes = [5, 1023, 3072, 3075, 4099, 7175, 20483];
  for (const dt of FLOATS) {
    for (const n of sizes) {
      const x = sample([n], n).to(dt).to('webgpu');
      const y = sample([n], n + 7).to(dt).to('webgpu');
      const label = `${dt} n=${n}`;
      const one = withSteps(1, () => kiln.add(kiln.mul(x, y), kiln.tanh(x)));
      for (const steps of [2, 3, 4]) {
        const before = fusedStats.rendered;
        const many = withSteps(steps, () => kiln.add(kiln.mul(x, y), kiln.tanh(x)));
        sameBits(`${label} steps=${steps}`, many, one);
        if (n === sizes[0] && dt === FLOATS[0]) assert.ok(fusedStats.rendered > before, `steps=${steps}: a pipeline of its own`);
      }
    }
  }
  // A broadcast operand (one element per vector) and a row broadcast, 2 lanes, in place.
  const a = sample([300, 10], 11).to('webgpu');
  const col = sample([300, 1], 12).to('webgpu');
  const row = sample([10], 13).to('webgpu');
  for (const steps of [2, 4]) {
    sameBits(`column broadcast steps=${steps}`, withSteps(steps, () => kiln.mul(a, col)), withSteps(1, () => kiln.mul(a, col)));
    sameBits(`row broadcast steps=${steps}`, withSteps(steps, () => kiln.sub(a, row)), withSteps(1, () => kiln.sub(a, row)));
    sameBits(`in place steps=${steps}`, withSteps(steps, () => a.clone().mul_(0.5)), withSteps(1, () => a.clone().mul_(0.5)));
  }
  // The compiled elementwise chain, against float64 as well.
  for (const dt of FLOATS) {
    const xc = sample([97, 131], 5);
    const x = xc.to(dt).to('webgpu');
    const f = kiln.compile(elementwiseForward, { name: `vec-steps-ew-${dt}` });
    const one = withSteps(1, () => kiln.noGrad(() => f(x)));
    for (const steps of [2, 4]) sameBits(`compiled ${dt} steps=${steps}`, withSteps(steps, () => kiln.noGrad(() => f(x))), one);
    close(`compiled ${dt} steps=4`, withSteps(4, () => kiln.noGrad(() => f(x))), elementwiseForward(xc.to(dt).to('float64')).to(dt), 2);
  }
});

test('vectorised launches whose every binding is native float16 take at most KILN_WEBGPU_VEC16_GROUPS workgroups; others only the dispatch limit', () => {
  const saved = process.env.KILN_WEBGPU_VEC16_GROUPS;
  try {
    delete process.env.KILN_WEBGPU_VEC16_GROUPS;
    assert.equal(vectorGroups(16384, binds('f16', 'f16')), 8192);
    assert.equal(vectorGroups(4000, binds('f16', 'f16')), 4000);
    assert.equal(vectorGroups(16384, binds('f32', 'f32')), 16384);
    assert.equal(vectorGroups(16384, binds('f16', 'f32')), 16384);
    assert.equal(vectorGroups(16384, binds('f16p', 'f16p')), 16384);
    assert.equal(vectorGroups(100000, binds('f32', 'f32')), 65535);
    process.env.KILN_WEBGPU_VEC16_GROUPS = '3';
    assert.equal(vectorGroups(16384, binds('f16', 'f16', 'f16')), 3);
    process.env.KILN_WEBGPU_VEC16_GROUPS = '100000';
    assert.equal(vectorGroups(100000, binds('f16', 'f16')), 65535);
  } finally {
    if (saved === undefined) delete process.env.KILN_WEBGPU_VEC16_GROUPS;
    else process.env.KILN_WEBGPU_VEC16_GROUPS = saved;
  }
});

const withCap = (cap: number, fn: () => Tensor): Tensor => withEnv('KILN_WEBGPU_VEC16_GROUPS', cap, fn);

test('float16 vectorised launches capped at 1, 2 or 3 workgroups (the grid-stride loop covers the rest): the uncapped bits', { skip }, (t) => {
  // The cap applies to native float16 bindings only (the packed form without shader-f16 is not capped).
  if (!webgpu().hasFeature('shader-f16')) {
    t.skip('the adapter has no shader-f16');
    return;
  }
  // 256 invocations x 4 lanes cover 1024 elements a workgroup step: these span 1 to 21 steps and end mid-vector.
  for (const n of [5, 1024, 3075, 20483]) {
    const x = sample([n], n).to('float16').to('webgpu');
    const y = sample([n], n + 3).to('float16').to('webgpu');
    const fn = (): Tensor => kiln.add(kiln.mul(x, y), kiln.tanh(x));
    const full = withCap(65535, fn);
    for (const cap of [1, 2, 3]) sameBits(`float16 n=${n} cap=${cap}`, withCap(cap, fn), full);
  }
});
