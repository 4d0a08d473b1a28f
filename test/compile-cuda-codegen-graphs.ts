/**
 * Graphs the CUDA code generator is checked on (tests and scripts/cudagen-ptxas.mjs): each is
 * traced on the CPU with the compiler's passes (as kiln.compile does), lowered with the cuda
 * target's fusion rules and scheduled; the CUDA generator then works from the traced value
 * metadata. Shapes are small unless `gpuSize`.
 */
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import type { Graph } from '../src/compile/ir.js';
import { lower, type Lowered } from '../src/compile/lower/lower.js';
import { CUDA_FUSION } from '../src/compile/codegen/cuda/backend.js';
import { schedule, type Schedule } from '../src/compile/lower/schedule.js';
import { runPasses } from '../src/compile/passes/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';

export interface CaseGraph {
  readonly name: string;
  readonly graph: Graph;
  readonly low: Lowered;
  readonly sched: Schedule;
}

type Fn = (...args: never[]) => unknown;

export function build(name: string, fn: Fn, args: Tensor[]): CaseGraph {
  const { graph: traced } = trace(fn, args);
  const { graph } = runPasses(traced, { decompose: true });
  const low = lower(graph, CUDA_FUSION);
  return { name, graph, low, sched: schedule(low) };
}

const E = (shape: number[], dtype: DType = 'float32'): Tensor => kiln.empty(shape, { dtype });

export const elementwise = (x: Tensor): Tensor => {
  let y = x.mul(1.5).add(0.5);
  y = kiln.relu(y).mul(kiln.sigmoid(x));
  y = y.add(kiln.tanh(x.mul(0.5)));
  y = y.sub(kiln.exp(x.neg().mul(x)).mul(0.1));
  return y.mul(2).sub(1);
};

/** The benchmark's pre-LN transformer block, at `d` model width and `h` heads. */
export function transformerBlock(d: number, h: number, mlp: number, dtype: DType): Fn {
  const w = (o: number, i: number): Tensor => E([o, i], dtype);
  const wqkv = w(3 * d, d);
  const bqkv = E([3 * d], dtype);
  const wo = w(d, d);
  const bo = E([d], dtype);
  const w1 = w(mlp, d);
  const b1 = E([mlp], dtype);
  const w2 = w(d, mlp);
  const b2 = E([d], dtype);
  const g1 = E([d], dtype);
  const g2 = E([d], dtype);
  return ((x: Tensor): Tensor => {
    const [b, t] = x.shape as [number, number, number];
    const hx = kiln.layerNorm(x, [d], g1);
    const qkv = kiln.linear(hx, wqkv, bqkv).view([b, t, 3, h, d / h]);
    const q = qkv.select(2, 0).transpose(1, 2);
    const k = qkv.select(2, 1).transpose(1, 2);
    const v = qkv.select(2, 2).transpose(1, 2);
    const a = kiln.scaledDotProductAttention(q, k, v, null, 0, true).transpose(1, 2).reshape([b, t, d]);
    const y = x.add(kiln.linear(a, wo, bo));
    const m = kiln.linear(kiln.gelu(kiln.linear(kiln.layerNorm(y, [d], g2), w1, b1)), w2, b2);
    return y.add(m);
  }) as Fn;
}

/** The test set: every graph kind the brief names, in float32 and the halves. */
export function caseGraphs(): CaseGraph[] {
  const out: CaseGraph[] = [];
  for (const dt of ['float32', 'float16', 'bfloat16'] as const) {
    const s = dt === 'float32' ? 'f32' : dt === 'float16' ? 'f16' : 'bf16';
    out.push(build(`elementwise_${s}`, elementwise as Fn, [E([64, 96], dt)]));
    out.push(build(`softmax_${s}`, ((x: Tensor) => kiln.softmax(x, -1)) as Fn, [E([32, 1000], dt)]));
    out.push(build(`layernorm_${s}`, ((x: Tensor, g: Tensor, b: Tensor) => kiln.layerNorm(x, [256], g, b)) as Fn, [E([4, 16, 256], dt), E([256], dt), E([256], dt)]));
    out.push(build(`rmsnorm_${s}`, ((x: Tensor, g: Tensor) => kiln.rmsNorm(x, [128], g, 1e-6)) as Fn, [E([24, 128], dt), E([128], dt)]));
  }
  const x = E([48, 80]);
  out.push(build('sum_last', ((t: Tensor) => kiln.sum(t, -1)) as Fn, [x]));
  out.push(build('sum_first', ((t: Tensor) => kiln.sum(t, 0)) as Fn, [x]));
  out.push(build('mean_keepdim', ((t: Tensor) => kiln.mean(t.mul(t), -1, true)) as Fn, [x]));
  out.push(build('amax_first', ((t: Tensor) => kiln.amax(t, 0)) as Fn, [x]));
  out.push(build('amin_prod', ((t: Tensor) => [kiln.amin(t, 1), kiln.prod(t, 1)]) as Fn, [x]));
  out.push(build('var_last', ((t: Tensor) => kiln.var(t, -1)) as Fn, [x]));
  out.push(build('var_first', ((t: Tensor) => kiln.var(t, 0, 1, true)) as Fn, [x]));
  out.push(build('sum_all', ((t: Tensor) => kiln.sum(t.abs())) as Fn, [E([256, 512])]));
  out.push(build('sum_middle', ((t: Tensor) => kiln.sum(t, 1)) as Fn, [E([6, 40, 24])]));
  out.push(build('broadcast_bias', ((t: Tensor, b: Tensor, c: Tensor) => kiln.relu(t.add(b)).mul(c)) as Fn, [E([8, 16, 64]), E([64]), E([8, 1, 1])]));
  out.push(build('transposed_input', ((t: Tensor) => kiln.sigmoid(t.t()).mul(t.t()).add(1)) as Fn, [E([40, 24])]));
  out.push(build('strided_slice', ((t: Tensor) => kiln.exp(t.narrow(1, 3, 20)).mul(2)) as Fn, [E([16, 32])]));
  out.push(build('channels_last', ((t: Tensor) => kiln.relu(t.mul(0.5).add(1))) as Fn, [E([2, 8, 6, 6]).contiguous('channelsLast')]));
  out.push(build('softmax_dim0', ((t: Tensor) => kiln.softmax(t, 0)) as Fn, [E([64, 40])]));
  out.push(build('mixed_cast', ((t: Tensor, u: Tensor) => t.to('float32').mul(u).to('bfloat16')) as Fn, [E([32, 64], 'bfloat16'), E([32, 64])]));
  out.push(build('int_compare', ((t: Tensor, u: Tensor) => kiln.where(t.gt(u), t, u.mul(2))) as Fn, [E([30, 50]), E([30, 50])]));
  out.push(build('dynamic_batch_b3', ((t: Tensor) => kiln.softmax(t.mul(2), -1)) as Fn, [E([3, 7, 128])]));
  out.push(build('transformer_block_small', transformerBlock(64, 4, 256, 'float32'), [E([2, 16, 64])]));
  return out;
}
