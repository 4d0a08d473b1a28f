/**
 * The RMSNorm prologue of the webgpu skinny GEMV (gemv-codegen.ts, GemvSpec.norm): the kernel of
 * llm.addRmsNormLinear (issue #20). Before its GEMV, every workgroup computes, for each of its MR
 * rows of A (x, read as 16-byte words):
 *
 *   s = x (+ residual)                       in f32, unrounded (as the compiled add + rmsNorm)
 *   rstd = kiln_rsqrt(sum(s^2) / K + eps)    the compiled norm's mean, eps and rsqrt
 *   y = (s * rstd) * gamma, rounded to the dtype, into workgroup memory (xs, MR x KV words)
 *
 * and workgroup x = 0 of each row block stores s rounded to the dtype (the new residual stream, h).
 * The GEMV then reads its rows from xs instead of A. K is baked in (KV words per row), so every
 * invocation issues all of its loads of x, the residual and gamma at once (ceil(KV / 256) words a
 * row) and keeps s in registers between the sum of squares and the normalisation. The sum reduces
 * within subgroups first where the device has `subgroups` (one partial per subgroup_id, the fused
 * reductions' scheme), else as a workgroup tree, in the GEMV's partial-sum array `red` (free until
 * the GEMV's epilogue; the barrier after xs orders the two uses). Only the summation order differs
 * from the compiled norm kernel's, which can move rstd by an ulp.
 *
 * With `prefetch` the GEMV issues its first K step's weight loads before the prologue (at K = 1024
 * in float16 that is a team's whole weight row), so the prologue hides under them.
 * A workgroup pays the prologue once, however many 8-column groups it then walks: the host caps
 * the grid at GEMV_NORM_MAX_WORKGROUPS (an LM head's 18,992 groups run on that many workgroups).
 * Metadata: the GEMV's GEMM_META words, then GEMV_NORM_META's (element offsets and row strides of
 * the residual, gamma and h, and eps as f32 bits).
 */
import { GEMM_META } from './gemm-codegen.js';
import type { StorageKind } from './storage.js';

export interface GemvNormSpec {
  /** 16-byte words per row (K / elements per word), baked into the loops and the xs array. */
  readonly kv: number;
  /** A residual binding: s = x + residual (else s = x). */
  readonly residual: boolean;
  /** Reduce the sum of squares with subgroupAdd (the device has `subgroups`). */
  readonly subgroups: boolean;
  /**
   * Load the first group's first K step of the weight (4 words a lane, both halves when gated)
   * before the prologue, so its latency overlaps the norm's (KILN_WEBGPU_GEMV_NORM_PREFETCH).
   */
  readonly prefetch?: boolean;
}

/** Metadata words after the GEMV's (GEMM_META). */
export const GEMV_NORM_META = {
  /** Residual: element offset, row stride. */
  res: GEMM_META.words,
  /** gamma: element offset. */
  gamma: GEMM_META.words + 2,
  /** h (s rounded to the dtype): element offset, row stride. */
  h: GEMM_META.words + 3,
  eps: GEMM_META.words + 5,
  words: GEMM_META.words + 6,
} as const;

/** The most workgroups a norm-prologue GEMV runs on (each pays the prologue once). */
export const GEMV_NORM_MAX_WORKGROUPS = 1024;

/** Workgroup memory of the norm variant: xs (MR x KV words) and the GEMV's partial sums. */
export function gemvNormWorkgroupBytes(mr: number, kv: number, gated: boolean, threads: number): number {
  return mr * kv * 16 + threads * mr * (gated ? 2 : 1) * 4;
}

/** WGSL packing two vec4<f32> (or one, for f32) into a word of the kind, each element rounded to it. */
function packWord(kind: StorageKind, v0: string, v1: string): string {
  if (kind === 'f32') return `bitcast<vec4<u32>>(${v0})`;
  const bits = kind === 'bf16p' ? 'kiln_bf16_bits' : 'kiln_f16_bits';
  const pair = (v: string, a: string, b: string): string => `${bits}(${v}.${a}) | (${bits}(${v}.${b}) << 16u)`;
  return `vec4<u32>(${pair(v0, 'x', 'y')}, ${pair(v0, 'z', 'w')}, ${pair(v1, 'x', 'y')}, ${pair(v1, 'z', 'w')})`;
}

/** Binding declarations of the norm variant, from binding `first` (before the metadata's). */
export function gemvNormBindings(n: GemvNormSpec, first: number, mr: number): string[] {
  const L: string[] = [];
  let b = first;
  if (n.residual) L.push(`@group(0) @binding(${b++}) var<storage, read> res: array<vec4<u32>>;`);
  L.push(`@group(0) @binding(${b++}) var<storage, read> gamma: array<vec4<u32>>;`);
  L.push(`@group(0) @binding(${b++}) var<storage, read_write> h: array<vec4<u32>>;`);
  L.push(`var<workgroup> xs: array<vec4<u32>, ${mr * n.kv}>;`);
  return L;
}

/** Bindings the norm variant adds (residual, gamma, h). */
export const gemvNormBindingCount = (n: GemvNormSpec): number => (n.residual ? 3 : 2);

/**
 * The prologue's statements (inside main, after the GEMV's row bases ra0..ra(MR-1)): xs filled and
 * h stored, ending with a barrier. `T`: invocations per workgroup; `V`: elements per word.
 */
export function gemvNormPrologue(n: GemvNormSpec, kind: StorageKind, MR: number, T: number, V: number): string[] {
  const M = GEMV_NORM_META;
  const half = V === 8;
  const KV = n.kv;
  const steps = Math.ceil(KV / T);
  const L: string[] = [];
  L.push(`  let eps = bitcast<f32>(kmeta[${M.eps}]);`);
  L.push(`  let oG = kmeta[${M.gamma}] / ${V}u; let oH = kmeta[${M.h}] / ${V}u; let sHm = kmeta[${M.h + 1}] / ${V}u;`);
  if (n.residual) {
    L.push(`  let oR = kmeta[${M.res}] / ${V}u; let sRm = kmeta[${M.res + 1}] / ${V}u;`);
    for (let r = 0; r < MR; r++) L.push(`  let rr${r} = oR + min(m0 + ${r}u, M - 1u) * sRm;`);
  }
  // Every load first (x, residual, gamma of each step and row), then the arithmetic.
  for (let i = 0; i < steps; i++) {
    // A step past the row's end (KV not a multiple of T) loads the last word and is masked out.
    const whole = (i + 1) * T <= KV;
    L.push(`  let j${i} = ${whole ? `tid + ${i * T}u` : `min(tid + ${i * T}u, ${KV - 1}u)`};`);
    L.push(`  let ok${i} = ${whole ? 'true' : `tid + ${i * T}u < ${KV}u`};`);
    L.push(`  let gw${i} = gamma[oG + j${i}];`);
    for (let r = 0; r < MR; r++) {
      L.push(`  let xw${i}_${r} = a[ra${r} + j${i}];`);
      if (n.residual) L.push(`  let rw${i}_${r} = res[rr${r} + j${i}];`);
    }
  }
  for (let r = 0; r < MR; r++) L.push(`  var ss${r} = 0.0;`);
  for (let i = 0; i < steps; i++) {
    for (let r = 0; r < MR; r++) {
      const add = (w: 'kiln_w0' | 'kiln_w1'): string => (n.residual ? `${w}(xw${i}_${r}) + ${w}(rw${i}_${r})` : `${w}(xw${i}_${r})`);
      L.push(`  let s${i}_${r}a = ${add('kiln_w0')};`);
      if (half) L.push(`  let s${i}_${r}b = ${add('kiln_w1')};`);
      const sq = `dot(s${i}_${r}a, s${i}_${r}a)${half ? ` + dot(s${i}_${r}b, s${i}_${r}b)` : ''}`;
      L.push(`  ss${r} = ss${r} + select(0.0, ${sq}, ok${i});`);
    }
  }
  // The workgroup's sum of squares per row, in `red` (row r's partials at r * T).
  if (n.subgroups) {
    for (let r = 0; r < MR; r++) L.push(`  let sg${r} = subgroupAdd(ss${r});`);
    L.push(`  if (sgid == 0u) { ${Array.from({ length: MR }, (_, r) => `red[${r * T}u + sid] = sg${r};`).join(' ')} }`);
    L.push('  workgroupBarrier();');
    for (let r = 0; r < MR; r++) L.push(`  var tot${r} = red[${r * T}u];`);
    L.push(`  for (var q = 1u; q < nsub; q = q + 1u) { ${Array.from({ length: MR }, (_, r) => `tot${r} = tot${r} + red[${r * T}u + q];`).join(' ')} }`);
  } else {
    L.push(`  ${Array.from({ length: MR }, (_, r) => `red[${r * T}u + tid] = ss${r};`).join(' ')}`);
    L.push('  workgroupBarrier();');
    L.push(`  for (var st = ${T / 2}u; st > 0u; st = st >> 1u) {`);
    L.push(`    if (tid < st) { ${Array.from({ length: MR }, (_, r) => `red[${r * T}u + tid] = red[${r * T}u + tid] + red[${r * T}u + tid + st];`).join(' ')} }`);
    L.push('    workgroupBarrier();');
    L.push('  }');
    for (let r = 0; r < MR; r++) L.push(`  let tot${r} = red[${r * T}u];`);
  }
  for (let r = 0; r < MR; r++) L.push(`  let rstd${r} = kiln_rsqrt(tot${r} / f32(K) + eps);`);
  // The normalised rows into xs; workgroup x = 0 stores h.
  L.push('  let writeH = wid.x == 0u;');
  for (let i = 0; i < steps; i++) {
    L.push(`  let g${i}a = kiln_w0(gw${i});`);
    if (half) L.push(`  let g${i}b = kiln_w1(gw${i});`);
    L.push(`  if (ok${i}) {`);
    for (let r = 0; r < MR; r++) {
      L.push(`    let y${i}_${r}a = (s${i}_${r}a * rstd${r}) * g${i}a;`);
      if (half) L.push(`    let y${i}_${r}b = (s${i}_${r}b * rstd${r}) * g${i}b;`);
      L.push(`    xs[${r * KV}u + j${i}] = ${packWord(kind, `y${i}_${r}a`, half ? `y${i}_${r}b` : '')};`);
      L.push(`    if (writeH && m0 + ${r}u < M) { h[oH + (m0 + ${r}u) * sHm + j${i}] = ${packWord(kind, `s${i}_${r}a`, half ? `s${i}_${r}b` : '')}; }`);
    }
    L.push('  }');
  }
  L.push('  workgroupBarrier();');
  return L;
}
