/**
 * webgpu topk for small k (1 <= k <= SELECT_MAX) without sorting the line: one workgroup of 256
 * per line finds the k-th smallest slot by radix select, collects the k slots at or before it and
 * sorts only those.
 *
 * Slots are (key, position) with sort-keys.ts's order-preserving key (inverted for largest), a
 * total order whose first k are exactly the full sort's (ties by position), hence the CPU kernel's.
 * Select: 8-bit digits of the key, most significant first, then (where keys tie at the threshold)
 * of the position; each pass histograms the digit of the slots that match the prefix chosen so far
 * into workgroup atomics, and invocation 0 walks the 256 bins to the one holding the still-needed
 * k-th slot. Once a bin holds exactly the slots still needed the prefix is the threshold and the
 * passes stop (random floats: after one or two). Every slot whose masked key is below the prefix,
 * or equal with its masked position at or below the position prefix, is then taken (exactly k),
 * gathered in workgroup memory, bitonic-sorted by (key, position) and emitted: the values read
 * back from the input at their positions, the positions as int64.
 *
 * Metadata: sort-keys.ts's layout, with word 5 the position digits to select (ceil(log2(len) / 8))
 * and word 8 the gathered slots rounded up to a power of two.
 */
import type { WebgpuKernel } from '../../runtime/webgpu/webgpu-accelerator.js';
import type { DeviceBuffer } from '../../runtime/accelerator.js';
import { keyFns, lineOffsets } from './sort-keys.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { groupsFor, header, kernelFor } from './template.js';
import { webgpu } from './device.js';

/** The largest k the selection serves (the full sort serves the rest). */
export const SELECT_MAX = 256;
const WG = 256;

export function selectSource(x: StorageKind, v: StorageKind): string {
  const lines = header([
    { kind: 'u32', written: true },
    { kind: v, written: true },
    { kind: x, written: false },
  ]);
  const key = (e: string): string => `kiln_key(${loadExpr(x, 'b2', `xo + (${e}) * kmeta[9]`, false)}) ^ flip`;
  lines.push(
    keyFns(x),
    `var<workgroup> hist: array<atomic<u32>, ${WG}>;`,
    'var<workgroup> selBin: u32;',
    'var<workgroup> selBefore: u32;',
    'var<workgroup> selDone: u32;',
    'var<workgroup> taken: atomic<u32>;',
    `var<workgroup> ck: array<u32, ${SELECT_MAX}>;`,
    `var<workgroup> ci: array<u32, ${SELECT_MAX}>;`,
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) ng: vec3u) {',
    '  let len = kmeta[2]; let count = kmeta[6]; let P2 = kmeta[8];',
    '  let flip = select(0u, 0xffffffffu, kmeta[3] != 0u);',
    '  let passes = 4u + kmeta[5];',
    '  for (var line = wid.x; line < kmeta[0]; line = line + ng.x) {',
    ...lineOffsets(true).map((l) => `    ${l}`),
    '    var kpre = 0u; var kmask = 0u; var ipre = 0u; var imask = 0u; var need = count;',
    '    for (var p = 0u; p < passes; p++) {',
    '      atomicStore(&hist[lid], 0u);',
    '      workgroupBarrier();',
    '      let byKey = p < 4u;',
    '      let shift = select(8u * (passes - 1u - p), 24u - 8u * p, byKey);',
    `      for (var e = lid; e < len; e = e + ${WG}u) {`,
    `        let k = ${key('e')};`,
    '        let hit = select(k == kpre && (e & imask) == ipre, (k & kmask) == kpre, byKey);',
    '        if (hit) { atomicAdd(&hist[(select(e, k, byKey) >> shift) & 255u], 1u); }',
    '      }',
    '      workgroupBarrier();',
    '      if (lid == 0u) {',
    '        var before = 0u; var b = 0u;',
    `        for (; b < ${WG - 1}u; b++) { let h = atomicLoad(&hist[b]); if (before + h >= need) { break; } before += h; }`,
    '        selBin = b; selBefore = before; selDone = select(0u, 1u, atomicLoad(&hist[b]) == need - before);',
    '      }',
    '      let b = workgroupUniformLoad(&selBin);',
    '      let before = workgroupUniformLoad(&selBefore);',
    '      let done = workgroupUniformLoad(&selDone);',
    '      need -= before;',
    '      if (byKey) { kpre |= b << shift; kmask |= 255u << shift; } else { ipre |= b << shift; imask |= 255u << shift; }',
    '      if (done != 0u) { break; }',
    '    }',
    '    if (lid == 0u) { atomicStore(&taken, 0u); }',
    `    for (var s = lid; s < P2; s = s + ${WG}u) { ck[s] = 0xffffffffu; ci[s] = 0xffffffffu; }`,
    '    workgroupBarrier();',
    `    for (var e = lid; e < len; e = e + ${WG}u) {`,
    `      let k = ${key('e')};`,
    '      if ((k & kmask) < kpre || ((k & kmask) == kpre && (e & imask) <= ipre)) {',
    '        let s = atomicAdd(&taken, 1u);',
    `        if (s < ${SELECT_MAX}u) { ck[s] = k; ci[s] = e; }`,
    '      }',
    '    }',
    '    workgroupBarrier();',
    '    for (var kk = 2u; kk <= P2; kk = kk << 1u) {',
    '      for (var j = kk >> 1u; j > 0u; j = j >> 1u) {',
    '        if (lid < (P2 >> 1u)) {',
    '          let a = (lid / j) * 2u * j + lid % j; let c = a + j;',
    '          let asc = (a & kk) == 0u;',
    '          let ka = ck[a]; let kc = ck[c]; let ia = ci[a]; let ic = ci[c];',
    '          if ((ka > kc || (ka == kc && ia > ic)) == asc) { ck[a] = kc; ck[c] = ka; ci[a] = ic; ci[c] = ia; }',
    '        }',
    '        workgroupBarrier();',
    '      }',
    '    }',
    `    for (var q = lid; q < count; q = q + ${WG}u) {`,
    '      let i = ci[q];',
    '      b0[2u * (io + q * kmeta[11])] = i; b0[2u * (io + q * kmeta[11]) + 1u] = 0u;',
    `      ${storeStmt(v, 'b1', 'vo + q * kmeta[10]', loadExpr(x, 'b2', 'xo + i * kmeta[9]', false)).replace(/\n/g, '\n      ')}`,
    '    }',
    '    workgroupBarrier();',
    '  }',
    '}',
  );
  return lines.join('\n');
}

/** Position digits the selection may need for lines of `len` slots. */
export const positionDigits = (len: number): number => (len <= 1 ? 0 : Math.ceil(Math.ceil(Math.log2(len)) / 8));

/**
 * The first `count` slots of every line (topk's values and int64 indices): `meta` is the line
 * metadata (sort-keys.ts) with words 5 and 8 as this file's header says; buffers are indices,
 * values, input.
 */
export function selectTopk(x: StorageKind, v: StorageKind, buffers: readonly DeviceBuffer[], meta: Uint32Array, lines: number): void {
  const k: WebgpuKernel = kernelFor(`topk.select.${x}.${v}`, () => selectSource(x, v));
  webgpu().dispatch(k, buffers, meta, groupsFor(lines, 1));
}
