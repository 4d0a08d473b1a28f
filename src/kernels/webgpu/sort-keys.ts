/**
 * What the webgpu sort (sort.ts) and the topk selection (topk-select.ts) share: the metadata layout
 * of a line-wise pass, the WGSL that finds a line's offsets from it, and the order-preserving u32
 * key of a value (the CPU kernel's order: NaN above +inf, -0 equal to +0; inverted for descending),
 * slots comparing by (key, position) so that ties keep their order.
 */
import type { StorageKind } from './storage.js';

export const nextPow2 = (n: number): number => (n <= 1 ? 1 : 2 ** Math.ceil(Math.log2(n)));

export const isFloatKind = (k: StorageKind): boolean => k === 'f32' || k === 'f16' || k === 'f16p' || k === 'bf16p';

/**
 * Metadata words shared by the passes: [lines, P, len, descending, k, j, count, nd, T,
 * xStep, vStep, iStep, xOff, vOff, iOff, then per outer dim (innermost last): size, xStride,
 * vStride, iStride].
 */
export const HEAD = 15;

/** WGSL computing `xo` (and `vo`, `io` when `outs`) for line `line` from the outer dims. */
export function lineOffsets(outs: boolean): string[] {
  return [
    `var xo = kmeta[12]; var vo = kmeta[13]; var io = kmeta[14]; var rem = line;`,
    'for (var q = kmeta[7]; q > 0u; q = q - 1u) {',
    `  let m = ${HEAD}u + 4u * (q - 1u); let c = rem % kmeta[m]; rem = rem / kmeta[m];`,
    `  xo = xo + c * kmeta[m + 1u];${outs ? ' vo = vo + c * kmeta[m + 2u]; io = io + c * kmeta[m + 3u];' : ''}`,
    '}',
  ];
}

/** The comparison of slots: whether (ka, ia) orders after (kb, ib). */
export const AFTER = 'fn kiln_after(ka: u32, ia: u32, kb: u32, ib: u32) -> bool { return ka > kb || (ka == kb && ia > ib); }';

/** The order-preserving key of a compute value. */
export function keyFns(x: StorageKind): string {
  if (isFloatKind(x)) {
    return [
      'fn kiln_key(v: f32) -> u32 {',
      '  if (kiln_isnan(v)) { return 0xffffffffu; }',
      '  let b = bitcast<u32>(select(v, 0.0f, v == 0.0f));',
      '  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);',
      '}',
    ].join('\n');
  }
  return 'fn kiln_key(v: i32) -> u32 { return bitcast<u32>(v) ^ 0x80000000u; }';
}
