/**
 * The shared pointwise math tables (src/kernels/math) and the ops defined through them once
 * (composites.ts; one CASES entry each here): values against float64 references written here (special
 * values, large and tiny magnitudes), broadcasting and layouts, dtype promotion, gradcheck in
 * float64, kiln.compile equal to eager on every CPU path (JS, Wasm, native C), the CUDA C the
 * compiler generates compiled by nvcc where it is installed, eager CUDA on a GPU, and structural
 * checks that the tables and the op definitions cannot drift apart.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { getOp, hasOp, listOps } from '../src/ops/registry.js';
import { COMPOSITES } from '../src/kernels/math/composites.js';
import { JS_TEMPLATES } from '../src/kernels/math/js.js';
import { CUDA_TEMPLATES } from '../src/kernels/math/cuda.js';
import { C_TEMPLATES } from '../src/kernels/math/c.js';
import { WASM_TEMPLATES } from '../src/kernels/math/wasm.js';
import { M, renderText, type TextDialect } from '../src/kernels/math/expr.js';
import { expressionCatalog } from '../src/kernels/cuda/pointwise.js';
import { probeToolchain, setCpuPath, type CpuPath } from '../src/kernels/cpu/native/index.js';
import { H200_TARGET } from '../src/compile/codegen/cuda/configs.js';
import { generateCudaKernel } from '../src/compile/codegen/cuda/generate.js';
import { kernelLayout } from '../src/compile/codegen/cuda/layout.js';
import { findNvcc, nvccCheck } from '../src/compile/codegen/cuda/nvcc-check.js';
import { prelude } from '../src/kernels/cuda/fused/prelude.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { build } from './compile-cuda-codegen-graphs.js';
import { skipUnlessCuda } from './cuda-util.js';
import { makeTensor } from './helpers/make.js';

// ---------------------------------------------------------------------------------------------
// float64 references (written independently of the kernels: special cases first, then libm)

function logaddexpRef(a: number, b: number): number {
  if (Number.isNaN(a) || Number.isNaN(b)) return NaN;
  if (a === Infinity || b === Infinity) return Infinity;
  if (a === -Infinity) return b;
  if (b === -Infinity) return a;
  const m = Math.max(a, b);
  // log(e^a + e^b) = m + log(e^(a-m) + e^(b-m)), one of the two terms being 1.
  return m + Math.log1p(Math.exp(Math.min(a, b) - m));
}

/** Math.hypot: scaled, compensated, and inf with a NaN operand (ECMAScript, as C's hypot). */
const hypotRef = (a: number, b: number): number => Math.hypot(a, b);

type Fn2 = (a: Tensor, b: Tensor) => Tensor;

/** One composite op under test: its function, its reference, and the kernel each CPU path runs. */
interface Case {
  readonly fn: Fn2;
  readonly ref: (a: number, b: number) => number;
  readonly impl: Record<CpuPath, string>;
  /** Exact values torch defines: [a, b, result] (float64). */
  readonly exact: readonly (readonly [number, number, number])[];
  /** Float64 gradcheck inputs (shapes broadcast; values in [lo, hi]). */
  readonly grad: readonly [readonly number[], number, number][];
  /** Gradients at a == b == 1 and at (3, 4): [d/da, d/db] each. */
  readonly gradAt: readonly [readonly [number, number], readonly [number, number]];
}

const CASES = {
  logaddexp: {
    fn: kiln.logaddexp,
    ref: logaddexpRef,
    // log1p has no Wasm form (log(1 + x) would lose the small values): the group stays JavaScript.
    impl: { js: 'js', wasm: 'js', native: 'native' },
    exact: [
      [-Infinity, -Infinity, -Infinity],
      [Infinity, Infinity, Infinity],
      [0, 0, Math.LN2],
      [1000, 1000, 1000 + Math.LN2],
      [-1000, -1000, -1000 + Math.LN2],
      [5, -Infinity, 5],
      [-Infinity, 7, 7],
    ],
    grad: [
      [[3, 4], -5, 5],
      [[4], -5, 5],
    ],
    // e^a / (e^a + e^b): 1/2 each at a == b.
    gradAt: [
      [0.5, 0.5],
      [1 / (1 + Math.E), 1 / (1 + 1 / Math.E)],
    ],
  },
  hypot: {
    fn: kiln.hypot,
    ref: hypotRef,
    impl: { js: 'js', wasm: 'wasm', native: 'native' },
    exact: [
      [Infinity, NaN, Infinity],
      [NaN, -Infinity, Infinity],
      [-Infinity, NaN, Infinity],
      [3, -4, 5],
      [0, -0, 0],
      [5e-324, 0, 5e-324],
      [NaN, 0, NaN],
    ],
    grad: [
      [[2, 3, 1], 0.5, 3],
      [[4], -3, -0.5],
    ],
    // (a, b) / |(a, b)|.
    gradAt: [
      [Math.SQRT1_2, Math.SQRT1_2],
      [0.6, 0.8],
    ],
  },
} satisfies Record<string, Case>;
type Name = keyof typeof CASES;
const NAMES = Object.keys(CASES) as Name[];
const OPS: Record<Name, Fn2> = Object.fromEntries(NAMES.map((n) => [n, CASES[n].fn])) as Record<Name, Fn2>;
const REFS: Record<Name, (a: number, b: number) => number> = Object.fromEntries(NAMES.map((n) => [n, CASES[n].ref])) as Record<Name, (a: number, b: number) => number>;

/** Operand pairs: the special values each op defines, large and tiny magnitudes, ordinary values. */
const SPECIAL: readonly [number, number][] = [
  [-Infinity, -Infinity],
  [Infinity, Infinity],
  [-Infinity, Infinity],
  [Infinity, -Infinity],
  [Infinity, NaN],
  [NaN, Infinity],
  [-Infinity, NaN],
  [NaN, -Infinity],
  [NaN, 0],
  [1, NaN],
  [NaN, NaN],
  [-Infinity, 3],
  [2.5, -Infinity],
  [0, 0],
  [-0, -0],
  [3, 3],
  [3, 4],
  [-3, 4],
  [0, -40],
  [-40, 0],
  [1e30, 1e30],
  [2e38, 2e38],
  [3e38, 3e38],
  [-3e38, 1],
  [1e-30, 1e-30],
  [1e-40, 2e-40],
  [88, 88],
  [-100, -100.5],
  [20, -20],
];
const SPECIAL64: readonly [number, number][] = [...SPECIAL, [1e300, 1e300], [-1e300, 1e300], [700, 700], [-745, -745], [1e-300, 3e-300], [1e-310, 1e-310]];

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

function pairs(n: number, seed: number, scale: number, specials: readonly [number, number][]): [number[], number[]] {
  const r = lcg(seed);
  const a = specials.map((p) => p[0]);
  const b = specials.map((p) => p[1]);
  while (a.length < n) {
    a.push((r() - 0.5) * 2 * scale);
    b.push((r() - 0.5) * 2 * scale);
  }
  return [a, b];
}

/** got within rtol * |want| + atol of want; NaN matches NaN, infinities match exactly. */
function assertAll(got: readonly number[], want: readonly number[], rtol: number, atol: number, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < got.length; i++) {
    const g = got[i]!;
    const w = want[i]!;
    if (Number.isNaN(w)) assert.ok(Number.isNaN(g), `${what}[${i}]: got ${g}, expected NaN`);
    else if (!Number.isFinite(w)) assert.equal(g, w, `${what}[${i}]`);
    else assert.ok(Math.abs(g - w) <= rtol * Math.abs(w) + atol, `${what}[${i}]: got ${g}, expected ${w}`);
  }
}

/** The reference of op over two tensors' stored values, rounded to the output dtype's precision. */
function expected(name: Name, a: Tensor, b: Tensor): number[] {
  const x = a.toFlatArray();
  const y = b.toFlatArray();
  return x.map((v, i) => REFS[name](v, y[i]!));
}

/** Relative tolerance per result dtype: a few ulp of the kernels' compute type. */
const RTOL: Partial<Record<DType, number>> = { float64: 1e-15, float32: 1.2e-7, bfloat16: 4e-3, float16: 1e-3 };

// ---------------------------------------------------------------------------------------------
// Eager CPU

for (const name of NAMES) {
  test(`${name}: eager CPU against the float64 reference, special values and magnitudes (float64, float32, bfloat16)`, () => {
    for (const dtype of ['float64', 'float32', 'bfloat16'] as const) {
      const [va, vb] = pairs(200, 7, dtype === 'float64' ? 50 : 30, dtype === 'float64' ? SPECIAL64 : SPECIAL);
      const a = kiln.tensor(va, { dtype });
      const b = kiln.tensor(vb, { dtype });
      const out = OPS[name](a, b);
      assert.equal(out.dtype, dtype);
      // The reference from the stored (rounded) inputs, rounded to the dtype like the kernel's store.
      const want = kiln.tensor(expected(name, a, b), { dtype: 'float64' }).to(dtype).toFlatArray();
      // float64: the kernel's formula against the reference's, a few ulp; narrower dtypes: the
      // float64 result rounded once, so within one ulp of the rounded reference.
      assertAll(out.toFlatArray(), want, RTOL[dtype]!, 1e-300, `${name} ${dtype}`);
    }
  });
}

test('the values torch defines exactly (float64)', () => {
  const f64 = (v: number[]): Tensor => kiln.tensor(v, { dtype: 'float64' });
  for (const name of NAMES) {
    const { exact } = CASES[name];
    const got = OPS[name](f64(exact.map((e) => e[0])), f64(exact.map((e) => e[1]))).toFlatArray();
    assert.deepEqual(got, exact.map((e) => e[2]), name);
  }
});

test('broadcasting, non-contiguous inputs, methods and a zero-dim operand', () => {
  const r = lcg(3);
  const va = Array.from({ length: 12 }, () => (r() - 0.5) * 8);
  const vb = Array.from({ length: 20 }, () => (r() - 0.5) * 8);
  for (const name of NAMES) {
    const a = makeTensor(va, [3, 4, 1], 'float32', 'strided');
    const b = makeTensor(vb, [4, 5], 'float32', 'transposed');
    const out = (a as unknown as Record<Name, (o: Tensor) => Tensor>)[name](b);
    assert.deepEqual(out.shape, [3, 4, 5]);
    const want: number[] = [];
    const bf = b.toFlatArray();
    const af = a.toFlatArray();
    for (let i = 0; i < 3; i++) for (let j = 0; j < 4; j++) for (let k = 0; k < 5; k++) want.push(Math.fround(REFS[name](af[i * 4 + j]!, bf[j * 5 + k]!)));
    assertAll(out.toFlatArray(), want, RTOL.float32!, 0, `${name} broadcast`);
    // A zero-dim float64 operand does not promote a float32 tensor; a dimensioned one does.
    assert.equal(OPS[name](a, kiln.tensor(2, { dtype: 'float64' })).dtype, 'float32');
    assert.equal(OPS[name](a, kiln.tensor([2], { dtype: 'float64' })).dtype, 'float64');
  }
});

test('integer and bool inputs promote to float32, mixed floats to the wider', () => {
  const ints = [-7, -1, 0, 3, 100, 2000];
  const others = [5, -1, 0, -4, 100, -3];
  for (const name of NAMES) {
    for (const [da, db, want] of [
      ['int32', 'int32', 'float32'],
      ['int64', 'int32', 'float32'],
      ['uint8', 'int64', 'float32'],
      ['int32', 'float64', 'float64'],
      ['int64', 'bfloat16', 'bfloat16'],
      ['float32', 'float64', 'float64'],
      ['bfloat16', 'float16', 'float32'],
    ] as const) {
      // uint8 holds [0, 255]: magnitudes modulo 256 (2000 -> 208).
      const a = kiln.tensor(da === 'uint8' ? ints.map((v) => Math.abs(v) % 256) : ints, { dtype: da });
      const b = kiln.tensor(others, { dtype: db });
      const out = OPS[name](a, b);
      assert.equal(out.dtype, want, `${name}(${da}, ${db})`);
      const ref = kiln.tensor(expected(name, a, b), { dtype: 'float64' }).to(want).toFlatArray();
      assertAll(out.toFlatArray(), ref, RTOL[want]!, 0, `${name}(${da}, ${db})`);
    }
    const bools = OPS[name](kiln.tensor([true, false, true]), kiln.tensor([true, true, false]));
    assert.equal(bools.dtype, 'float32');
    assertAll(bools.toFlatArray(), [REFS[name](1, 1), REFS[name](0, 1), REFS[name](1, 0)].map(Math.fround), RTOL.float32!, 0, `${name}(bool, bool)`);
  }
});

// ---------------------------------------------------------------------------------------------
// Autograd

test('gradcheck in float64 (broadcast operands, in a chain) and the gradients at known points', () => {
  const r = lcg(11);
  const leaf = (shape: readonly number[], lo: number, hi: number): Tensor =>
    kiln.tensor(Array.from({ length: shape.reduce((p, q) => p * q, 1) }, () => lo + (hi - lo) * r()), { dtype: 'float64' }).reshape([...shape]).requiresGrad_();
  for (const name of NAMES) {
    const [[sa, loa, hia], [sb, lob, hib]] = CASES[name].grad;
    kiln.gradcheck((x, y) => OPS[name](x, y), [leaf(sa!, loa!, hia!), leaf(sb!, lob!, hib!)]);
    kiln.gradcheck((x, y) => OPS[name](x.mul(x), y).mul(x), [leaf([5], 0.5, 2), leaf([5], 0.5, 2)]);
    const a = kiln.tensor([1, 3], { dtype: 'float64' }).requiresGrad_();
    const b = kiln.tensor([1, 4], { dtype: 'float64' }).requiresGrad_();
    kiln.sum(OPS[name](a, b)).backward();
    const [at1, at34] = CASES[name].gradAt;
    assertAll(a.grad!.toFlatArray(), [at1[0], at34[0]], 1e-15, 0, `${name}: grad a`);
    assertAll(b.grad!.toFlatArray(), [at1[1], at34[1]], 1e-15, 0, `${name}: grad b`);
  }
});

// ---------------------------------------------------------------------------------------------
// kiln.compile on the CPU paths

const probe = probeToolchain();

/** The chosen config of every kernel of a compiled function's programs, from describe(). */
function kernelImpls(f: { programs(): { inference: readonly { describe(): string }[] } }): string[] {
  return f.programs().inference.flatMap((p) => [...p.describe().matchAll(/config (\{[^}]*\})/g)].map((m) => (JSON.parse(m[1]!) as { impl?: string }).impl ?? 'reduce'));
}

for (const path of ['js', 'wasm', 'native'] as const) {
  const skip = path === 'native' && !probe.ok ? `native cpu path unavailable: ${probe.reason}` : false;
  test(`kiln.compile equals eager in fused groups (${path} path)`, { skip }, () => {
    setCpuPath(path);
    try {
      for (const name of NAMES) {
        // The op inside a fused chain with a broadcast operand, over more than one chunk of columns
        // (no intermediate overflows float32: eager would round it to inf, a JS kernel keeps it).
        const fn = (x: Tensor, y: Tensor, s: Tensor): Tensor => OPS[name](x.mul(0.75), y.add(s)).mul(0.5).add(x);
        const [va, vb] = pairs(37 * 700, 5, 40, SPECIAL);
        const x = kiln.tensor(va, { dtype: 'float32' }).reshape([37, 700]);
        const y = kiln.tensor(vb, { dtype: 'float32' }).reshape([37, 700]);
        const s = kiln.tensor(Array.from({ length: 700 }, (_, i) => (i % 7) - 3), { dtype: 'float32' });
        const c = kiln.compile(fn);
        const got = c(x, y, s).toFlatArray();
        assert.deepEqual(kernelImpls(c), [CASES[name].impl[path]], `${name} ${path}: kernels`);
        // Eager rounds each op's result to float32; a fused kernel keeps it in its compute type
        // (float64 in JS; Wasm and C compute in float32): a few float32 ulp of the operands
        // (|values| up to ~85), absolute where the final add cancels.
        assertAll(got, fn(x, y, s).toFlatArray(), 1e-6, 3e-5, `${name} ${path}`);
      }
    } finally {
      setCpuPath(undefined);
    }
  });
}

test('kiln.compile equals eager in float64 and bfloat16', () => {
  for (const dtype of ['float64', 'bfloat16'] as const) {
    for (const name of NAMES) {
      const fn = (x: Tensor, y: Tensor): Tensor => OPS[name](x, y.neg()).add(1);
      const [va, vb] = pairs(300, 9, 30, dtype === 'float64' ? SPECIAL64 : SPECIAL);
      const x = kiln.tensor(va, { dtype });
      const y = kiln.tensor(vb, { dtype });
      // bfloat16: eager rounds the op's result before adding 1 (one bfloat16 ulp, absolute near 0).
      const [rtol, atol] = dtype === 'float64' ? [1e-15, 1e-15] : [8e-3, 1e-2];
      assertAll(kiln.compile(fn)(x, y).toFlatArray(), fn(x, y).toFlatArray(), rtol, atol, `${name} ${dtype}`);
    }
  }
});

// ---------------------------------------------------------------------------------------------
// CUDA: generated C compiled by nvcc (no GPU needed), values on a GPU

const nvcc = findNvcc();

test('the CUDA C the compiler generates for the composite ops compiles (nvcc)', { skip: nvcc ? false : 'nvcc is not on PATH' }, () => {
  const E = (dtype: DType): Tensor => kiln.empty([16, 40], { dtype });
  const graphs = NAMES.flatMap((name) => [
    ...(['float32', 'bfloat16', 'float64'] as const).map((dt) => build(`${name}_${dt}`, ((x: Tensor, y: Tensor) => OPS[name](x, y.mul(2)).mul(x)) as never, [E(dt), E(dt)])),
    build(`${name}_int`, ((x: Tensor, y: Tensor) => OPS[name](x, y).add(1)) as never, [E('int32'), E('int64')]),
  ]);
  const bodies = graphs.flatMap((cg) =>
    cg.sched.kernels.map((g, i) => {
      assert.ok(g.nodes.some((n) => COMPOSITES.has(n.op)), `${cg.name}: the op is fused`);
      const code = generateCudaKernel(g, cg.low, kernelLayout(g, (id) => cg.low.values.get(id)!), `${cg.name}_k${i}`, H200_TARGET);
      return code.candidates[0]!.body;
    }),
  );
  const r = nvccCheck([prelude('ptx') + bodies.join('\n\n')], 'sm_90', nvcc!);
  assert.deepEqual(r.errors, []);
});

test('eager cuda runs the text the compiler fuses for every composite op', () => {
  const catalog = expressionCatalog();
  for (const [name, c] of COMPOSITES) {
    for (const [compute, ct] of [
      ['float32', 'float'],
      ['float64', 'double'],
    ] as const) {
      const eager = catalog.find((e) => e.op === name && e.compute === compute);
      assert.ok(eager, `${name} ${ct} in the eager catalog`);
      const args = ['a', 'b', 'c'].slice(0, c.arity).map((expr) => ({ kind: 'value' as const, expr, dtype: compute, shape: [] }));
      for (const fast of [false, true]) assert.equal(eager.expr, CUDA_TEMPLATES.get(name)!(args, { out: compute, fast }), `${name} ${ct} fast=${fast}`);
    }
  }
});

const cudaSkip = skipUnlessCuda();

test('eager and compiled cuda match the float64 reference', { skip: cudaSkip }, () => {
  for (const dtype of ['float32', 'float64', 'bfloat16'] as const) {
    for (const name of NAMES) {
      const [va, vb] = pairs(5000, 13, 30, dtype === 'float64' ? SPECIAL64 : SPECIAL);
      const a = kiln.tensor(va, { dtype });
      const b = kiln.tensor(vb, { dtype });
      const want = kiln.tensor(expected(name, a, b), { dtype: 'float64' }).to(dtype).toFlatArray();
      const ga = a.to('cuda');
      const gb = b.to('cuda');
      const rtol = RTOL[dtype]! * 4; // libm's few ulp (expf, log1pf, sqrtf) on top of the formula's
      assertAll(OPS[name](ga, gb).toFlatArray(), want, rtol, 1e-300, `${name} ${dtype} eager cuda`);
      const c = kiln.compile((x: Tensor, y: Tensor) => OPS[name](x, y).add(0));
      assertAll(c(ga, gb).toFlatArray(), want, rtol, 1e-300, `${name} ${dtype} compiled cuda`);
    }
  }
  for (const name of NAMES) {
    const ints = OPS[name](kiln.tensor([1, -2, 300], { dtype: 'int32' }).to('cuda'), kiln.tensor([1, 5, 300], { dtype: 'int64' }).to('cuda'));
    assert.equal(ints.dtype, 'float32');
    assertAll(ints.toFlatArray(), [REFS[name](1, 1), REFS[name](-2, 5), REFS[name](300, 300)].map(Math.fround), 5e-7, 0, `${name} int cuda`);
  }
});

// ---------------------------------------------------------------------------------------------
// Structure: the tables and the op definitions cannot drift apart

/** Pointwise ops that run as extern calls (no fused form), with the reason. */
const NOT_IN_TABLE: Record<string, string> = {
  remainderScalar: 'scalar self (remainder(scalar, tensor)): extern',
  maskedFill: 'an indexing op tagged pointwise: extern',
};
/** Table entries that are not pointwise ops: conversions. */
const CASTS = ['toDtype', 'clone'];

test('every table entry is a registered op, every pointwise op has a table entry (or a stated reason)', () => {
  const jsKeys = [...JS_TEMPLATES.keys()];
  for (const op of jsKeys) {
    assert.ok(hasOp(op), `table entry ${op} has an op definition`);
    assert.ok(CASTS.includes(op) || (getOp(op).tags ?? []).includes('pointwise'), `table entry ${op} is a pointwise op`);
  }
  const pointwise = listOps().filter((o) => (o.tags ?? []).includes('pointwise') && !(o.tags ?? []).includes('inplace'));
  const missing = pointwise.filter((o) => !JS_TEMPLATES.has(o.name) && !(o.name in NOT_IN_TABLE)).map((o) => o.name);
  assert.deepEqual(missing, [], `pointwise ops without a math table entry: ${missing.join(', ')}`);
  const stale = Object.keys(NOT_IN_TABLE).filter((n) => JS_TEMPLATES.has(n) || !hasOp(n));
  assert.deepEqual(stale, [], 'NOT_IN_TABLE lists ops that are in the table or gone');
  // CUDA covers the JS table exactly; C and Wasm cover part of it (a group they lack stays JS).
  assert.deepEqual([...CUDA_TEMPLATES.keys()].sort(), [...jsKeys].sort());
  for (const k of [...C_TEMPLATES.keys(), ...WASM_TEMPLATES.keys()]) assert.ok(JS_TEMPLATES.has(k), `${k}: C/Wasm entry without a JS one`);
});

test('every composite is in every language table and is a complete op: definition, CPU and CUDA kernels, backward', () => {
  assert.ok(COMPOSITES.size >= 1);
  for (const [name, c] of COMPOSITES) {
    for (const [lang, table] of [
      ['js', JS_TEMPLATES],
      ['cuda', CUDA_TEMPLATES],
      ['c', C_TEMPLATES],
      ['wasm', WASM_TEMPLATES],
    ] as const) {
      assert.ok(table.has(name), `${name} in the ${lang} table`);
    }
    const op = getOp(name);
    assert.ok((op.tags ?? []).includes('pointwise'), `${name} is tagged pointwise`);
    assert.equal(op.args.filter((a) => a.type.startsWith('Tensor')).length, c.arity, `${name}: arity`);
    assert.ok(op.kernels.has('cpu') && op.kernels.has('cuda'), `${name}: cpu and cuda kernels`);
    assert.ok(op.backward, `${name}: backward formula`);
  }
});

test('a composite renders through each dialect primitive by primitive; a missing primitive declines it', () => {
  const calls: string[] = [];
  const dialect: TextDialect = {
    num: (v) => `#${v}`,
    op: (f, xs) => (f === 'log1p' ? null : `${f}(${xs.join(',')})`),
    cmp: (f, a, b) => `${f}(${a},${b})`,
    isinf: (x) => `inf?(${x})`,
    logic: (f, a, b) => `${f}(${a},${b})`,
    select: (c, a, b) => {
      calls.push(c);
      return `sel(${c},${a},${b})`;
    },
  };
  const e = M.select(M.or(M.isinf(M.arg(0)), M.lt(M.arg(1), 2)), M.max(M.arg(0), M.arg(1)), M.mul(M.sqrt(M.arg(1)), -0.5));
  assert.equal(renderText(e, ['x', 'y'], dialect), 'sel(or(inf?(x),lt(y,#2)),max(x,y),mul(sqrt(y),#-0.5))');
  assert.equal(renderText(M.add(M.arg(0), M.log1p(M.arg(1))), ['x', 'y'], dialect), null);
  assert.equal(calls.length, 1);
});
