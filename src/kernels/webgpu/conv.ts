/**
 * webgpu kernel for conv2d: direct convolution, one invocation per output element, accumulating
 * input x weight over its group's channels and the (dilated) window in f32, plus the bias; the
 * result rounded once to the output's dtype. Any stride, 2- or 4-value padding, dilation and
 * groups; input, weight and output of any strides (contiguous and channels_last alike; an
 * unbatched input is a batch of one), read in place. float32, float16 and bfloat16.
 *
 * Where a group has GEMM_MIN_OG or more output channels (and KILN_WEBGPU_CONV_GEMM is on, the
 * default), the convolution runs instead as a tiled implicit GEMM (conv-gemm.ts): the direct kernel
 * reads every input element once per output channel from global memory, which left the 3x3 64->64
 * conv of the conv-stack bench at about 0.5 TFLOP/s on an H200. The direct kernel stays for the
 * geometries a 64-column GEMM tile would mostly waste (depthwise and other narrow groups). Where the
 * GEMM has few tiles and a long K (the weight gradient), it splits K (conv-gemm.ts, planSplits).
 * float16 convolutions of one group with a channels_last output run instead on the subgroup matrix
 * GEMM through an explicit im2col where the device has it (conv-im2col.ts; KILN_WEBGPU_CONV_IM2COL).
 */
import { conv2d, convOutputSize, convPadding } from '../../ops/defs/nn.js';
import { registerKernel } from '../../ops/registry.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut, unsupportedDtype, webgpu } from './device.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { dataKind, groupsFor, header, kernelFor, WG, words } from './template.js';
import { getOption } from '../../runtime/config.js';
import { IM2COL_META_WORDS, IM2COL_WG, IM2COL_WORD, im2colSource } from './conv-im2col.js';
import { runGemm, stagedGemmAvailable } from './linalg.js';
import { Tensor as TensorImpl } from '../../tensor/tensor.js';
import { combineSource, CONV_GEMM_META, convGemmKey, convGemmTiles, generateConvGemm, planSplits } from './conv-gemm.js';

/** Output channels per group from which the implicit GEMM is used (fewer waste most of its 64-wide tile). */
export const GEMM_MIN_OG = 8;

/**
 * Metadata: [total, O, OH, OW, Cg, KH, KW, H, W, sh, sw, pt, pl, dh, dw, Og, xOff, wOff, oOff,
 * bOff, bStride, xs0..3, ws0..3, os0..3].
 */
function convSource(k: StorageKind, bias: boolean): string {
  const binds = [
    { kind: k, written: true },
    { kind: k, written: false },
    { kind: k, written: false },
    ...(bias ? [{ kind: k, written: false }] : []),
  ];
  const lines = header(binds);
  lines.push(
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let O = kmeta[1]; let OH = kmeta[2]; let OW = kmeta[3]; let Cg = kmeta[4]; let KH = kmeta[5]; let KW = kmeta[6];',
    '  let H = i32(kmeta[7]); let W = i32(kmeta[8]);',
    `  for (var e = gid.x; e < kmeta[0]; e = e + ng.x * ${WG}u) {`,
    '    let ow = e % OW; let oh = (e / OW) % OH; let o = (e / (OW * OH)) % O; let n = e / (OW * OH * O);',
    '    let c0 = (o / kmeta[15]) * Cg;',
    '    let h0 = i32(oh * kmeta[9]) - i32(kmeta[11]); let w0 = i32(ow * kmeta[10]) - i32(kmeta[12]);',
    '    let xn = kmeta[16] + n * kmeta[21]; let wo = kmeta[17] + o * kmeta[25];',
    `    var acc = ${bias ? loadExpr(k, 'b3', 'kmeta[19] + o * kmeta[20]', false) : '0.0f'};`,
    '    for (var c = 0u; c < Cg; c = c + 1u) {',
    '      let xc = xn + (c0 + c) * kmeta[22]; let wc = wo + c * kmeta[26];',
    '      for (var kh = 0u; kh < KH; kh = kh + 1u) {',
    '        let ih = h0 + i32(kh * kmeta[13]);',
    '        if (ih < 0 || ih >= H) { continue; }',
    '        for (var kw = 0u; kw < KW; kw = kw + 1u) {',
    '          let iw = w0 + i32(kw * kmeta[14]);',
    '          if (iw < 0 || iw >= W) { continue; }',
    `          acc = acc + ${loadExpr(k, 'b1', 'xc + u32(ih) * kmeta[23] + u32(iw) * kmeta[24]', false)} * ${loadExpr(k, 'b2', 'wc + kh * kmeta[27] + kw * kmeta[28]', false)};`,
    '        }',
    '      }',
    '    }',
    `    ${storeStmt(k, 'b0', 'kmeta[18] + n * kmeta[29] + o * kmeta[30] + oh * kmeta[31] + ow * kmeta[32]', 'acc').replace(/\n/g, '\n    ')}`,
    '  }',
    '}',
  );
  return lines.join('\n');
}

registerKernel(conv2d, 'webgpu', (ctx, input, weight, bias, stride, padding, dilation, groups) => {
  const op = 'conv2d';
  const out = allocOut(ctx.out);
  const k = dataKind(op, input);
  if (k.wide) {
    out.dispose();
    throw unsupportedDtype(op, input);
  }
  const q = convGeometry(op, input, weight, stride as number[], padding as number[], dilation as number[], groups as number);
  const { batched, n, h, w, o, cg, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, g } = q;
  const total = n * o * oh * ow;
  if (total === 0) return out;
  const four = (t: Tensor): number[] => (batched ? [...t.strides] : [0, ...t.strides]);
  const hasBias = bias !== null && bias !== undefined;
  const bufs = [out.storage.buffer, input.storage.buffer, weight.storage.buffer, ...(bias ? [bias.storage.buffer] : [])];
  if (o / g >= GEMM_MIN_OG && getOption('KILN_WEBGPU_CONV_GEMM') && im2colConv(out, input, weight, bias ?? null, k.kind, q)) return out;
  if (o / g >= GEMM_MIN_OG && getOption('KILN_WEBGPU_CONV_GEMM')) {
    const xs = four(input);
    const og = o / g;
    // (kh, kw, c) when the channels are the input's unit-stride dim (channels_last), else (c, kh, kw).
    const order = xs[1] === 1 && cg > 1 ? 'hwc' : 'chw';
    // Weight tiles walk output channels fastest where those are the weight's unit-stride dim.
    const bMajor = weight.strides[0] === 1 && og > 1 ? 'n' : 'k';
    const m = n * oh * ow;
    const K = cg * kh * kw;
    const { tilesM, tilesN } = convGemmTiles(m, og);
    const { splits, kc } = planSplits(m, og, K, g);
    const gm = words([m, og, K, g * splits, tilesN, tilesM, oh, ow, cg, kh, kw, h, w, sh, sw, pt, pl, dh, dw, input.offset, weight.offset, out.offset, bias?.offset ?? 0, bias?.strides[0] ?? 0, ...xs, ...weight.strides, ...four(out), splits, kc]);
    if (gm.length !== CONV_GEMM_META.words) throw new Error(`conv2d: ${gm.length} metadata words, want ${CONV_GEMM_META.words}`);
    const grid: [number, number, number] = [Math.min(tilesN, 65535), Math.min(tilesM, 65535), Math.min(g * splits, 65535)];
    const acc = webgpu();
    if (splits === 1) {
      const spec = { kind: k.kind, order, bMajor, bias: hasBias, partial: false } as const;
      acc.dispatch(kernelFor(`conv2d.gemm.${convGemmKey(spec)}`, () => generateConvGemm(spec)), bufs, gm, grid);
      return out;
    }
    const spec = { kind: k.kind, order, bMajor, bias: false, partial: true } as const;
    const part = allocOut({ shape: [g * splits * m * og], strides: [1], dtype: 'float32', device: out.device });
    try {
      acc.dispatch(kernelFor(`conv2d.gemm.${convGemmKey(spec)}`, () => generateConvGemm(spec)), [part.storage.buffer, input.storage.buffer, weight.storage.buffer], gm, grid);
      const combine = kernelFor(`conv2d.gemm.combine.${k.kind}.${hasBias ? 'b' : ''}`, () => combineSource(k.kind, hasBias));
      acc.dispatch(combine, [out.storage.buffer, part.storage.buffer, ...(bias ? [bias.storage.buffer] : [])], gm, groupsFor(g * m * og));
    } finally {
      part.dispose();
    }
    return out;
  }
  const meta = words([
    total,
    o,
    oh,
    ow,
    cg,
    kh,
    kw,
    h,
    w,
    sh,
    sw,
    pt,
    pl,
    dh,
    dw,
    o / g,
    input.offset,
    weight.offset,
    out.offset,
    bias?.offset ?? 0,
    bias?.strides[0] ?? 0,
    ...four(input),
    ...weight.strides,
    ...four(out),
  ]);
  const kern = kernelFor(`conv2d.${k.kind}.${bias ? 'b' : ''}`, () => convSource(k.kind, hasBias));
  webgpu().dispatch(kern, bufs, meta, groupsFor(total));
  return out;
});

export interface ConvGeometry {
  n: number; h: number; w: number; o: number; cg: number; kh: number; kw: number;
  sh: number; sw: number; dh: number; dw: number; pt: number; pl: number; oh: number; ow: number; g: number; batched: boolean;
}

/** The geometry of a conv2d call (an unbatched input is a batch of one; 2- or 4-value padding). */
export function convGeometry(op: string, input: Tensor, weight: Tensor, stride: readonly number[], padding: readonly number[], dilation: readonly number[], g: number): ConvGeometry {
  const batched = input.ndim === 4;
  const [n, , h, w] = (batched ? input.shape : [1, ...input.shape]) as [number, number, number, number];
  const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
  const two = (v: readonly number[]): [number, number] => [v[0]!, v[v.length - 1]!];
  const [sh, sw] = two(stride);
  const [dh, dw] = two(dilation);
  const [pt, pb, pl, pr] = convPadding(op, padding);
  const oh = convOutputSize(h, pt, pb, kh, sh, dh);
  const ow = convOutputSize(w, pl, pr, kw, sw, dw);
  return { n, h, w, o, cg, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, g, batched };
}

/**
 * What a fused caller (conv-bn.ts) changes in the im2col route: `fold` rewrites the packed weight
 * [O, Kp] in place and returns the bias the GEMM adds (or null); `relu` is the GEMM's epilogue ReLU.
 */
export interface Im2colEpilogue {
  readonly fold: (packed: Tensor, Kp: number, K: number) => Tensor | null;
  readonly relu: boolean;
}

/** Whether `t`'s buffer is whole u32 words (the gather reads 16-bit pairs as u32). */
const wholeU32 = (t: Tensor): boolean => t.storage.buffer.capacity % 4 === 0;

/**
 * The float16 route of conv-im2col.ts, where it applies (one group, float16 on the staged subgroup
 * matrix GEMM, a channels_last output, A within a binding): weight packed, input gathered, one
 * GEMM with the bias in its epilogue. Returns false (nothing done) where it does not apply.
 * With `epi` (conv2dBatchNorm) the packed weight is folded and the GEMM ends in its ReLU.
 */
export function im2colConv(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor | null, kind: StorageKind, q: ConvGeometry, epi?: Im2colEpilogue): boolean {
  if (q.g !== 1 || !getOption('KILN_WEBGPU_CONV_IM2COL') || !stagedGemmAvailable(kind)) return false;
  const os = q.batched ? out.strides : [0, ...out.strides];
  const M = q.n * q.oh * q.ow;
  // The output as a row-major [pixels, channels] matrix: channels_last (or one pixel per image row).
  if (!(os[1] === 1 && os[3] === q.o && (q.ow === 1 || os[2] === q.ow * q.o) && (q.n === 1 || os[0] === q.oh * q.ow * q.o))) return false;
  if (out.offset % IM2COL_WORD !== 0 || !wholeU32(input) || !wholeU32(weight)) return false;
  const K = q.cg * q.kh * q.kw;
  const Kp = Math.ceil(K / IM2COL_WORD) * IM2COL_WORD;
  const acc = webgpu();
  const xs = q.batched ? input.strides : [0, ...input.strides];
  // The implicit form: the GEMM reads A's words straight from a channels_last input whose channels
  // come in whole 16-byte words (every tap's channels c..c+7 are one word), so A is never built.
  const implicit = getOption('KILN_WEBGPU_CONV_IMPLICIT') && q.cg % IM2COL_WORD === 0 && xs[1] === 1 && input.offset % IM2COL_WORD === 0 && [xs[0]!, xs[2]!, xs[3]!].every((s) => s % IM2COL_WORD === 0);
  const limit = acc.bridge.adapter.limits.maxStorageBufferBindingSize ?? 2 ** 27;
  if (!implicit && M * Kp * 2 > limit) return false;
  const gather = kernelFor('conv2d.im2col.16', im2colSource);
  const run = (dst: Tensor, src: Tensor, rows: number, geo: number[], srcStrides: readonly number[]): void => {
    const total = (rows * Kp) / IM2COL_WORD;
    const groups = Math.ceil(total / IM2COL_WG);
    const meta = words([total, Kp, K, q.cg, q.kh, q.kw, ...geo, src.offset, ...srcStrides]);
    if (meta.length !== IM2COL_META_WORDS) throw new Error(`conv2d: ${meta.length} im2col metadata words, want ${IM2COL_META_WORDS}`);
    acc.dispatch(gather, [dst.storage.buffer, src.storage.buffer], meta, [Math.min(groups, 65535), Math.ceil(groups / 65535), 1]);
  };
  const temps: Tensor[] = [];
  try {
    const wp = allocOut({ shape: [q.o, Kp], strides: [Kp, 1], dtype: weight.dtype, device: out.device });
    temps.push(wp);
    // The weight as O images of KH x KW pixels, C channels, convolved to 1 x 1 outputs.
    run(wp, weight, q.o, [1, 1, q.kh, q.kw, 1, 1, 0, 0, 1, 1], weight.strides);
    let a: Tensor;
    if (implicit) {
      // A [M, K] view at the input's offset: only its offset is read (GemmSpec.aConv).
      a = new TensorImpl(input.storage, input.dtype, [M, Kp], [Kp, 1], input.offset);
    } else {
      a = allocOut({ shape: [M, Kp], strides: [Kp, 1], dtype: input.dtype, device: out.device });
      run(a, input, M, [q.oh, q.ow, q.h, q.w, q.sh, q.sw, q.pt, q.pl, q.dh, q.dw], xs);
    }
    temps.push(a);
    const wt = new TensorImpl(wp.storage, wp.dtype, [Kp, q.o], [1, Kp], wp.offset);
    temps.push(wt);
    const flat = new TensorImpl(out.storage, out.dtype, [M, q.o], [q.o, 1], out.offset);
    temps.push(flat);
    const folded = epi ? epi.fold(wp, Kp, K) : bias;
    if (epi && folded) temps.push(folded);
    const b = folded === null ? null : new TensorImpl(folded.storage, folded.dtype, [q.o], [folded.strides[0] ?? 1], folded.offset);
    if (b) temps.push(b);
    const convA = implicit ? [q.oh, q.ow, q.cg, q.kw, q.sh, q.sw, q.pt, q.pl, q.dh, q.dw, q.h, q.w, xs[0]!, xs[2]!, xs[3]!] : undefined;
    runGemm({ op: epi ? 'conv2dBatchNorm' : 'conv2d', out: flat, a, b: wt, batch: [], M, N: q.o, K: Kp, bias: b, relu: epi?.relu === true, ...(convA ? { convA } : {}) });
  } finally {
    for (const t of temps) t.dispose();
  }
  return true;
}
