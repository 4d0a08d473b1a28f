/**
 * webgpu kernel of llm.addRmsNormLinear (issue #20): the skinny GEMV with the RMSNorm prologue
 * (gemv-codegen.ts + gemv-norm.ts: every workgroup normalises its rows of x (+ residual) into
 * workgroup memory, workgroup x = 0 stores the sum; then the plain or gated GEMV) wherever the
 * plain GEMV would take linear(y, W) (at most 8 rows, x, W and the residual exact as 16-byte words
 * along K, gamma and the bias dense) and the normalised rows fit the device's workgroup memory;
 * otherwise the op's parts (add, rmsNorm, linear / llm.linearSiluAndMul), so every shape and dtype
 * works. `takes` tells kiln.compile's pass (src/llm/add-rms-norm-linear-pass.ts, behind
 * KILN_ADD_RMSNORM_LINEAR) where the kernel runs: float32, float16 and bfloat16, 1 to 8 rows, K a
 * whole number of words. A Qwen3 decode step at batch 1 loses its 57 add + norm dispatches.
 */
import { add } from '../../ops/defs/core.js';
import { linear, rmsNorm } from '../../ops/defs/linalg.js';
import { addRmsNormLinear, addRmsNormLinearArgs } from '../../ops/defs/llm-add-rms-norm-linear.js';
import { linearSiluAndMul } from '../../ops/defs/llm-linear-silu-mul.js';
import { dispatch } from '../../ops/dispatch.js';
import { registerLlmImpl } from '../../ops/library/policy.js';
import type { OutMeta } from '../../ops/schema.js';
import { getOption } from '../../runtime/config.js';
import type { DeviceBuffer } from '../../runtime/accelerator.js';
import type { DType } from '../../tensor/dtype.js';
import { numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { allocOut, webgpu } from './device.js';
import { GEMV_MAX_M, GEMV_THREADS, gemvRows, gemvVecElems } from './gemv-codegen.js';
import { GEMV_NORM_MAX_WORKGROUPS, GEMV_NORM_META, gemvNormWorkgroupBytes } from './gemv-norm.js';
import { f32Bits, gemvEligible, gemvKernel, gemvTuning, setGemvMeta, wholeWords } from './linalg.js';
import { storageKind } from './storage.js';

const DTYPES: readonly DType[] = ['float32', 'float16', 'bfloat16'];
/** Test hook (setGemvNormSubgroups): false makes the prologue reduce without subgroups. */
let useSubgroups = true;

/** Tests only: whether the prologue may use subgroups where the device has them (SwiftShader has both paths). */
export function setGemvNormSubgroups(on: boolean): void {
  useSubgroups = on;
}

/** Whether the device's workgroup memory holds the variant's normalised rows and partial sums. */
function fits(mr: number, kv: number, gated: boolean): boolean {
  const limit = webgpu().bridge.adapter.limits.maxComputeWorkgroupStorageSize ?? 16384;
  return gemvNormWorkgroupBytes(mr, kv, gated, GEMV_THREADS) <= limit;
}

/** The pass's test (see the header): the kernel runs for this dtype, rows and K (given dense operands). */
function takes(dtype: DType, rows: number, k: number): boolean {
  if (!getOption('KILN_WEBGPU_GEMV') || !DTYPES.includes(dtype) || rows < 1 || rows > GEMV_MAX_M) return false;
  const v = dtype === 'float32' ? 4 : 8;
  // The gated variant needs the larger workgroup memory; a site may be either.
  return k > 0 && k % v === 0 && fits(gemvRows(rows), k / v, true);
}

/**
 * out [M, N] = linear(rmsNorm(x + r), W, b) (gated: silu(g) * u of its halves) and h = x + r on
 * the norm-prologue GEMV; false, dispatching nothing, where it does not apply.
 */
function runGemvNorm(x: Tensor, r: Tensor | null, gamma: Tensor, eps: number, w: Tensor, bias: Tensor | null, gated: boolean, out: Tensor, h: Tensor): boolean {
  const K = x.shape[x.ndim - 1]!;
  const N = gated ? w.shape[0]! / 2 : w.shape[0]!;
  const M = numel(x.shape) / Math.max(K, 1);
  if (M === 0 || N === 0 || M > GEMV_MAX_M || !DTYPES.includes(x.dtype)) return false;
  const acc = webgpu();
  const kind = storageKind(x.dtype, acc.hasFeature('shader-f16'))!;
  const V = gemvVecElems(kind);
  const mr = gemvRows(M);
  if (K % V !== 0 || !fits(mr, K / V, gated)) return false;
  // x's and the residual's rows as matrices (every leading dim folds into one row stride).
  const rowStride = (t: Tensor): number => (M === 1 || t.isContiguous() ? K : -1);
  const sx = rowStride(x);
  const sr = r === null ? 0 : rowStride(r);
  if (sx < 0 || sr < 0 || x.strides[x.ndim - 1] !== 1 || (r !== null && r.strides[r.ndim - 1] !== 1)) return false;
  const words = (t: Tensor): boolean => t.strides[t.ndim - 1] === 1 && t.offset % V === 0 && wholeWords(t);
  if (!words(gamma) || (r !== null && !words(r)) || (bias !== null && bias.strides[0] !== 1) || h.offset % V !== 0 || !wholeWords(h)) return false;
  const a = new Tensor(x.storage, x.dtype, [M, K], [sx, 1], x.offset);
  const b = new Tensor(w.storage, w.dtype, [K, w.shape[0]!], [w.strides[1]!, w.strides[0]!], w.offset);
  try {
    if (!gemvEligible(kind, M, K, 1, a, b)) return false;
    const tuning = gemvTuning(kind, K, N, gated);
    const groups = Math.ceil(N / tuning.cols);
    const nm = GEMV_NORM_META;
    const meta = new Uint32Array(nm.words);
    setGemvMeta(meta, M, N, K, mr, tuning.cols, out, a.offset, sx, b.offset, w.strides[0]!, bias);
    if (r) meta.set([r.offset, sr], nm.res);
    meta[nm.gamma] = gamma.offset;
    meta.set([h.offset, K], nm.h);
    // eps as the compiled norm adds it: an f32 literal (wgslLit), not rounded to the dtype.
    meta[nm.eps] = f32Bits(eps);
    const buffers: DeviceBuffer[] = [out.storage.buffer, x.storage.buffer, w.storage.buffer];
    if (bias) buffers.push(bias.storage.buffer);
    if (r) buffers.push(r.storage.buffer);
    buffers.push(gamma.storage.buffer, h.storage.buffer);
    const norm = { kv: K / V, residual: r !== null, subgroups: useSubgroups && acc.hasFeature('subgroups'), prefetch: getOption('KILN_WEBGPU_GEMV_NORM_PREFETCH') };
    const spec = { kind, mr, bias: bias !== null, beta: false, gated, norm, ...tuning };
    acc.dispatch(gemvKernel(spec), buffers, meta, [Math.min(groups, GEMV_NORM_MAX_WORKGROUPS), Math.ceil(M / mr), 1]);
    return true;
  } finally {
    a.dispose();
    b.dispose();
  }
}

registerLlmImpl(addRmsNormLinear.name, {
  name: 'webgpu-kernel',
  kind: 'kernel',
  device: 'webgpu',
  priority: 0,
  takes,
  fn: (ctx, ...args) => {
    const { x, r, g, eps, w, b, gated } = addRmsNormLinearArgs(args);
    const metas = ctx.out as OutMeta[];
    const out = allocOut(metas[0]!);
    const h = allocOut(metas[1]!);
    if (out.numel() === 0 && h.numel() === 0) return [out, h];
    if (runGemvNorm(x, r, g, eps, w, b, gated, out, h)) return [out, h];
    out.dispose();
    h.dispose();
    // The parts: the eager add rounds s before the norm (the kernel normalises the unrounded sum).
    const k = x.shape[x.ndim - 1]!;
    const s = r === null ? dispatch(add, x, 0, 1) : dispatch(add, x, r, 1);
    const y = dispatch(rmsNorm, s, [k], g, eps);
    const o = gated ? dispatch(linearSiluAndMul, y, w, b) : dispatch(linear, y, w, b);
    y.dispose();
    return [o, s];
  },
});
