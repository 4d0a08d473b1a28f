/**
 * cuda kernels of llm.siluAndMul and llm.geluAndMul ('none' | 'tanh'): out = act(x[..., :d]) *
 * x[..., d:] (codegen/llm.ts generateGated), and their backward kernels (runGatedBackward, used by
 * the cuda backward path in llm-backward.ts). Rows of the input may be any uniform stride apart
 * (a column slice of a wider tensor stays a view); other layouts are staged through a dense copy.
 * 16-byte vectors when d, the row strides and the addresses allow; grid x covers a row's
 * vectors, grid y the rows (looping beyond 65535).
 */
import { geluAndMul, type GeluApproximate, siluAndMul } from '../../ops/defs/llm.js';
import type { OutMeta } from '../../ops/schema.js';
import { launch } from '../../runtime/cuda/launch.js';
import { contiguousStrides, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { GATED_BLOCK, gatedKernelName, generateGated, type GatedAct, type GatedSpec } from './codegen/llm.js';
import { allocOut, ptrOf, streamOf } from './device.js';
import { aligned, cachedKernel, registerCuda, rowStride, Temps, vecWidth } from './llm-util.js';

/** Largest grid y (rows); the kernel loops over more. */
const MAX_GRID_Y = 65535;

export function gatedActOf(kind: 'silu' | GeluApproximate): GatedAct {
  return kind === 'silu' ? 'silu' : kind === 'tanh' ? 'geluTanh' : 'gelu';
}

function vecFor(d: number, strides: number[], ts: Tensor[]): number {
  const v = vecWidth(ts[0]!.dtype);
  return d % v === 0 && strides.every((s) => s % v === 0) && aligned(16, ...ts) ? v : 1;
}

function gridFor(rows: number, nvec: number): { grid: number; gridY: number; block: number } {
  return { grid: Math.max(1, Math.ceil(nvec / GATED_BLOCK)), gridY: Math.min(rows, MAX_GRID_Y), block: GATED_BLOCK };
}

function runGated(out: Tensor, input: Tensor, act: GatedAct): Tensor {
  const d = out.shape[out.ndim - 1]!;
  const rows = d === 0 ? 0 : numel(out.shape) / d;
  if (rows === 0) return out;
  const t = new Temps();
  try {
    const x = t.rows(input);
    const xs = rowStride(x)!;
    const vec = vecFor(d, [xs, d], [x, out]);
    const spec: GatedSpec = { dtype: x.dtype, act, vec, backward: false };
    const k = cachedKernel(x.device.index, gatedKernelName(spec), () => generateGated(spec));
    launch(k, [ptrOf(out), ptrOf(x), rows, d, xs, d], gridFor(rows, d / vec), streamOf(x));
  } finally {
    t.dispose();
  }
  return out;
}

/** dx (dense, the input's shape) of act-and-mul for upstream gradient `grad` [..., d]. */
export function runGatedBackward(grad: Tensor, input: Tensor, act: GatedAct): Tensor {
  const dx = allocOut({ shape: input.shape, strides: contiguousStrides(input.shape), dtype: input.dtype, device: input.device });
  const d = grad.shape[grad.ndim - 1]!;
  const rows = d === 0 ? 0 : numel(grad.shape) / d;
  if (rows === 0) return dx;
  const t = new Temps();
  try {
    const x = t.rows(input);
    const g = t.rows(grad.dtype === input.dtype ? grad : t.keep(grad.to(input.dtype)));
    const xs = rowStride(x)!;
    const gs = rowStride(g)!;
    const vec = vecFor(d, [xs, gs, 2 * d], [x, g, dx]);
    const spec: GatedSpec = { dtype: x.dtype, act, vec, backward: true };
    const k = cachedKernel(x.device.index, gatedKernelName(spec), () => generateGated(spec));
    launch(k, [ptrOf(dx), ptrOf(g), ptrOf(x), rows, d, gs, xs, 2 * d], gridFor(rows, d / vec), streamOf(x));
  } finally {
    t.dispose();
  }
  return dx;
}

registerCuda(siluAndMul.name, (ctx, input) => runGated(allocOut(ctx.out as OutMeta), input as Tensor, 'silu'));
registerCuda(geluAndMul.name, (ctx, input, approximate) => runGated(allocOut(ctx.out as OutMeta), input as Tensor, gatedActOf(approximate as GeluApproximate)));
