/**
 * CUDA C shared by the two float32 SIMT attention kernels (flash-f32.ts, register-staged, and
 * flash-f32-async.ts, cp.async): the O / max / sum registers, the mask applied to a score, the
 * online-softmax rescale, O += P V from the P tile in shared memory, and the final O / sum store.
 * They differ only in how rows are spread over threads (`rowStep`: rows ty + rowStep * i) and where
 * value column tiles sit (`vAddr`, `col`), passed in as C expressions.
 */
import { flashMaskCode, type FlashSpec, maskCType } from './flash-common.js';

/** O accumulators and the running max and sum of the RM rows a thread owns. */
export const F32_ACC_INIT = `  float acc[RM][OC][4];
  float rmax[RM], rsum[RM];
  #pragma unroll
  for (int i = 0; i < RM; i++) {
    #pragma unroll
    for (int h = 0; h < OC; h++) acc[i][h][0] = acc[i][h][1] = acc[i][h][2] = acc[i][h][3] = 0.f;
    rmax[i] = -KILN_INF; rsum[i] = 0.f;
  }`;

/** The spec's mask and causal test on score `x` at (row, col), indented for the score loop. */
export function f32MaskLines(spec: FlashSpec): string {
  return flashMaskCode(spec, 'x', 'row', 'col', maskCType(spec).load)
    .split('\n')
    .map((l) => `        ${l}`)
    .join('\n');
}

/** Row i's new max `mx` taken in: `use` (the exp2 offset), and O and the sum rescaled to it. */
export const F32_RESCALE = `      // A row with every key so far masked keeps max -inf: use 0 so exp2 gives 0, not NaN.
      const float use = mx == -KILN_INF ? 0.f : mx;
      const float corr = exp2f(rmax[i] - use);
      rmax[i] = mx;
      rsum[i] *= corr;
      #pragma unroll
      for (int h = 0; h < OC; h++) { acc[i][h][0] *= corr; acc[i][h][1] *= corr; acc[i][h][2] *= corr; acc[i][h][3] *= corr; }`;

/** O += P V over the tile's live keys; `vAddr` addresses value row n4 + c, column tile h. */
export function f32PvAccumulate(rowStep: string, vAddr: string): string {
  return `    const int nk = min(BN, kEnd - n0);
    for (int n4 = 0; n4 < nk; n4 += 4) {
      kf4 p[RM];
      #pragma unroll
      for (int i = 0; i < RM; i++) p[i] = *(const kf4*)(Ps + (ty + ${rowStep} * i) * PSTR + n4);
      #pragma unroll
      for (int c = 0; c < 4; c++) {
        #pragma unroll
        for (int h = 0; h < OC; h++) {
          const kf4 vv = *(const kf4*)(${vAddr});
          #pragma unroll
          for (int i = 0; i < RM; i++) {
            const float pv = c == 0 ? p[i].x : c == 1 ? p[i].y : c == 2 ? p[i].z : p[i].w;
            acc[i][h][0] += pv * vv.x; acc[i][h][1] += pv * vv.y; acc[i][h][2] += pv * vv.z; acc[i][h][3] += pv * vv.w;
          }
        }
      }
    }`;
}

/** Row i of O divided by its sum `l` and stored; `col` is value column tile h's first column. */
export function f32StoreRow(rowStep: string, col: string): string {
  return `    // Every key masked: 0/0 = NaN, as the math path's softmax gives.
    const float inv = 1.f / l;
    const int row = m0 + ty + ${rowStep} * i;
    if (row < L) {
      #pragma unroll
      for (int h = 0; h < OC; h++) {
        const int col = ${col};
        if (col < D) *(kf4*)(op + (long long)row * ors + col) = kf4{acc[i][h][0] * inv, acc[i][h][1] * inv, acc[i][h][2] * inv, acc[i][h][3] * inv};
      }
    }`;
}
