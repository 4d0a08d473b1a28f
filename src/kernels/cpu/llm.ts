/**
 * CPU kernels of the LLM library, part 1: RMSNorm (plain, fused add in place, add out of place),
 * SiLU/GELU-and-mul and rotary embeddings. Inputs are read through denseValues (any strides;
 * halves decoded to float32), all arithmetic runs in JS doubles (wider than the fp32 accumulation
 * the GPU kernels use) and results are rounded only when stored (through float32 for halves, as
 * every kiln CPU kernel stores). One difference from vLLM's RMSNorm, deliberate: vLLM rounds
 * x * rsqrt(...) to the dtype before multiplying by the weight; here x * rsqrt(...) * w is rounded
 * once, so half-precision results can differ from vLLM's by one unit in the last place.
 * llm.gateUpSiluAndMul runs the native gated GEMV for up to 4 rows (else its reference composition),
 * llm.qkvLinear the native three-weight GEMV (kiln_gemv_multi) likewise.
 * Registered as the 'cpu-kernel' implementation of each op through the llm dispatch policy.
 */
import { addRmsNorm, fusedAddRmsNorm, geluAndMul, type GeluApproximate, rmsNorm, ropeGeometry, rotaryEmbedding, siluAndMul } from '../../ops/defs/llm.js';
import type { KernelContext, OutMeta } from '../../ops/schema.js';
import { numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { assertNoOverlap } from '../../ops/library/overlap.js';
import { registerLlmImpl, type ImplFn } from '../../ops/library/policy.js';
import { castValue } from '../../tensor/typed.js';
import { geluErf, geluTanh, silu } from './pointwise-math.js';
import { denseValues, fromDense, scatterStrided, writable } from './numeric.js';
import { nativeAddRms, nativeSiluAndMul } from './native/rows.js';
import { nativeGateUpSiluMul, nativeQkvLinear } from './native/gemv.js';
import { gateUpSiluAndMul } from '../../ops/defs/llm-gate-up-silu-mul.js';
import { qkvLinear } from '../../ops/defs/llm-qkv-linear.js';
import { llmImpls } from '../../ops/library/policy.js';

export function registerCpu(opName: string, fn: ImplFn): void {
  registerLlmImpl(opName, { name: 'cpu-kernel', kind: 'kernel', device: 'cpu', priority: 0, fn });
}

/** Writes dense row-major values into an existing tensor (any strides), in place. */
export function writeInto(t: Tensor, values: ArrayLike<number>): void {
  const w = writable(t);
  scatterStrided(values, w);
  w.commit();
}

/** y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w over rows of length h. */
function rmsRows(x: ArrayLike<number>, w: ArrayLike<number>, eps: number, h: number, out: Float64Array): void {
  const rows = h === 0 ? 0 : x.length / h;
  for (let r = 0; r < rows; r++) {
    const base = r * h;
    let ss = 0;
    for (let i = 0; i < h; i++) ss += x[base + i]! * x[base + i]!;
    const inv = 1 / Math.sqrt(ss / h + eps);
    for (let i = 0; i < h; i++) out[base + i] = x[base + i]! * inv * w[i]!;
  }
}

registerCpu(rmsNorm.name, (ctx, input, weight, eps) => {
  const x = input as Tensor;
  const h = x.shape[x.ndim - 1]!;
  const out = new Float64Array(numel(x.shape));
  rmsRows(denseValues(x), denseValues(weight as Tensor), eps as number, h, out);
  return fromDense(ctx.out as OutMeta, out);
});

/** The sum x + residual, rounded to the tensors' dtype (what vLLM stores back into residual). */
function roundedSum(x: Tensor, residual: Tensor): Float64Array {
  const a = denseValues(x);
  const b = denseValues(residual);
  const s = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) s[i] = a[i]! + b[i]!;
  return roundTo(s, x.dtype);
}

/** Rounds values as a store into `dtype` would (so later math reads what storage holds). */
function roundTo(v: Float64Array, dtype: Tensor['dtype']): Float64Array {
  if (dtype === 'float64') return v;
  for (let i = 0; i < v.length; i++) v[i] = castValue(v[i]!, dtype);
  return v;
}

function addNorm(x: Tensor, residual: Tensor, weight: Tensor, eps: number): { sum: Float64Array; y: Float64Array } {
  const h = x.shape[x.ndim - 1]!;
  const sum = roundedSum(x, residual);
  const y = new Float64Array(sum.length);
  rmsRows(sum, denseValues(weight), eps, h, y);
  return { sum, y };
}

registerCpu(fusedAddRmsNorm.name, (_ctx, input, residual, weight, eps) => {
  const x = input as Tensor;
  const r = residual as Tensor;
  assertNoOverlap(fusedAddRmsNorm.name, ['input', x], ['residual', r]);
  const { sum, y } = addNorm(x, r, weight as Tensor, eps as number);
  writeInto(r, sum);
  writeInto(x, y);
  return [x, r];
});

registerCpu(addRmsNorm.name, (ctx, input, residual, weight, eps) => {
  const native = nativeAddRms(ctx.out as OutMeta[], input as Tensor, residual as Tensor, weight as Tensor, (input as Tensor).shape[(input as Tensor).ndim - 1]!, eps as number);
  if (native) return native;
  const { sum, y } = addNorm(input as Tensor, residual as Tensor, weight as Tensor, eps as number);
  const [mo, mr] = ctx.out as OutMeta[];
  return [fromDense(mo!, y), fromDense(mr!, sum)];
});

export function gelu(a: number, approximate: GeluApproximate): number {
  return approximate === 'tanh' ? geluTanh(a) : geluErf(a);
}

/** out[r, i] = act(x[r, i]) * x[r, d + i] over rows of length 2d. */
function gated(ctx: KernelContext, input: Tensor, act: (a: number) => number): Tensor {
  const x = denseValues(input);
  const d = input.shape[input.ndim - 1]! / 2;
  const rows = d === 0 ? 0 : x.length / (2 * d);
  const out = new Float64Array(rows * d);
  for (let r = 0; r < rows; r++) {
    const xb = r * 2 * d;
    for (let i = 0; i < d; i++) out[r * d + i] = act(x[xb + i]!) * x[xb + d + i]!;
  }
  return fromDense(ctx.out as OutMeta, out);
}

registerCpu(siluAndMul.name, (ctx, input) => nativeSiluAndMul(ctx.out as OutMeta, input as Tensor) ?? gated(ctx, input as Tensor, silu));
// A decode step's few rows: the gated native GEMV (one call); otherwise the reference composition.
registerCpu(gateUpSiluAndMul.name, (ctx, input, gateWeight, upWeight) => {
  const native = nativeGateUpSiluMul(ctx.out as OutMeta, input as Tensor, gateWeight as Tensor, upWeight as Tensor);
  if (native) return native;
  const ref = llmImpls(gateUpSiluAndMul.name).find((m) => m.kind === 'reference');
  if (!ref) throw new Error(`${gateUpSiluAndMul.name}: no reference composition registered for the cpu fallback`);
  return ref.fn(ctx, input, gateWeight, upWeight);
});
// A decode step's few rows: the three projections in one native GEMV job; otherwise three linears.
registerCpu(qkvLinear.name, (ctx, input, qWeight, kWeight, vWeight) => {
  const native = nativeQkvLinear(ctx.out as OutMeta[], input as Tensor, [qWeight as Tensor, kWeight as Tensor, vWeight as Tensor]);
  if (native) return native;
  const ref = llmImpls(qkvLinear.name).find((m) => m.kind === 'reference');
  if (!ref) throw new Error(`${qkvLinear.name}: no reference composition registered for the cpu fallback`);
  return ref.fn(ctx, input, qWeight, kWeight, vWeight);
});
registerCpu(geluAndMul.name, (ctx, input, approximate) => gated(ctx, input as Tensor, (a) => gelu(a, approximate as GeluApproximate)));

/**
 * Rotates the first rotDim features of every head of one [tokens, heads * headSize] tensor.
 * neox: pairs (i, i + rotDim/2); gpt-j: pairs (2i, 2i + 1). cos/sin = cache[pos, i], cache[pos, rotDim/2 + i].
 */
function rotate(t: Tensor, pos: ArrayLike<number>, cache: ArrayLike<number>, heads: number, headSize: number, rotDim: number, isNeox: boolean): void {
  const v = Float64Array.from(denseValues(t));
  const half = rotDim / 2;
  const tokens = pos.length;
  for (let tk = 0; tk < tokens; tk++) {
    const cb = pos[tk]! * rotDim;
    for (let h = 0; h < heads; h++) {
      const base = (tk * heads + h) * headSize;
      for (let i = 0; i < half; i++) {
        const c = cache[cb + i]!;
        const s = cache[cb + half + i]!;
        const i1 = isNeox ? base + i : base + 2 * i;
        const i2 = isNeox ? base + half + i : base + 2 * i + 1;
        const x1 = v[i1]!;
        const x2 = v[i2]!;
        v[i1] = x1 * c - x2 * s;
        v[i2] = x2 * c + x1 * s;
      }
    }
  }
  writeInto(t, v);
}

registerCpu(rotaryEmbedding.name, (_ctx, positions, query, key, headSize, cosSinCache, isNeox) => {
  const q = query as Tensor;
  const k = key as Tensor | null;
  const cache = cosSinCache as Tensor;
  assertNoOverlap(rotaryEmbedding.name, ['query', q], ['key', k]);
  const g = ropeGeometry(positions as Tensor, q, k, headSize as number, cache, isNeox as boolean);
  const pos = denseValues(positions as Tensor);
  const maxPos = cache.shape[0]!;
  for (let i = 0; i < pos.length; i++) {
    const p = pos[i]!;
    if (!(p >= 0 && p < maxPos)) {
      throw new RangeError(`llm.rotaryEmbedding: positions[${i}] = ${p} is outside the cosSinCache's ${maxPos} positions (cosSinCache [${cache.shape.join(', ')}])`);
    }
  }
  const cs = denseValues(cache);
  rotate(q, pos, cs, g.qHeads, g.headSize, g.rotDim, isNeox as boolean);
  if (k) rotate(k, pos, cs, g.kHeads, g.headSize, g.rotDim, isNeox as boolean);
  return k ? [q, k] : [q];
});
