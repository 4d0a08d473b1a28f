/**
 * float16 conv2d on the subgroup matrix GEMM (linalg.ts's staged kernel), through an explicit
 * im2col: the implicit GEMM (conv-gemm.ts) runs on f32 FMAs whatever the dtype, and the staged
 * kernel reads its operands as 16-byte words, which an im2col gather cannot give it in place. So
 * for a float16 convolution of one group whose output is channels_last (its [pixels, channels]
 * view is a row-major matrix), where the device runs the staged kernel:
 *
 * 1. The weight [O, C, KH, KW] (any strides) is packed to Wp [O, Kp], k in (kh, kw, c) order,
 *    zero for k >= K = C KH KW, Kp = K rounded up to a 16-byte word (8 elements).
 * 2. The input is gathered to A [M, Kp] (M = batch OH OW output pixels), the same k order, zero for
 *    padding and k >= K: consecutive k are consecutive channels of one tap, so a channels_last
 *    input is read in runs of C elements.
 * 3. out [M, O] = A @ Wp^T + bias on the staged GEMM (Wp read transposed in place: layout 'kk').
 *
 * Both gathers are the same kernel (the weight is an "input" of O images of KH x KW pixels and a
 * 1 x 1 output): one invocation per 16-byte word of the destination. It splits the word's first k
 * into (kh, kw, c) with two divisions and steps the other 7 by carries: with four divisions an
 * element the gather was bound by integer division (conv-stack's 7x7 stem, C = 3: im2col plus
 * GEMM 0.228 ms on an H100, the GEMM alone 0.102). It assembles the word's 8 elements
 * from 16-bit halves of the source's u32 words, so values are copied bit for bit (no float
 * conversion; works for shader-f16 and packed float16 storage alike). A costs M Kp 2 bytes (the
 * conv-stack's 3x3 64->64 layer: 231 MB, moved at memory bandwidth, against 14.8 GFLOP the matrix
 * units now do); conv.ts falls back to the implicit GEMM where A would exceed a binding.
 *
 * Where the input's channels come in whole words (C a multiple of 8, channels_last, word-aligned
 * strides and offset), step 2 is skipped (KILN_WEBGPU_CONV_IMPLICIT): the staged GEMM loads each
 * A word straight from the input at its im2col address (GemmSpec.aConv), since a word of k in
 * (kh, kw, c) order is then 8 consecutive channels of one tap, 16 contiguous bytes of the input.
 */
import { header } from './template.js';

/** Elements per 16-byte word of float16. */
export const IM2COL_WORD = 8;

/** Invocations per workgroup of the gather. */
export const IM2COL_WG = 256;

/**
 * Metadata: [words (M Kp / 8), Kp, K, C, KH, KW, OH, OW, H, W, sh, sw, pt, pl, dh, dw, xOff,
 * sxn, sxc, sxh, sxw].
 */
export const IM2COL_META_WORDS = 21;

/** WGSL of the gather: binding 0 the destination (vec4<u32> words), 1 the source (u32 words of 16-bit pairs). */
export function im2colSource(): string {
  const lines = header([{ kind: 'u32', written: true }, { kind: 'u32', written: false }]);
  // (b0 is declared array<u32>; the destination is written a word of 8 halves as 4 u32.)
  lines.push(
    `@compute @workgroup_size(${IM2COL_WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let total = kmeta[0]; let Kp = kmeta[1]; let K = kmeta[2]; let C = kmeta[3]; let KW = kmeta[5];',
    '  let OH = kmeta[6]; let OW = kmeta[7]; let H = i32(kmeta[8]); let W = i32(kmeta[9]);',
    '  let sh = kmeta[10]; let sw = kmeta[11]; let pt = i32(kmeta[12]); let pl = i32(kmeta[13]); let dh = kmeta[14]; let dw = kmeta[15];',
    '  let xo = kmeta[16]; let sxn = kmeta[17]; let sxc = kmeta[18]; let sxh = kmeta[19]; let sxw = kmeta[20];',
    `  let wpr = Kp / ${IM2COL_WORD}u;`,
    `  for (var q = gid.x + gid.y * ng.x * ${IM2COL_WG}u; q < total; q = q + ng.x * ng.y * ${IM2COL_WG}u) {`,
    '    let m = q / wpr; let k0 = (q % wpr) * 8u;',
    '    let ow = m % OW; let t = m / OW; let oh = t % OH; let n = t / OH;',
    '    let ih0 = i32(oh * sh) - pt; let iw0 = i32(ow * sw) - pl; let xb = xo + n * sxn;',
    '    var w = array<u32, 4>(0u, 0u, 0u, 0u);',
    // The word's first k split into (kh, kw, c) once; the next 7 step c and carry into kw and kh.
    '    var c = k0 % C; let tap0 = k0 / C; var kw = tap0 % KW; var kh = tap0 / KW;',
    '    for (var j = 0u; j < 8u; j = j + 1u) {',
    '      let ih = ih0 + i32(kh * dh); let iw = iw0 + i32(kw * dw);',
    '      if (k0 + j < K && ih >= 0 && ih < H && iw >= 0 && iw < W) {',
    '        let e = xb + c * sxc + u32(ih) * sxh + u32(iw) * sxw;',
    '        let half = (b1[e / 2u] >> ((e % 2u) * 16u)) & 0xffffu;',
    '        w[j / 2u] = w[j / 2u] | (half << ((j % 2u) * 16u));',
    '      }',
    '      c = c + 1u; let nextTap = c == C; c = select(c, 0u, nextTap);',
    '      kw = kw + select(0u, 1u, nextTap); let nextRow = kw == KW; kw = select(kw, 0u, nextRow); kh = kh + select(0u, 1u, nextRow);',
    '    }',
    '    b0[q * 4u] = w[0]; b0[q * 4u + 1u] = w[1]; b0[q * 4u + 2u] = w[2]; b0[q * 4u + 3u] = w[3];',
    '  }',
    '}',
  );
  return lines.join('\n');
}
