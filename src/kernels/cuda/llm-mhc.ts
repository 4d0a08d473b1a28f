/**
 * cuda kernels of the LLM library, part 3: mHC (src/ops/defs/llm-mhc.ts), registered as the
 * 'cuda-kernel' implementation through the llm dispatch policy.
 *
 * - mhcPost: one fused kernel (codegen/llm-mhc.ts `post`).
 * - mhcHeadCollapse with up to COLLAPSE_FUSED_MAX_N (8) streams: one fused kernel (the N
 *   projections accumulate in the same pass over the streams as the RMS).
 * - mhcPre, and mhcHeadCollapse with more streams: a composition of two launches. The
 *   projection phi v of every token is one cuBLASLt GEMM [T, nH] x [nH, rows] in the compute dtype (float32, float64 for
 *   float64 streams; half streams are cast to float32 first, so the projection is not rounded
 *   through the half type), then one fused per-token kernel does the RMS scaling, the sigmoids,
 *   Sinkhorn-Knopp (mhcPre) and the weighted sum of the streams.
 * Inputs that are not contiguous are copied first (the kernels index dense [T, n, H] data).
 */
import { mhcGeometry, mhcHeadCollapse, mhcPost, mhcPostGeometry, mhcPre } from '../../ops/defs/llm-mhc.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { fmtShape } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { launch } from '../../runtime/cuda/launch.js';
import { COLLAPSE_FUSED_MAX_N, FINISH_THREADS, MHC_MAX_N, mhcCollapseFusedSource, mhcFinishSource, mhcPostSource } from './codegen/llm-mhc.js';
import { contiguousAs } from './core.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';
import { runGemm } from './linalg.js';
import { moeKernel, registerCuda } from './llm-moe.js';

/** `t` as contiguous data of `dtype` (itself when it already is; else a copy the caller disposes). */
function checkN(op: string, n: number, streams: Tensor): void {
  if (n > MHC_MAX_N) throw new RangeError(`${op}: not supported yet on cuda: ${n} streams (dim -2 of streams ${fmtShape(streams.shape)}); the cuda kernels take up to ${MHC_MAX_N} (src/kernels/cuda/llm-mhc.ts)`);
}

interface MixArgs {
  op: string;
  streams: Tensor;
  phi: Tensor;
  alpha: Tensor;
  bias: Tensor;
  rows: number;
  mode: 'pre' | 'collapse';
  out: Tensor;
  post: Tensor | null;
  comb: Tensor | null;
  rmsEps: number;
  preEps: number;
  postMult: number;
  iters: number;
  sinkEps: number;
}

function mixAndFinish(a: MixArgs): void {
  const { tokens, n, hidden: h } = mhcGeometry(a.streams);
  checkN(a.op, n, a.streams);
  if (tokens === 0) return;
  const ct: DType = a.streams.dtype === 'float64' ? 'float64' : 'float32';
  const temps: Tensor[] = [];
  const keep = (t: Tensor, orig: Tensor): Tensor => {
    if (t !== orig) temps.push(t);
    return t;
  };
  try {
    const x = keep(contiguousAs(a.streams), a.streams);
    // The GEMM operand: the streams as [T, nH] in the compute dtype.
    const xc = x.dtype === ct ? x : keep(contiguousAs(x, ct), x);
    const v = new Tensor(xc.storage, ct, [tokens, n * h], [n * h, 1], xc.offset);
    const phi = keep(contiguousAs(a.phi, ct), a.phi);
    const phiT = new Tensor(phi.storage, ct, [n * h, a.rows], [1, n * h], phi.offset);
    const mm = allocOut({ shape: [tokens, a.rows], strides: [a.rows, 1], dtype: ct, device: x.device });
    temps.push(v, phiT, mm);
    runGemm({ op: a.op, out: mm, a: v, b: phiT, batch: [], M: tokens, N: a.rows, K: n * h });
    const alpha = keep(contiguousAs(a.alpha, ct), a.alpha);
    const bias = keep(contiguousAs(a.bias, ct), a.bias);
    const index = x.device.index;
    const k = moeKernel(index, `mhc-finish:${x.dtype}:${a.mode}`, () => mhcFinishSource(x.dtype, a.mode));
    const args = [ptrOf(x), ptrOf(mm), ptrOf(alpha), ptrOf(bias), ptrOf(a.out), a.post ? ptrOf(a.post) : 0, a.comb ? ptrOf(a.comb) : 0, tokens, n, h, a.rmsEps, a.preEps, a.postMult, a.iters, a.sinkEps];
    launch(k, args, { grid: gridFor(index, tokens * FINISH_THREADS, FINISH_THREADS), block: FINISH_THREADS }, streamOf(x));
  } finally {
    for (const t of temps) t.dispose();
  }
}

registerCuda(mhcPre.name, (ctx, streams, phi, alpha, bias, rmsEps, preEps, postMult, iters, sinkEps) => {
  const [mi, mp, mc] = ctx.out as OutMeta[];
  const s = streams as Tensor;
  const n = s.shape[s.ndim - 2]!;
  const out = allocOut(mi!);
  const post = allocOut(mp!);
  const comb = allocOut(mc!);
  mixAndFinish({
    op: mhcPre.name,
    streams: s,
    phi: phi as Tensor,
    alpha: alpha as Tensor,
    bias: bias as Tensor,
    rows: n * (n + 2),
    mode: 'pre',
    out,
    post,
    comb,
    rmsEps: rmsEps as number,
    preEps: preEps as number,
    postMult: postMult as number,
    iters: iters as number,
    sinkEps: sinkEps as number,
  });
  return [out, post, comb];
});

/** mhcHeadCollapse for n <= COLLAPSE_FUSED_MAX_N: one fused kernel (codegen/llm-mhc.ts `collapse-fused`). */
function collapseFused(s: Tensor, phiArg: Tensor, alphaArg: Tensor, biasArg: Tensor, out: Tensor, rmsEps: number, eps: number): void {
  const { tokens, n, hidden: h } = mhcGeometry(s);
  if (tokens === 0) return;
  const ct: DType = s.dtype === 'float64' ? 'float64' : 'float32';
  const ins = [s, phiArg, alphaArg, biasArg];
  const d = [contiguousAs(s), contiguousAs(phiArg, ct), contiguousAs(alphaArg, ct), contiguousAs(biasArg, ct)];
  try {
    const [x, phi, alpha, bias] = d as [Tensor, Tensor, Tensor, Tensor];
    const index = x.device.index;
    const k = moeKernel(index, `mhc-collapse-fused:${x.dtype}:${n}`, () => mhcCollapseFusedSource(x.dtype, n));
    launch(k, [ptrOf(x), ptrOf(phi), ptrOf(alpha), ptrOf(bias), ptrOf(out), tokens, h, rmsEps, eps], { grid: gridFor(index, tokens * FINISH_THREADS, FINISH_THREADS), block: FINISH_THREADS }, streamOf(x));
  } finally {
    d.forEach((t, i) => {
      if (t !== ins[i]) t.dispose();
    });
  }
}

registerCuda(mhcHeadCollapse.name, (ctx, streams, phi, alpha, bias, rmsEps, eps) => {
  const s = streams as Tensor;
  const out = allocOut(ctx.out as OutMeta);
  if (s.shape[s.ndim - 2]! <= COLLAPSE_FUSED_MAX_N) {
    collapseFused(s, phi as Tensor, alpha as Tensor, bias as Tensor, out, rmsEps as number, eps as number);
    return out;
  }
  mixAndFinish({
    op: mhcHeadCollapse.name,
    streams: s,
    phi: phi as Tensor,
    alpha: alpha as Tensor,
    bias: bias as Tensor,
    rows: s.shape[s.ndim - 2]!,
    mode: 'collapse',
    out,
    post: null,
    comb: null,
    rmsEps: rmsEps as number,
    preEps: eps as number,
    postMult: 1,
    iters: 0,
    sinkEps: 0,
  });
  return out;
});

registerCuda(mhcPost.name, (ctx, layerOut, streams, post, comb) => {
  const g = mhcPostGeometry(layerOut as Tensor, streams as Tensor, post as Tensor, comb as Tensor);
  checkN(mhcPost.name, g.n, streams as Tensor);
  const out = allocOut(ctx.out as OutMeta);
  if (g.tokens * g.hidden === 0) return out;
  const ins = [layerOut, streams, post, comb] as Tensor[];
  const d = ins.map((t) => contiguousAs(t));
  try {
    const [f, x, p, c] = d as [Tensor, Tensor, Tensor, Tensor];
    const index = x.device.index;
    const k = moeKernel(index, `mhc-post:${x.dtype}:${p.dtype}:${c.dtype}:${g.n}`, () => mhcPostSource(x.dtype, p.dtype, c.dtype, g.n));
    launch(k, [ptrOf(f), ptrOf(x), ptrOf(p), ptrOf(c), ptrOf(out), g.tokens, g.hidden], { grid: gridFor(index, g.tokens * g.hidden, 256), block: 256 }, streamOf(x));
  } finally {
    d.forEach((t, i) => {
      if (t !== ins[i]) t.dispose();
    });
  }
  return out;
});
