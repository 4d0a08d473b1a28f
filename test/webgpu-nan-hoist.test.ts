/**
 * NaN checks hoisted to the stores of compiled webgpu pointwise kernels (KILN_WEBGPU_NAN_HOIST,
 * kernels/webgpu/fused/nan-hoist.ts).
 *
 * Without an adapter: the plan on hand-built groups, where it must hoist (the elementwise-4096
 * chain, a clean argument with another input added after) and where it must not (an argument that
 * can be NaN from numbers, inf * 0 or inf - inf; an output that does not propagate NaN: where,
 * maximum, a comparison; a node that reaches such an output among others; reduce groups).
 *
 * With an adapter (SwiftShader in CI, Dawn/Vulkan on the GPU): compiled functions with the hoist on
 * and off return the same bits at every element, NaN where either is NaN (which NaN is not
 * specified), over inputs with NaN, +-inf, +-0 and large values, in float32 and float16; and the
 * results at NaN and inf are the cpu's.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { WgslProgram } from '../src/compile/codegen/wgsl/program.js';
import type { FusedGroup, FusedNode } from '../src/kernels/webgpu/fused/group.js';
import { nanHoistPlan } from '../src/kernels/webgpu/fused/nan-hoist.js';
import { setOption } from '../src/runtime/config.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { elementwiseForward } from '../src/bench/workloads.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

// --- the plan, on hand-built groups -------------------------------------------------------------

type A = FusedNode['args'][number];
const v = (id: number): A => ({ kind: 'value', id });
const c = (value: unknown): A => ({ kind: 'const', value });
const node = (out: number, op: string, ...args: A[]): FusedNode => ({ kind: 'pointwise', op, args, outputs: [out] });

function group(nodes: FusedNode[], inputs: number[], outputs: number[], dtypes: Record<number, DType> = {}, kind: 'pointwise' | 'reduce' = 'pointwise'): FusedGroup {
  return { kind, nodes, rowScalars: new Set(), inputs, outputs, value: (id) => ({ dtype: dtypes[id] ?? 'float32', shape: [8] }), fastMath: 'exp2', nanHoist: true };
}

test('nan hoist plan: the elementwise-4096 chain hoists all four checks to one test of x', () => {
  // y = x*1.5+0.5; relu(y)*sigmoid(x) + tanh(x*0.5) - exp(-(x*x))*0.1; *2 - 1
  const g = group(
    [
      node(1, 'mul', v(0), c(1.5)),
      node(2, 'add', v(1), c(0.5), c(1)),
      node(3, 'relu', v(2)),
      node(4, 'sigmoid', v(0)),
      node(5, 'mul', v(3), v(4)),
      node(6, 'mul', v(0), c(0.5)),
      node(7, 'tanh', v(6)),
      node(8, 'add', v(5), v(7), c(1)),
      node(9, 'mul', v(0), v(0)),
      node(10, 'neg', v(9)),
      node(11, 'exp', v(10)),
      node(12, 'mul', v(11), c(0.1)),
      node(13, 'sub', v(8), v(12), c(1)),
      node(14, 'mul', v(13), c(2)),
      node(15, 'sub', v(14), c(1), c(1)),
    ],
    [0],
    [15],
  );
  const p = nanHoistPlan(g);
  assert.ok(p !== null);
  assert.deepEqual([...p.unchecked].sort((a, b) => a - b), [3, 4, 7, 11]);
  assert.deepEqual(p.storeChecks.get(15), [0]);
});

test('nan hoist plan: a clean argument with another input added after is tested on its own input', () => {
  const p = nanHoistPlan(group([node(2, 'exp', v(0)), node(3, 'add', v(2), v(1), c(1))], [0, 1], [3]));
  assert.deepEqual(p && [...p.unchecked], [2]);
  assert.deepEqual(p?.storeChecks.get(3), [0]);
});

test('nan hoist plan: arguments that can be NaN from numbers keep their check', () => {
  // inf - inf, inf * 0, inf * y: NaN with no NaN input.
  assert.equal(nanHoistPlan(group([node(2, 'add', v(0), v(1), c(1)), node(3, 'exp', v(2))], [0, 1], [3])), null);
  assert.equal(nanHoistPlan(group([node(1, 'mul', v(0), c(0)), node(2, 'tanh', v(1))], [0], [2])), null);
  assert.equal(nanHoistPlan(group([node(2, 'mul', v(0), v(1)), node(3, 'sigmoid', v(2))], [0, 1], [3])), null);
  assert.equal(nanHoistPlan(group([node(1, 'mul', v(0), c(Infinity)), node(2, 'exp', v(1))], [0], [2])), null);
  // 1 + 0 * x: alpha scales the value.
  assert.equal(nanHoistPlan(group([node(1, 'add', c(1), v(0), c(0)), node(2, 'exp', v(1))], [0], [2])), null);
  // An integer input is not a float that could carry NaN to the test.
  assert.equal(nanHoistPlan(group([node(1, 'toDtype', v(0)), node(2, 'exp', v(1))], [0], [2], { 0: 'int32' })), null);
});

test('nan hoist plan: outputs that do not propagate NaN keep the checks of everything before them', () => {
  // where(cond, exp(x), 0): a NaN x where cond is false is 0 in torch, not NaN.
  assert.equal(nanHoistPlan(group([node(2, 'exp', v(0)), node(3, 'where', v(1), v(2), c(0))], [0, 1], [3], { 1: 'bool' })), null);
  assert.equal(nanHoistPlan(group([node(2, 'tanh', v(0)), node(3, 'maximum', v(2), v(1))], [0, 1], [3])), null);
  assert.equal(nanHoistPlan(group([node(1, 'sigmoid', v(0)), node(2, 'gt', v(1), c(0.5))], [0], [2], { 2: 'bool' })), null);
  // exp(x) stored, and also feeding a where: the node reaches a non-propagating output, so it keeps its check.
  const p = nanHoistPlan(group([node(2, 'exp', v(0)), node(3, 'where', v(1), v(2), c(0)), node(4, 'tanh', v(0))], [0, 1], [2, 3, 4], { 1: 'bool' }));
  assert.deepEqual(p && [...p.unchecked], [4]);
  assert.equal(p?.storeChecks.get(2), undefined);
  assert.deepEqual(p?.storeChecks.get(4), [0]);
});

test('nan hoist plan: reduce groups and groups with prerendered nodes are left as they are', () => {
  assert.equal(nanHoistPlan(group([node(1, 'exp', v(0))], [0], [1], {}, 'reduce')), null);
  assert.equal(nanHoistPlan(group([{ ...node(1, 'exp', v(0)), expr: 'kiln_fexp(v0)' }], [0], [1])), null);
});

// --- compiled kernels, hoist on and off ---------------------------------------------------------

/** fn compiled with the hoist on or off (a fresh compile), its values on x..., and its WGSL. */
function compiled(hoist: boolean, name: string, fn: (...xs: Tensor[]) => Tensor, xs: Tensor[]): { values: number[]; wgsl: string } {
  setOption('KILN_WEBGPU_NAN_HOIST', hoist);
  try {
    const f = kiln.compile(fn, { name: `${name}-${hoist ? 'hoist' : 'checks'}` });
    const values = kiln.noGrad(() => f(...xs.map((x) => x.to('webgpu')))).to('cpu').toFlatArray() as number[];
    const program = f.programs().inference[0] as WgslProgram | undefined;
    return { values, wgsl: (program?.seed().sources ?? []).map((s) => s.source).join('\n') };
  } finally {
    setOption('KILN_WEBGPU_NAN_HOIST', undefined);
  }
}

/** Values with NaN, +-inf, +-0, large and ordinary numbers, in a seeded order. */
function edgy(n: number, seed: number): number[] {
  const special = [Number.NaN, Infinity, -Infinity, 0, -0, 1e30, -1e30, 88.7, -88.7, 0.55, -0.55, 1e-40];
  const g = new kiln.Generator(seed);
  const r = kiln.randn([n], { generator: g }).toFlatArray() as number[];
  return r.map((x, i) => (i % 5 === 0 ? special[(i / 5) % special.length]! : 4 * x));
}

const CASES: readonly { name: string; fn: (...xs: Tensor[]) => Tensor; inputs: number; hoists: boolean }[] = [
  { name: 'elementwise', fn: elementwiseForward, inputs: 1, hoists: true },
  { name: 'exp-plus-y', fn: (x, y) => kiln.add(kiln.exp(kiln.mul(x, 0.5)), y!), inputs: 2, hoists: true },
  { name: 'relu-sigmoid-tanh', fn: (x) => kiln.sub(kiln.mul(kiln.relu(kiln.mul(x, 2)), kiln.sigmoid(x)), kiln.tanh(kiln.neg(x))), inputs: 1, hoists: true },
  { name: 'exp-of-sum', fn: (x, y) => kiln.exp(kiln.add(x, y!)), inputs: 2, hoists: false },
  { name: 'where-exp', fn: (x, y) => kiln.where(kiln.gt(y!, 0), kiln.exp(x), 0), inputs: 2, hoists: false },
  { name: 'max-tanh', fn: (x, y) => kiln.maximum(kiln.tanh(x), y!), inputs: 2, hoists: false },
];

const sameOrBothNaN = (a: number, b: number): boolean => Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));

for (const dtype of ['float32', 'float16'] as const) {
  test(`nan hoist (${dtype}): compiled kernels give the same values with the checks hoisted or in place`, { skip }, () => {
    const failures: string[] = [];
    for (const cs of CASES) {
      const xs = Array.from({ length: cs.inputs }, (_, k) => kiln.tensor(edgy(600, 7 + k)).to(dtype));
      const on = compiled(true, `nh-${cs.name}-${dtype}`, cs.fn, xs);
      const off = compiled(false, `nh-${cs.name}-${dtype}`, cs.fn, xs);
      // The hoisted form is what runs where the plan allows it, and only there.
      assert.equal(/kiln_f(exp|sigmoid|tanh)_nn\(/.test(on.wgsl), cs.hoists, `${cs.name}: hoisted form present`);
      assert.ok(!/_nn\(/.test(off.wgsl), `${cs.name}: unchecked form with the hoist off`);
      const cpu = cs.fn(...xs).toFlatArray() as number[];
      on.values.forEach((a, i) => {
        if (!sameOrBothNaN(a, off.values[i]!)) failures.push(`${cs.name}[${i}] (${xs.map((x) => x.toFlatArray()[i]).join(', ')}): hoisted ${a}, in place ${off.values[i]}`);
        // NaN where the cpu (torch's semantics) has NaN, and only there.
        if (Number.isNaN(a) !== Number.isNaN(cpu[i]!)) failures.push(`${cs.name}[${i}] (${xs.map((x) => x.toFlatArray()[i]).join(', ')}): hoisted ${a}, cpu ${cpu[i]}`);
      });
    }
    assert.deepEqual(failures.slice(0, 10), []);
  });
}
