/**
 * gradcheck: compares the gradients autograd computes with central finite differences in float64.
 * Like PyTorch's fast mode it checks vector-Jacobian products: for random weights v on the outputs,
 * the analytical gradient of s(x) = sum(v * f(x)) (one backward pass) must match (s(x+h) -
 * s(x-h)) / 2h for every element of every input that requires grad.
 */
import { Tensor } from '../tensor/tensor.js';
import { fmtShape } from '../tensor/layout.js';
import { Generator } from '../tensor/random.js';
import { tensor } from '../api/data.js';
import { noGrad } from './grad-mode.js';
import { runBackward } from './engine.js';

export interface GradcheckOptions {
  /** Finite-difference step. */
  eps?: number;
  atol?: number;
  rtol?: number;
  /** Number of random output weightings to check. */
  projections?: number;
  seed?: number;
}

function asList(r: Tensor | readonly Tensor[]): Tensor[] {
  return r instanceof Tensor ? [r] : [...r];
}

/** Storage offset of logical element `e` of `t`. */
function offsetOf(t: Tensor, e: number): number {
  let off = t.offset;
  let rem = e;
  for (let d = t.ndim - 1; d >= 0; d--) {
    const size = t.shape[d]!;
    off += (rem % size) * t.strides[d]!;
    rem = Math.floor(rem / size);
  }
  return off;
}

function weightedSum(outs: readonly Tensor[], weights: readonly number[][]): number {
  let s = 0;
  outs.forEach((o, k) => {
    const v = o.toFlatArray();
    const w = weights[k]!;
    for (let i = 0; i < v.length; i++) s += v[i]! * w[i]!;
  });
  return s;
}

/** Throws a descriptive error when analytical and numerical gradients differ; returns true otherwise. */
export function gradcheck(fn: (...inputs: Tensor[]) => Tensor | readonly Tensor[], inputs: readonly Tensor[], options: GradcheckOptions = {}): true {
  const eps = options.eps ?? 1e-6;
  const atol = options.atol ?? 1e-5;
  const rtol = options.rtol ?? 1e-3;
  const gen = new Generator(options.seed ?? 0);
  const checked = inputs.map((t, i) => ({ t, i })).filter(({ t }) => t.requiresGrad);
  if (checked.length === 0) throw new Error('gradcheck: no input requires grad');
  for (const { t, i } of checked) {
    if (t.dtype !== 'float64') throw new Error(`gradcheck: input ${i} ${fmtShape(t.shape)} is ${t.dtype}; finite differences need float64 inputs`);
    if (t.device.type !== 'cpu') throw new Error(`gradcheck: input ${i} is on ${t.device.toString()}; gradcheck perturbs cpu tensors`);
  }
  for (let p = 0; p < (options.projections ?? 2); p++) {
    for (const { t } of checked) t.grad = null;
    const outs = asList(fn(...inputs)).filter((o) => o.dtype === 'float64' || o.dtype === 'float32');
    const weights = outs.map((o) => Array.from({ length: o.numel() }, () => gen.nextDouble() * 2 - 1));
    const diffOuts = outs.filter((o) => o.requiresGrad);
    if (diffOuts.length === 0) throw new Error('gradcheck: no output requires grad (did the function use the inputs?)');
    runBackward(
      diffOuts,
      diffOuts.map((o) => tensor(weights[outs.indexOf(o)]!, { dtype: o.dtype }).view(o.shape)),
    );
    for (const { t, i } of checked) {
      const analytical = t.grad ? t.grad.toFlatArray() : new Array<number>(t.numel()).fill(0);
      const data = new Float64Array(t.storage.cpuArrayBuffer());
      for (let e = 0; e < t.numel(); e++) {
        const off = offsetOf(t, e);
        const orig = data[off]!;
        data[off] = orig + eps;
        const plus = noGrad(() => weightedSum(asList(fn(...inputs)).filter((o) => o.dtype === 'float64' || o.dtype === 'float32'), weights));
        data[off] = orig - eps;
        const minus = noGrad(() => weightedSum(asList(fn(...inputs)).filter((o) => o.dtype === 'float64' || o.dtype === 'float32'), weights));
        data[off] = orig;
        const numerical = (plus - minus) / (2 * eps);
        const a = analytical[e]!;
        if (!(Math.abs(a - numerical) <= atol + rtol * Math.abs(numerical))) {
          throw new Error(
            `gradcheck: gradient mismatch for input ${i} ${fmtShape(t.shape)} at element ${e}: analytical ${a}, numerical ${numerical} ` +
              `(atol ${atol}, rtol ${rtol}, projection ${p})`,
          );
        }
      }
    }
  }
  for (const { t } of checked) t.grad = null;
  return true;
}
