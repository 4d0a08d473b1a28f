/**
 * What the two fused attention kernels (flash-tc.ts for fp16/bf16 on tensor cores, flash-f32.ts for
 * float32 on CUDA cores) share: the spec, the parameter list (one layout for both, so the runner packs
 * arguments once), and the CUDA C that decomposes the flat (batch, head) block index into operand
 * offsets. Batch dims are padded to exactly four ([b0, b1, b2, heads]); grouped-query heads map query
 * head h to key/value head floor(h / div) through the last dim's divisor, so K and V are never copied.
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';

/** Attention mask kinds: none, boolean (true keeps a key) or additive (added to the scaled scores). */
export type MaskKind = 'none' | 'bool' | 'add';

export interface FlashSpec {
  dtype: DType;
  /** Head dim of q, k and v (the fused kernels need e == ev). */
  d: number;
  causal: boolean;
  mask: MaskKind;
  /** Storage dtype of an additive mask (float32, float16 or bfloat16). */
  maskDtype?: DType;
}

/** Batch dims every launch is padded to (outer dims beyond three run the math path). */
export const FLASH_BATCH_DIMS = 4;

/**
 * Kernel parameters, in order: pointers; sizes; q, k, v and mask strides per batch dim (i64) with
 * their row strides (and the mask's column stride); the output's batch and row strides (its columns
 * are unit-stride: [.., L, E] contiguous, or the [.., L, H, E] memory of attentionOutStrides); the
 * k/v head divisors; the softmax scale times log2(e).
 */
export const FLASH_PARAMS: readonly ParamType[] = [
  'ptr', 'ptr', 'ptr', 'ptr', 'ptr', // q k v o mask
  'i32', 'i32', 'i32', 'i32', 'i32', // L S b1 b2 b3
  'i64', 'i64', 'i64', 'i64', 'i64', // q strides b0..b3, row
  'i64', 'i64', 'i64', 'i64', 'i64', // k
  'i64', 'i64', 'i64', 'i64', 'i64', // v
  'i64', 'i64', 'i64', 'i64', 'i64', 'i64', // mask b0..b3, row, col
  'i64', 'i64', 'i64', 'i64', 'i64', // out b0..b3, row
  'i32', 'i32', // kdiv vdiv
  'f32', // scale * log2(e)
];

export function flashParamDecl(t: string): string {
  return [
    `const ${t}* __restrict__ q, const ${t}* __restrict__ k, const ${t}* __restrict__ v, ${t}* __restrict__ o, const void* __restrict__ mask`,
    'int L, int S, int b1, int b2, int b3',
    'long long qs0, long long qs1, long long qs2, long long qs3, long long qrs',
    'long long ks0, long long ks1, long long ks2, long long ks3, long long krs',
    'long long vs0, long long vs1, long long vs2, long long vs3, long long vrs',
    'long long ms0, long long ms1, long long ms2, long long ms3, long long mrs, long long mcs',
    'long long os0, long long os1, long long os2, long long os3, long long ors',
    'int kdiv, int vdiv',
    'float scale_log2',
  ].join(', ');
}

/** CUDA C: from blockIdx.x (flat batch index) to the qp/kp/vp/op/mp base pointers. */
export function flashOffsets(t: string, mask: MaskKind, maskT: string): string {
  return `
  const long long bi = blockIdx.x;
  long long f_ = bi;
  const long long i3 = f_ % b3; f_ /= b3;
  const long long i2 = f_ % b2; f_ /= b2;
  const long long i1 = f_ % b1;
  const long long i0 = f_ / b1;
  const ${t}* qp = q + i0 * qs0 + i1 * qs1 + i2 * qs2 + i3 * qs3;
  const ${t}* kp = k + i0 * ks0 + i1 * ks1 + i2 * ks2 + (i3 / kdiv) * ks3;
  const ${t}* vp = v + i0 * vs0 + i1 * vs1 + i2 * vs2 + (i3 / vdiv) * vs3;
  ${t}* op = o + i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3;
  ${mask === 'none' ? '' : `const ${maskT}* mp = (const ${maskT}*)mask + i0 * ms0 + i1 * ms1 + i2 * ms2 + i3 * ms3;`}
  (void)mask; (void)ms0; (void)ms1; (void)ms2; (void)ms3; (void)mrs; (void)mcs;`;
}

/** CUDA C storage type and float load of a mask element. */
export function maskCType(spec: FlashSpec): { t: string; load: (e: string) => string } {
  if (spec.mask === 'bool') return { t: 'unsigned char', load: (e) => `(${e})` };
  switch (spec.maskDtype) {
    case 'float16':
      return { t: 'unsigned short', load: (e) => `kiln_h2f(${e})` };
    case 'bfloat16':
      return { t: 'unsigned short', load: (e) => `kiln_bf2f(${e})` };
    default:
      return { t: 'float', load: (e) => `(${e})` };
  }
}

/**
 * CUDA C applied to one score `x` (already scaled into the log2 domain) at (row, col): the user
 * mask (bool: -inf where false; additive: + value * log2(e)), then, when `edge` says the tile
 * crosses the causal diagonal or the key range's end, -inf for keys past the row or past S.
 */
export function flashMaskCode(spec: FlashSpec, x: string, row: string, col: string, load: (e: string) => string): string {
  const lines: string[] = [];
  if (spec.mask !== 'none') {
    const m = load(`mp[(long long)${row} * mrs + (long long)${col} * mcs]`);
    lines.push(`if (${row} < L && ${col} < S) {`);
    lines.push(spec.mask === 'bool' ? `  if (${m} == 0) ${x} = -KILN_INF;` : `  ${x} += ${m} * 1.4426950408889634f;`);
    lines.push('}');
  }
  lines.push(`if (edge && (${col} >= S${spec.causal ? ` || ${col} > ${row}` : ''})) ${x} = -KILN_INF;`);
  return lines.join('\n');
}

export function flashKernelName(spec: FlashSpec, cfg: string): string {
  const m = spec.mask === 'add' ? `add_${spec.maskDtype ?? 'float32'}` : spec.mask;
  return `kiln_flash_${spec.dtype}_d${spec.d}_${spec.causal ? 'causal' : 'full'}_${m}_${cfg}`;
}
