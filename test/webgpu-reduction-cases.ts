/**
 * The reduction cases the webgpu tests run, eager and compiled: every reduction the webgpu kernels
 * register (sum, mean, prod, amax, amin, max, min, max/min with a dim, argmax, argmin, softmax,
 * logSoftmax) on every dtype they compute, over layouts that reach every path of the renderer:
 * odd sizes, long rows (the workgroup strategy), short rows and many rows read across (the thread
 * strategy), transposed and step-sliced inputs, keepdim, several dims, 0-d and single-element
 * inputs. And the functions the compile tests run on webgpu (pointwise chains with casts, row
 * kernels, a small MLP with softmax). Inputs are built on the CPU; a test moves them.
 */
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';

export interface RedCase {
  readonly label: string;
  readonly dtype: DType;
  /** The input on the CPU. */
  readonly input: Tensor;
  /** The op on an input (its results as a list). */
  readonly run: (x: Tensor) => Tensor[];
  /** Results are indices (compared exactly). */
  readonly indices?: readonly number[];
}

const list = (r: unknown): Tensor[] => {
  if (Array.isArray(r)) return r as Tensor[];
  if (r && typeof r === 'object' && 'values' in r && 'indices' in r) return [(r as { values: Tensor }).values, (r as { indices: Tensor }).indices];
  return [r as Tensor];
};

function input(dtype: DType, shape: number[], layout: 'contiguous' | 'transposed' | 'stepped', seed: number): Tensor {
  kiln.manualSeed(seed);
  const make = (s: number[]): Tensor => (dtype === 'int32' || dtype === 'uint8' ? kiln.randint(dtype === 'uint8' ? 0 : -50, 50, s, { dtype }) : kiln.randn(s).to(dtype));
  if (layout === 'contiguous') return make(shape);
  if (layout === 'transposed') return make([...shape].reverse()).permute([...shape.keys()].reverse());
  // Every other element of the last dim (stride 2) of a tensor twice as wide.
  const base = make([...shape.slice(0, -1), shape[shape.length - 1]! * 2]);
  return kiln.slice(base, -1, 0, null, 2);
}

const FLOATS: readonly DType[] = ['float32', 'float16', 'bfloat16'];
const INTS: readonly DType[] = ['int32', 'uint8'];

export function reductionCases(): RedCase[] {
  const cases: RedCase[] = [];
  const layouts: [string, number[], 'contiguous' | 'transposed' | 'stepped'][] = [
    ['odd', [3, 37, 5], 'contiguous'],
    ['transposed', [5, 7, 33], 'transposed'],
    ['stepped', [6, 45], 'stepped'],
    ['long-rows', [3, 1531], 'contiguous'],
  ];
  let seed = 1;
  for (const dtype of [...FLOATS, ...INTS]) {
    const isF = FLOATS.includes(dtype);
    for (const [name, shape, layout] of layouts) {
      const x = input(dtype, shape, layout, seed++);
      const r = shape.length;
      const add = (label: string, run: (x: Tensor) => unknown, indices?: number[]): void => void cases.push({ label: `${label} ${dtype} ${name}${JSON.stringify(shape)}`, dtype, input: x, run: (t) => list(run(t)), indices });
      if (isF) {
        add('sum(-1)', (t) => kiln.sum(t, -1));
        add('sum(0, keepdim)', (t) => kiln.sum(t, 0, true));
        add('sum()', (t) => kiln.sum(t));
        add('mean(-1)', (t) => kiln.mean(t, -1));
        add('mean([0,-1], keepdim)', (t) => kiln.mean(t, [0, r - 1], true));
        if (dtype === 'float32') add('sum(dtype f16)', (t) => kiln.sum(t, -1, false, 'float16'));
        else add('sum(dtype f32)', (t) => kiln.sum(t, -1, false, 'float32'));
        add('softmax(-1)', (t) => kiln.softmax(t, -1));
        add('softmax(0)', (t) => kiln.softmax(t, 0));
        add('logSoftmax(-1)', (t) => kiln.logSoftmax(t, -1));
        if (dtype !== 'float32') add('softmax(-1, float32)', (t) => kiln.softmax(t, -1, 'float32'));
        if (name === 'odd' && dtype === 'float32') add('prod(1)', (t) => kiln.prod(kiln.add(kiln.mul(t, 0.05), 1), 1));
      }
      add('amax(-1)', (t) => kiln.amax(t, -1));
      add('amin([0], keepdim)', (t) => kiln.amin(t, [0], true));
      add('max()', (t) => kiln.max(t));
      add('min()', (t) => kiln.min(t));
      add('max(-1)', (t) => kiln.max(t, -1), [1]);
      add('min(0, keepdim)', (t) => kiln.min(t, 0, true), [1]);
      add('argmax(-1)', (t) => kiln.argmax(t, -1), [0]);
      add('argmin()', (t) => kiln.argmin(t), [0]);
    }
  }
  // Many short rows read across (the thread strategy), a 0-d input, a single element, an empty dim.
  const across = input('float32', [40, 9000], 'contiguous', 99);
  cases.push({ label: 'sum(0) float32 [40,9000] (rows read across)', dtype: 'float32', input: across, run: (t) => [kiln.sum(t, 0)] });
  cases.push({ label: 'amax(0) float32 [40,9000] (rows read across)', dtype: 'float32', input: across, run: (t) => [kiln.amax(t, 0)] });
  cases.push({ label: 'softmax(0) float32 [40,9000]', dtype: 'float32', input: across, run: (t) => [kiln.softmax(t, 0)] });
  const scalar = kiln.tensor(2.5);
  cases.push({ label: 'sum 0-d', dtype: 'float32', input: scalar, run: (t) => [kiln.sum(t)] });
  cases.push({ label: 'softmax 0-d', dtype: 'float32', input: scalar, run: (t) => [kiln.softmax(t, 0)] });
  cases.push({ label: 'max(0) [1]', dtype: 'float32', input: kiln.tensor([3]), run: (t) => list(kiln.max(t, 0)), indices: [1] });
  cases.push({ label: 'sum over an empty dim', dtype: 'float32', input: kiln.zeros([3, 0]), run: (t) => [kiln.sum(t, 1), kiln.mean(t, 1)] });
  // NaN propagates through amax/amin/max/min and sums; max/min with a dim and argmax/argmin give the first NaN's index.
  kiln.manualSeed(5);
  const nan = kiln.randn([3, 300]);
  const nanData = nan.toFlatArray() as number[];
  for (const i of [7, 123, 250, 311, 312, 899]) nanData[i] = NaN;
  const withNan = kiln.tensor(nanData).reshape([3, 300]);
  for (const dtype of FLOATS) {
    const x = withNan.to(dtype);
    const add = (label: string, run: (t: Tensor) => unknown, indices?: number[]): void => void cases.push({ label: `${label} ${dtype} with NaN`, dtype, input: x, run: (t) => list(run(t)), indices });
    add('amax(-1)', (t) => kiln.amax(t, -1));
    add('amin(0)', (t) => kiln.amin(t, 0));
    add('max()', (t) => kiln.max(t));
    add('sum(-1)', (t) => kiln.sum(t, -1));
    add('max(-1)', (t) => kiln.max(t, -1), [1]);
    add('argmin(-1)', (t) => kiln.argmin(t, -1), [0]);
    add('argmax()', (t) => kiln.argmax(t), [0]);
    add('softmax(-1)', (t) => kiln.softmax(t, -1));
  }
  return cases;
}

export interface CompileCase {
  readonly label: string;
  readonly fn: (...xs: Tensor[]) => Tensor | Tensor[];
  /** Inputs on the CPU. */
  readonly inputs: readonly Tensor[];
  /** A reference on the CPU (default: fn itself, eager). */
  readonly reference?: (...xs: Tensor[]) => Tensor | Tensor[];
  /** Tolerance (default: tolFor the result's dtype). */
  readonly tol?: number;
}

/** A two-layer MLP with softmax, its linears written as broadcast multiply and sum (fused on webgpu). */
function mlpFused(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor): Tensor {
  const h = kiln.relu(kiln.add(kiln.sum(kiln.mul(kiln.unsqueeze(x, 2), kiln.unsqueeze(w1, 0)), 1), b1));
  const logits = kiln.add(kiln.sum(kiln.mul(kiln.unsqueeze(h, 2), kiln.unsqueeze(w2, 0)), 1), b2);
  return kiln.softmax(logits, -1);
}

/** The same MLP with matmuls (the CPU reference, and the webgpu case where webgpu has a GEMM). */
export function mlpLinear(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor): Tensor {
  const h = kiln.relu(kiln.add(kiln.matmul(x, w1), b1));
  return kiln.softmax(kiln.add(kiln.matmul(h, w2), b2), -1);
}

export function mlpInputs(): Tensor[] {
  kiln.manualSeed(7);
  return [kiln.randn([5, 37]), kiln.mul(kiln.randn([37, 19]), 0.3), kiln.randn([19]), kiln.mul(kiln.randn([19, 11]), 0.3), kiln.randn([11])];
}

export function compileCases(): CompileCase[] {
  kiln.manualSeed(3);
  const a = kiln.randn([7, 33]);
  const b = kiln.randn([33]);
  const t = kiln.randn([33, 7]).t();
  const h = kiln.randn([6, 45]).to('float16');
  const bf = kiln.randn([6, 45]).to('bfloat16');
  const w = kiln.add(kiln.randn([45]), 1);
  const big = kiln.randn([3, 1531]);
  return [
    { label: 'pointwise chain', fn: (x, y) => kiln.sub(kiln.relu(kiln.add(kiln.mul(x, y), 1)), kiln.mul(kiln.exp(kiln.neg(x)), 0.5)), inputs: [a, b] },
    { label: 'pointwise chain over a transposed input', fn: (x, y) => kiln.tanh(kiln.add(kiln.mul(x, 2), y)), inputs: [t, a] },
    { label: 'casts in a chain (f32 -> f16 -> bf16 -> f32, uint8, bool)', fn: (x) => [kiln.add(x.to('float16').to('bfloat16').to('float32'), 1), kiln.mul(x, 3).to('uint8'), kiln.gt(x, 0)], inputs: [a] },
    { label: 'sum of squares, keepdim mean', fn: (x) => [kiln.sum(kiln.mul(x, x), -1), kiln.mean(kiln.abs(x), [0], true)], inputs: [a] },
    { label: 'softmax and logSoftmax (odd rows, strided)', fn: (x) => [kiln.softmax(kiln.mul(x, 2), -1), kiln.logSoftmax(x, 0)], inputs: [t] },
    { label: 'layerNorm and rmsNorm (float16)', fn: (x, g) => [kiln.nn.functional.layerNorm(x, [45], g, g, 1e-5), kiln.nn.functional.rmsNorm(x, [45], g, 1e-6)], inputs: [h, w.to('float16')] },
    { label: 'softmax (bfloat16), amax/amin', fn: (x) => [kiln.softmax(x, -1), kiln.amax(x, 0), kiln.amin(x, -1, true)], inputs: [bf] },
    { label: 'long rows: sum, softmax', fn: (x) => [kiln.sum(x, -1), kiln.softmax(x, -1), kiln.sum(x)], inputs: [big] },
    { label: 'MLP with softmax (broadcast-sum linears)', fn: mlpFused as never, inputs: mlpInputs(), reference: mlpLinear as never, tol: 1e-5 },
  ];
}
