/**
 * Host side of the implicit-GEMM conv2d (conv-igemm-source.ts): decides whether a call can run it
 * (`planIgemm`, else the caller keeps the im2col + cuBLASLt path), rearranges the weight into the
 * padded [Npad, Kpad] operand with a small prep kernel, and launches the GEMM kernel with an
 * optional fused epilogue (bias, per-channel scale and shift, ReLU).
 *
 * Input layouts: channels_last inputs whose channel count is a multiple of 16 bytes take the vector
 * (cp.async) A loader in place. Other inputs (NCHW, small channel counts such as the 3-channel
 * first layer) use the scalar loader on their own strides: consecutive threads read consecutive
 * pixels, which NCHW stores contiguously. Measured on the H200 (bench/cuda-conv.ts, [16, 64, 112,
 * 112] 3x3): the direct NCHW read took 0.233 ms (f32) / 0.129 ms (bf16) against 0.308 / 0.191 ms
 * for a copy to channels_last followed by the vector loader, so the copy (`nchw: 'copy'`) is opt-in.
 * Kernels are cached per spec (the spec's name encodes every baked constant).
 */
import { backends } from '../../runtime/backends.js';
import { getOption, setOption } from '../../runtime/config.js';
import { Tensor } from '../../tensor/tensor.js';
import { itemSize } from '../../tensor/dtype.js';
import { channelsLastStrides, numel } from '../../tensor/layout.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel, type ParamType } from '../../runtime/cuda/launch.js';
import { copyTensor } from './core.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';
import {
  elemBytes,
  IGEMM_BN,
  igemmDtype,
  igemmName,
  igemmSource,
  type IgemmMath,
  type IgemmSpec,
  type IgemmTileName,
  kPadded,
  kTotal,
  nPadded,
  tileRows,
  tileSharedBytes,
  tileThreads,
  simtTile,
  weightPrepSource,
} from './conv-igemm-source.js';

/**
 * Which conv2d implementation eager cuda calls use: 'auto' (implicit GEMM wherever it applies),
 * 'im2col' (always the im2col + cuBLASLt path; for comparisons). KILN_CUDA_CONV_IMPL sets the default.
 */
export const convImpl: { mode: 'auto' | 'im2col'; tile: IgemmTileName | null } = {
  // Assigning overrides the option (runtime/config.ts), so `kiln info` shows where it comes from.
  get mode(): 'auto' | 'im2col' {
    return getOption('KILN_CUDA_CONV_IMPL');
  },
  set mode(m: 'auto' | 'im2col') {
    setOption('KILN_CUDA_CONV_IMPL', m);
  },
  /** Forces one block tile (tests and benchmarks); null: the measured rule in pickTile. */
  tile: null,
};

const GEMM_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i32'];
const PREP_PARAMS: ParamType[] = ['ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i64', 'i64', 'i64', 'i64'];
const PREP_BN_PARAMS: ParamType[] = [...PREP_PARAMS, 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'f32'];
const PREP_BLOCK = 256;
const INT_MAX = 2 ** 31 - 1;

export interface IgemmCall {
  input: Tensor;
  weight: Tensor;
  bias: Tensor | null;
  out: Tensor;
  stride: readonly number[];
  /** [top, bottom, left, right]. */
  padding: readonly [number, number, number, number];
  dilation: readonly number[];
  groups: number;
  /** Fused epilogue: y = relu?((acc + bias) * scale[c] + shift[c]); scale and shift float32 [Cout]. */
  scale?: Tensor | null;
  /**
   * Eval BatchNorm after the conv (conv2dBatchNorm): the prep kernel derives scale and shift (the
   * bias folded in) from these tensors' current values; excludes `scale`/`shift`. The tensors are
   * [Cout], all of one igemm dtype (bnUnsupported says when not).
   */
  bn?: IgemmBatchNorm | null;
  shift?: Tensor | null;
  relu?: boolean;
  /** f32 math (default: backends.cuda.allowTf32Conv ? 'tf32' : 'simt'). */
  math?: IgemmMath;
  /** NCHW-like inputs with a vector-friendly channel count: read directly (default) or copy to channels_last first. */
  nchw?: 'copy' | 'direct';
  /** Block tile (default: convImpl.tile, else pickTile). */
  tile?: IgemmTileName;
}

export interface IgemmBatchNorm {
  readonly runningMean: Tensor;
  readonly runningVar: Tensor;
  readonly weight: Tensor | null;
  readonly bias: Tensor | null;
  readonly eps: number;
}

/** Why the prep kernel cannot derive the BatchNorm epilogue (null: it can). */
export function bnUnsupported(bn: IgemmBatchNorm): string | null {
  const ts = [bn.runningMean, bn.runningVar, bn.weight, bn.bias].filter((t): t is Tensor => t !== null);
  const d = ts[0]!.dtype;
  if (!igemmDtype(d) || ts.some((t) => t.dtype !== d)) return `BatchNorm tensors of dtypes ${ts.map((t) => t.dtype).join(', ')}`;
  return null;
}

/**
 * The block tile for a problem, from the tile sweeps on the H200 (ms for the conv-stack
 * convolutions, [16, 3, 224, 224] 7x7 s2 "stem" (K = 147) and [16, 64, 112, 112] 3x3 "body"
 * (K = 576)). Session 3 (bench/cuda-conv.ts, R2), then session 4 (scripts/device/conv-tiles.mjs,
 * the fused conv2dBatchNorm + ReLU, R1; those times include the call's host work, ~0.1 ms, so only
 * their differences count):
 * - vector loader, tf32: m128w32k128s4 (body 0.234 vs 0.265 for m128w32k128; a 256-row tile was
 *   faster still, 0.225, but is withdrawn: see IGEMM_TILES);
 * - vector loader, bf16/f16: m128w32k128s4 (body 0.131 vs 0.133 for m128w32k128; m256w32k128
 *   0.158: with half the bytes per element the weight traffic matters less than occupancy);
 * - scalar loader, bf16/f16: m128w32s5 for small K (stem 0.073 vs 0.087 with k128, whose K padding
 *   and shallower ring cost there; the 4-stage k128 ring ties it, 0.0913 vs 0.0932), m128w32k128
 *   from K = 256 (NCHW body 0.115 vs 0.135);
 * - scalar loader, tf32: m128w32k128s4 for small K (stem 0.105 vs 0.113 for m128w64), m128w64 from
 *   K = 256 (NCHW body 0.186, the best of session 3's tiles);
 * - SIMT (exact f32): m128w32s5 (its thread mapping needs 4 x 32-row warps; deeper ring).
 */
export function pickTile(math: IgemmMath, loader: IgemmSpec['aLoader'] = 'vec', k = 0): IgemmTileName {
  if (convImpl.tile && (math !== 'simt' || simtTile(convImpl.tile))) return convImpl.tile;
  if (math === 'simt') return 'm128w32s5';
  if (loader === 'vec') return 'm128w32k128s4';
  // K at which 128-byte stages start to pay for their K padding (measured at 147 and 576).
  const LARGE_K = 256;
  if (math === 'tf32') return k >= LARGE_K ? 'm128w64' : 'm128w32k128s4';
  return k >= LARGE_K ? 'm128w32k128' : 'm128w32s5';
}

/** Why the implicit-GEMM kernel cannot run a call (null: it can). */
export function igemmUnsupported(c: Pick<IgemmCall, 'input' | 'weight' | 'out' | 'groups'>): string | null {
  if (convImpl.mode === 'im2col') return 'KILN_CUDA_CONV_IMPL=im2col';
  if (!igemmDtype(c.input.dtype)) return `dtype ${c.input.dtype}`;
  if (c.groups !== 1) return `groups=${c.groups}`;
  const [o, cg, kh, kw] = c.weight.shape as [number, number, number, number];
  const out4 = c.out.ndim === 4 ? c.out.shape : [1, ...c.out.shape];
  const m = out4[0]! * out4[2]! * out4[3]!;
  if (m > INT_MAX || nPadded(o) * Math.ceil((cg * kh * kw) / 8) * 8 > INT_MAX) return 'sizes beyond 32-bit GEMM indices';
  return null;
}

function as4(t: Tensor): { shape: number[]; strides: number[] } {
  return t.ndim === 4 ? { shape: [...t.shape], strides: [...t.strides] } : { shape: [1, ...t.shape], strides: [0, ...t.strides] };
}

function span(shape: readonly number[], strides: readonly number[]): number {
  return shape.reduce((s, n, i) => s + (n - 1) * Math.abs(strides[i]!), 1);
}

const kernels = new Map<string, CudaKernel>();

function gemmKernel(index: number, spec: IgemmSpec): CudaKernel {
  const key = `${index}#${igemmName(spec)}`;
  let k = kernels.get(key);
  if (!k) {
    const g = igemmSource(spec);
    k = kernelFromSource(index, g.source, g.name, GEMM_PARAMS, [], tileSharedBytes(spec.tile));
    kernels.set(key, k);
  }
  return k;
}

function prepKernel(index: number, dtype: IgemmSpec['dtype'], tf32: boolean, bn: IgemmSpec['dtype'] | null): CudaKernel {
  const key = `${index}#prep#${dtype}#${tf32}#${bn ?? ''}`;
  let k = kernels.get(key);
  if (!k) {
    const g = weightPrepSource(dtype, tf32, bn);
    k = kernelFromSource(index, g.source, g.name, bn ? PREP_BN_PARAMS : PREP_PARAMS);
    kernels.set(key, k);
  }
  return k;
}

/** The spec for a call (after any input layout copy), without launching anything. */
export function igemmSpec(c: IgemmCall, x: { shape: number[]; strides: number[]; ptr: number }, o4: { shape: number[]; strides: number[]; ptr: number }): IgemmSpec {
  const dtype = igemmDtype(c.input.dtype)!;
  const [, cg, kh, kw] = c.weight.shape as [number, number, number, number];
  const eb = elemBytes(dtype);
  const vecN = 16 / eb;
  const xs = x.strides as [number, number, number, number];
  const os = o4.strides as [number, number, number, number];
  const vec = xs[1] === 1 && cg % vecN === 0 && x.ptr % 16 === 0 && (x.shape[0] === 1 || xs[0] % vecN === 0) && xs[2] % vecN === 0 && xs[3] % vecN === 0;
  const math: IgemmMath = dtype !== 'float32' ? 'mma16' : (c.math ?? (backends.cuda.allowTf32Conv ? 'tf32' : 'simt'));
  const pairStore = os[1] === 1 && os[0] % 2 === 0 && os[2] % 2 === 0 && os[3] % 2 === 0 && o4.ptr % (2 * eb) === 0;
  const wide = span(x.shape, xs) > INT_MAX || span(o4.shape, os) > INT_MAX;
  const finalMath: IgemmMath = dtype === 'float32' ? (math === 'mma16' ? 'tf32' : math) : 'mma16';
  return {
    dtype,
    math: finalMath,
    tile: c.tile && (finalMath !== 'simt' || simtTile(c.tile)) ? c.tile : pickTile(finalMath, vec ? 'vec' : 'scalar', cg * kh * kw),
    aLoader: vec ? 'vec' : 'scalar',
    cg,
    kh,
    kw,
    sh: c.stride[0]!,
    sw: c.stride[c.stride.length - 1]!,
    pt: c.padding[0],
    pl: c.padding[2],
    dh: c.dilation[0]!,
    dw: c.dilation[c.dilation.length - 1]!,
    h: x.shape[2]!,
    w: x.shape[3]!,
    oh: o4.shape[2]!,
    ow: o4.shape[3]!,
    cout: o4.shape[1]!,
    xs: [x.shape[0] === 1 ? 0 : xs[0], xs[1], xs[2], xs[3]],
    os,
    // With a BatchNorm the prep kernel folds the bias into the shift.
    bias: c.bias !== null && !c.bn,
    affine: Boolean(c.bn || (c.scale && c.shift)),
    relu: c.relu === true,
    pairStore,
    wide,
  };
}

/** Runs the convolution into `c.out` (any output strides). The caller checked igemmUnsupported. */
export function runIgemm(c: IgemmCall): Tensor {
  const { input, weight, out } = c;
  const index = out.device.index;
  const stream = streamOf(out);
  const temps: Tensor[] = [];
  try {
    const x4 = as4(input);
    const o4 = as4(out);
    const m = o4.shape[0]! * o4.shape[2]! * o4.shape[3]!;
    if (m === 0 || o4.shape[1] === 0) return out;
    let xPtr = ptrOf(input);
    const vecN = 16 / itemSize(input.dtype);
    const cg = weight.shape[1]!;
    if (x4.strides[1] !== 1 && cg % vecN === 0 && c.nchw === 'copy') {
      // NCHW (or other) input with a vector-friendly channel count: one copy to channels_last.
      const cl = allocOut({ shape: x4.shape, strides: channelsLastStrides(x4.shape), dtype: input.dtype, device: input.device });
      temps.push(cl);
      const src = input.ndim === 4 ? input : new Tensor(input.storage, input.dtype, x4.shape, x4.strides, input.offset);
      if (src !== input) temps.push(src);
      copyTensor(cl, src);
      x4.strides = [...cl.strides];
      xPtr = ptrOf(cl);
    }
    for (const [name, t] of [['scale', c.scale], ['shift', c.shift]] as const) {
      if (t && (t.dtype !== 'float32' || t.ndim !== 1 || t.shape[0] !== o4.shape[1])) {
        throw new TypeError(`conv2d epilogue: '${name}' must be a float32 [${o4.shape[1]}] tensor (one per output channel), got ${t.dtype} [${t.shape.join(', ')}]`);
      }
    }
    const spec = igemmSpec(c, { ...x4, ptr: xPtr }, { ...o4, ptr: ptrOf(out) });
    // Weight operand [Npad, Kpad], k = (kh, kw, c), zero padded (tf32-rounded on the tf32 path).
    const kpad = kPadded(spec);
    const npad = nPadded(spec.cout);
    const wp = allocOut({ shape: [npad * kpad], strides: [1], dtype: input.dtype, device: input.device });
    temps.push(wp);
    const ws = weight.strides;
    const total = npad * kpad;
    const prepArgs = [ptrOf(wp), ptrOf(weight), total, kpad, kTotal(spec), spec.cout, cg, spec.kh, spec.kw, ws[0]!, ws[1]!, ws[2]!, ws[3]!];
    let bnDtype: IgemmSpec['dtype'] | null = null;
    let scale: Tensor | null = null;
    let shift: Tensor | null = null;
    if (c.bn) {
      const why = bnUnsupported(c.bn);
      if (why) throw new TypeError(`conv2d epilogue: ${why} (expected one of float32, float16, bfloat16 for all)`);
      bnDtype = igemmDtype(c.bn.runningMean.dtype);
      // scale = ss[0, O), shift = ss[O, 2 O): float32, written by the prep kernel.
      const ss = allocOut({ shape: [2 * spec.cout], strides: [1], dtype: 'float32', device: input.device });
      temps.push(ss);
      scale = new Tensor(ss.storage, 'float32', [spec.cout], [1], ss.offset);
      shift = new Tensor(ss.storage, 'float32', [spec.cout], [1], ss.offset + spec.cout);
      temps.push(scale, shift);
      const vec = (t: Tensor | null): number => (t ? ptrOf(contiguous1d(t, temps)) : 0);
      const convBias = c.bias ? contiguous1d(c.bias, temps) : null;
      prepArgs.push(ptrOf(ss), vec(c.bn.runningMean), vec(c.bn.runningVar), vec(c.bn.weight), vec(c.bn.bias), convBias ? ptrOf(convBias) : 0, c.bn.eps);
    }
    launch(prepKernel(index, spec.dtype, spec.math === 'tf32', bnDtype), prepArgs, { grid: gridFor(index, total, PREP_BLOCK), block: PREP_BLOCK }, stream);
    const bias = spec.bias && c.bias ? contiguous1d(c.bias, temps) : null;
    if (!c.bn && spec.affine) {
      scale = contiguous1d(c.scale!, temps);
      shift = contiguous1d(c.shift!, temps);
    }
    launch(
      gemmKernel(index, spec),
      [ptrOf(out), xPtr, ptrOf(wp), bias ? ptrOf(bias) : 0, scale ? ptrOf(scale) : 0, shift ? ptrOf(shift) : 0, m],
      { grid: Math.ceil(m / tileRows(spec.tile)), gridY: npad / IGEMM_BN, block: tileThreads(spec.tile), sharedBytes: tileSharedBytes(spec.tile) },
      stream,
    );
  } finally {
    for (const t of temps) t.dispose();
  }
  return out;
}

/** A [C] operand with stride 1 (a copy when it is strided). */
function contiguous1d(t: Tensor, temps: Tensor[]): Tensor {
  if (t.strides[0] === 1 || numel(t.shape) <= 1) return t;
  const d = allocOut({ shape: t.shape, strides: [1], dtype: t.dtype, device: t.device });
  temps.push(d);
  return copyTensor(d, t);
}
