/**
 * Eager float32 conv2d on the Wasm cpu path: an implicit GEMM on the Wasm GEMM engine
 * (wasm-sgemm-run.ts), C[pixel, o] = patches[pixel, (kh, kw, c)] . W[(kh, kw, c), o].
 *
 * - The patch matrix [pixels, (kh, kw, c)] is written straight into the engine's Wasm memory, where
 *   the kernel reads it in place (no packing pass): for a channels_last input each kernel row of
 *   a patch is one contiguous run of the input (kw pixels x c channels), one TypedArray.set. The JS
 *   im2col kernel built the matrix element by element and the GEMM then packed it again.
 * - The weight is rearranged and packed once per weight version (kept in the engine's memory,
 *   looked up through the weight's storage), as a compiled linear's weight is.
 * - The output is written through its strides (channels_last or contiguous) with the bias added
 *   in the same copy; images run as one GEMM when their pixels are evenly strided (channels_last),
 *   else one GEMM per image. Tiles of C are split over the engine's threads.
 * Returns null (the caller runs the JS im2col kernel) off the wasm path, for non-float32 operands
 * and for grouped convolutions.
 */
import type { OutMeta } from '../../ops/schema.js';
import type { Storage } from '../../tensor/storage.js';
import type { Tensor } from '../../tensor/tensor.js';
import { bnFold, bnKey, type ConvBatchNorm } from './conv-bn-fold.js';
import { cpuPath } from './native/path.js';
import { allocOut, readable, writable } from './numeric.js';
import { CALL_WORDS, SGEMM_KC, SGEMM_MR, SGEMM_NC_SLIVERS, SGEMM_NR } from './wasm-sgemm.js';
import { type ARows, type PackedB, wasmPackB, wasmRunCalls, wasmScratch, wasmSgemm, wasmSgemmAvailable } from './wasm-sgemm-run.js';

export interface WasmConvArgs {
  readonly stride: readonly number[];
  /** [top, bottom, left, right] (convPadding). */
  readonly padding: readonly [number, number, number, number];
  readonly dilation: readonly number[];
  readonly groups: number;
}

/**
 * K blocks of the direct path: runs of K that are contiguous in the padded input (one kernel row,
 * kw pixels x c channels, when undilated; else one pixel's c channels), cut to at most KC.
 */
interface KBlock {
  /** First K index (in (kh, kw, c) order). */
  readonly k0: number;
  readonly len: number;
  /** Byte offset of the block's first value from a pixel's patch origin in the padded input. */
  readonly aOff: number;
}

interface PackedConvWeight {
  version: number;
  offset: number;
  strides: string;
  /** The K blocks packed separately ('direct'), or one packing of the whole K ('rows'). */
  key: string;
  /** The BatchNorm folded into this packing ('' when none; conv-bn-fold.ts bnKey). */
  bnKey: string;
  packed: PackedB[];
  /** With a BatchNorm: the epilogue bias (the conv bias folded in). */
  shift: Float32Array | null;
}

/** Per weight storage, at most one packing without a BatchNorm and one with. */
const weights = new WeakMap<Storage, PackedConvWeight[]>();

/**
 * B[(kh, kw, c), o] = weight[o, c, kh, kw] (times the folded BatchNorm's scale[o]), packed in the
 * engine per K range (null when too large to keep).
 */
function packedWeight(weight: Tensor, ranges: readonly { k0: number; len: number }[], bn: ConvBatchNorm | null, bias: Tensor | null): PackedConvWeight | null {
  const strides = weight.strides.join(',');
  const key = ranges.map((r) => `${r.k0}+${r.len}`).join(',');
  const fold = bn ? bnKey(bn, bias) : '';
  const list = weights.get(weight.storage) ?? [];
  const e = list.find((x) => (x.bnKey === '') === (fold === ''));
  if (e && e.version === weight.storage.version && e.offset === weight.offset && e.strides === strides && e.key === key && e.bnKey === fold) return e;
  const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
  const [s0, s1, s2, s3] = weight.strides as [number, number, number, number];
  const folded = bn ? bnFold(bn, bias, o) : null;
  const r = readable(weight);
  const K = kh * kw * cg;
  const wp = new Float32Array(o * K);
  for (let oo = 0; oo < o; oo++) {
    const f = folded ? folded.scale[oo]! : 1;
    for (let i = 0; i < kh; i++)
      for (let j = 0; j < kw; j++)
        for (let c = 0; c < cg; c++) wp[oo * K + (i * kw + j) * cg + c] = r.data[r.offset + oo * s0 + c * s1 + i * s2 + j * s3]! * f;
  }
  // A stale packing of the same layout (and the same kind, folded or not) is overwritten in place.
  const reuse = e && e.key === key ? e.packed : [];
  const packed: PackedB[] = [];
  for (const [q, rg] of ranges.entries()) {
    const pb = wasmPackB({ data: wp, offset: rg.k0, rowStride: 1, colStride: K }, rg.len, o, reuse[q], weight.storage);
    if (!pb) return null;
    packed.push(pb);
  }
  const entry = { version: weight.storage.version, offset: weight.offset, strides, key, bnKey: fold, packed, shift: folded ? folded.shift : null };
  weights.set(weight.storage, [...list.filter((x) => x !== e), entry]);
  return entry;
}

/** ReLU as the eager kernel computes it (NaN kept, -0 to 0). */
const relu = (v: number): number => (v > 0 || v !== v ? v : 0);

/**
 * K runs of at least this length take the direct path; shorter ones go through patch rows, since
 * each K block reloads and stores the C tiles. A 7x7 kernel over 3 channels (runs of 21, the
 * conv-stack's first layer) measured faster direct: compiled conv-stack single thread, 4
 * alternating runs, CPU ms per forward 13.3-16.3 direct vs 16.3-24.2 through patch rows.
 */
const DIRECT_MIN_RUN = 16;

export function wasmConv2d(meta: OutMeta, input: Tensor, weight: Tensor, bias: Tensor | null, a: WasmConvArgs, bn: ConvBatchNorm | null = null): Tensor | null {
  if (a.groups !== 1 || input.dtype !== 'float32' || weight.dtype !== 'float32' || meta.dtype !== 'float32' || (bias && bias.dtype !== 'float32')) return null;
  if (cpuPath() !== 'wasm' || !wasmSgemmAvailable()) return null;
  const batched = input.shape.length === 4;
  const [n, c, h, w] = (batched ? input.shape : [1, ...input.shape]) as [number, number, number, number];
  const [xs0, xs1, xs2, xs3] = (batched ? input.strides : [0, ...input.strides]) as [number, number, number, number];
  const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
  if (cg !== c) return null;
  const oh = meta.shape[batched ? 2 : 1]!;
  const ow = meta.shape[batched ? 3 : 2]!;
  const x = readable(input);
  if (!(x.data instanceof Float32Array)) return null;
  if (n * o * oh * ow === 0) return allocOut(meta);
  const K = kh * kw * c;
  const dh = a.dilation[0]!;
  const dw = a.dilation[a.dilation.length - 1]!;
  if ((dw === 1 ? kw * c : c) >= DIRECT_MIN_RUN) return directConv(meta, input, weight, bias, a, bn);
  const pw = packedWeight(weight, [{ k0: 0, len: K }], bn, bias);
  if (!pw) return null;
  const packed = pw.packed[0]!;
  const out = allocOut(meta);
  const [os0, os1, os2, os3] = (batched ? out.strides : [0, ...out.strides]) as [number, number, number, number];
  const res = writable(out);
  const xd = x.data;
  const sh = a.stride[0]!;
  const sw = a.stride[a.stride.length - 1]!;
  const [pt, , pl] = a.padding;
  const plane = oh * ow;
  // With a folded BatchNorm the epilogue bias is its shift (the conv bias is folded into it).
  const rb = bias && !pw.shift ? readable(bias) : null;
  const biasOp = pw.shift ? { data: pw.shift, offset: 0, stride: 1 } : rb ? { data: rb.data, offset: rb.offset, stride: bias!.strides[0] ?? 1 } : null;

  // A channels_last input with undilated width: one kernel row of a patch (kw pixels x c channels)
  // is one contiguous run of the input, copied with TypedArray.set.
  const runs = xs1 === 1 && xs3 === c && dw === 1;

  /** Patch rows of pixels [first + m0, first + m0 + m) (pixel = image * plane + y * ow + x), K ordered (kh, kw, c). */
  const rows =
    (first: number): ARows =>
    (buf, at, m0, m, k) => {
      for (let q = 0; q < m; q++) {
        const pix = first + m0 + q;
        const b = Math.floor(pix / plane);
        const rem = pix - b * plane;
        const y = Math.floor(rem / ow);
        const xo = rem - y * ow;
        const xBase = x.offset + b * xs0;
        const ih0 = y * sh - pt;
        const iw0 = xo * sw - pl;
        let t = at + q * k;
        for (let ki = 0; ki < kh; ki++) {
          const ih = ih0 + ki * dh;
          if (ih < 0 || ih >= h) {
            buf.fill(0, t, t + kw * c);
            t += kw * c;
            continue;
          }
          if (runs) {
            // columns iw0 .. iw0 + kw - 1, the part inside [0, w) copied, the rest zero
            const lo = Math.min(kw, Math.max(0, -iw0));
            const hi = Math.max(lo, Math.min(kw, w - iw0));
            if (lo > 0) buf.fill(0, t, t + lo * c);
            if (hi > lo) {
              const src = xBase + ih * xs2 + (iw0 + lo) * c;
              const len = (hi - lo) * c;
              // A subarray view costs an allocation: short runs (a 7x7 kernel over 3 channels: 21) copy by hand.
              if (len >= 64) buf.set(xd.subarray(src, src + len), t + lo * c);
              else for (let q2 = 0, d = t + lo * c; q2 < len; q2++) buf[d + q2] = xd[src + q2]!;
            }
            if (hi < kw) buf.fill(0, t + hi * c, t + kw * c);
            t += kw * c;
            continue;
          }
          for (let kj = 0; kj < kw; kj++) {
            const iw = iw0 + kj * dw;
            if (iw < 0 || iw >= w) {
              buf.fill(0, t, t + c);
              t += c;
              continue;
            }
            for (let cc = 0, src = xBase + ih * xs2 + iw * xs3; cc < c; cc++, src += xs1) buf[t++] = xd[src]!;
          }
        }
      }
    };

  // Pixels of an output plane flatten to one stride (os3) when os2 = ow * os3; across images too when os0 = plane * os3.
  if (oh > 1 && os2 !== ow * os3) throw new Error(`conv2d (wasm): unexpected output strides [${out.strides.join(', ')}]`);
  const od = res.data;
  if (n === 1 || os0 === plane * os3) {
    wasmSgemm(n * plane, o, K, 1, null, null, 0, { data: od, offset: res.offset, rowStride: os3, colStride: os1 }, { packed, rowsA: rows(0), bias: biasOp });
  } else {
    for (let b = 0; b < n; b++) wasmSgemm(plane, o, K, 1, null, null, 0, { data: od, offset: res.offset + b * os0, rowStride: os3, colStride: os1 }, { packed, rowsA: rows(b * plane), bias: biasOp });
  }
  // A fresh output is dense: its elements are exactly [offset, offset + numel) of the storage.
  if (bn?.relu) for (let i = res.offset, end = res.offset + n * o * plane; i < end; i++) od[i] = relu(od[i]!);
  res.commit();
  return out;
}

/**
 * The direct path: no patch matrix at all. The input is copied once into a zero-bordered NHWC
 * buffer in the Wasm memory; then for an output row y and a K block (a run of the patch that is
 * contiguous in that buffer), the patches of four consecutive output pixels start sw * c floats
 * apart, so macroRow reads them in place with lda = sw * c * 4. One call per (output row, K block,
 * column panel), accumulating over the K blocks into the output row's C tiles; C rows are padded to
 * whole 4-pixel slivers per output row. Output rows are dealt to the threads whole.
 */
function directConv(meta: OutMeta, input: Tensor, weight: Tensor, bias: Tensor | null, a: WasmConvArgs, bn: ConvBatchNorm | null): Tensor | null {
  const batched = input.shape.length === 4;
  const [n, c, h, w] = (batched ? input.shape : [1, ...input.shape]) as [number, number, number, number];
  const [xs0, xs1, xs2, xs3] = (batched ? input.strides : [0, ...input.strides]) as [number, number, number, number];
  const [o, , kh, kw] = weight.shape as [number, number, number, number];
  const oh = meta.shape[batched ? 2 : 1]!;
  const ow = meta.shape[batched ? 3 : 2]!;
  const sh = a.stride[0]!;
  const sw = a.stride[a.stride.length - 1]!;
  const dh = a.dilation[0]!;
  const dw = a.dilation[a.dilation.length - 1]!;
  const [pt, , pl] = a.padding;
  const owp = Math.ceil(ow / SGEMM_MR) * SGEMM_MR;
  // The padded image covers every read, the padded output columns (ow .. owp) included.
  const Hp = Math.max(h + pt, (oh - 1) * sh + (kh - 1) * dh + 1);
  const Wp = Math.max(w + pl, (owp - 1) * sw + (kw - 1) * dw + 1);
  const blocks: KBlock[] = [];
  const run = dw === 1 ? kw * c : c;
  for (let ki = 0; ki < kh; ki++) {
    for (let kj = 0; kj < (dw === 1 ? 1 : kw); kj++) {
      const k0 = (ki * kw + kj) * c;
      for (let q = 0; q < run; q += SGEMM_KC) blocks.push({ k0: k0 + q, len: Math.min(SGEMM_KC, run - q), aOff: ((ki * dh * Wp + kj * dw) * c + q) * 4 });
    }
  }
  const pw = packedWeight(weight, blocks, bn, bias);
  if (!pw) return null;
  const packed = pw.packed;
  const x = readable(input);
  const xd = x.data as Float32Array;
  const nS = Math.ceil(o / SGEMM_NR);
  const Np = nS * SGEMM_NR;
  const rowsC = n * oh * owp;
  const panels = Math.ceil(nS / SGEMM_NC_SLIVERS);
  const nCalls = n * oh * blocks.length * panels;
  const inWords = n * Hp * Wp * c;
  const cWords = rowsC * Np;
  const sc = wasmScratch((inWords + cWords + nCalls * CALL_WORDS) * 4 + 128);
  const inAt = sc.at;
  const cAt = (inAt + inWords * 4 + 63) & ~63;
  const tAt = (cAt + cWords * 4 + 63) & ~63;
  const f = sc.f32;
  // the zero-bordered NHWC copy of the input
  const in0 = inAt >> 2;
  f.fill(0, in0, in0 + inWords);
  for (let b = 0; b < n; b++) {
    for (let ih = 0; ih < h; ih++) {
      const dst = in0 + ((b * Hp + ih + pt) * Wp + pl) * c;
      const src = x.offset + b * xs0 + ih * xs2;
      if (xs1 === 1 && xs3 === c) f.set(xd.subarray(src, src + w * c), dst);
      else for (let iw = 0; iw < w; iw++) for (let cc = 0; cc < c; cc++) f[dst + iw * c + cc] = xd[src + iw * xs3 + cc * xs1]!;
    }
  }
  const out = allocOut(meta);
  const [os0, os1, os2, os3] = (batched ? out.strides : [0, ...out.strides]) as [number, number, number, number];
  // The epilogue bias: a folded BatchNorm's shift (the conv bias included), else the conv bias.
  const bv = new Float32Array(o);
  const hasBias = bias !== null || pw.shift !== null;
  if (pw.shift) bv.set(pw.shift);
  else if (bias) {
    const rb = readable(bias);
    for (let j = 0; j < o; j++) bv[j] = rb.data[rb.offset + j * (bias.strides[0] ?? 1)]!;
  }
  const act = bn?.relu === true;
  // channels_last output whose rows need no padding (ow % 4 = 0, o % 8 = 0): C is laid out exactly
  // as the output, so C starts as the bias rows (the first K block accumulates onto them) and
  // leaves in one copy.
  const dense = os1 === 1 && o === Np && owp === ow && os3 === o && os2 === ow * o && (n === 1 || os0 === oh * ow * o);
  const c0 = cAt >> 2;
  if (dense && hasBias) {
    f.set(bv, c0);
    // doubling copies: log2(rows) memcpys instead of a loop over every element
    for (let have = o; have < cWords; have *= 2) f.copyWithin(c0 + have, c0, c0 + Math.min(have, cWords - have));
  }
  const firstAcc = dense && hasBias ? 1 : 0;
  // the call list: per output row, per K block, per column panel
  const t = sc.i32;
  const groupStarts: number[] = [0];
  let q = tAt >> 2;
  let count = 0;
  const ldc = Np * 4;
  for (let b = 0; b < n; b++) {
    for (let y = 0; y < oh; y++) {
      const rowBase = inAt + (b * Hp + y * sh) * Wp * c * 4;
      const cRow = cAt + (b * oh + y) * owp * ldc;
      for (const [bi, blk] of blocks.entries()) {
        for (let jc = 0; jc < nS; jc += SGEMM_NC_SLIVERS) {
          const ncs = Math.min(SGEMM_NC_SLIVERS, nS - jc);
          t.set([1, owp / SGEMM_MR, ncs, blk.len, rowBase + blk.aOff, sw * c * 4, packed[bi]!.at + jc * blk.len * SGEMM_NR * 4, cRow + jc * SGEMM_NR * 4, ldc, bi > 0 ? 1 : firstAcc], q);
          q += CALL_WORDS;
          count++;
        }
      }
      groupStarts.push(count);
    }
  }
  wasmRunCalls(tAt >> 2, groupStarts, n * oh * ow * o * kh * kw * c);
  const res = writable(out);
  const od = res.data;
  const cv = sc.f32;
  if (dense && od instanceof Float32Array) {
    if (act) for (let i = 0; i < cWords; i++) od[res.offset + i] = relu(cv[c0 + i]!);
    else od.set(cv.subarray(c0, c0 + cWords), res.offset);
    res.commit();
    return out;
  }
  if (dense && hasBias) bv.fill(0); // the bias is already in C
  // C rows (b, y, x < ow) into the output through its strides, with the bias
  for (let b = 0; b < n; b++) {
    for (let y = 0; y < oh; y++) {
      for (let xo = 0; xo < ow; xo++) {
        const src = c0 + ((b * oh + y) * owp + xo) * Np;
        const dst = res.offset + b * os0 + y * os2 + xo * os3;
        if (act) for (let j = 0; j < o; j++) od[dst + j * os1] = relu(cv[src + j]! + bv[j]!);
        else for (let j = 0; j < o; j++) od[dst + j * os1] = cv[src + j]! + bv[j]!;
      }
    }
  }
  res.commit();
  return out;
}
