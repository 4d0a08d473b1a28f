/**
 * WGSL of the webgpu flash attention (flash-attention.ts runs it): softmax(q k^T * scale + mask) v
 * with an online softmax over blocks of keys, so no [L, S] score matrix is ever stored. Every
 * value is computed in f32 (16-bit storage is loaded into f32 and rounded once when stored).
 *
 * - `prefill`: one invocation per query row, 64 rows per workgroup (one (batch, row block) tile
 *   per workgroup, grid-stride over tiles). Each step loads a block of BK keys and values into
 *   workgroup memory (BK * (E + Ev) f32 <= 16 KiB, the WebGPU minimum), every row scores the block
 *   from its q (held scaled in registers), takes the block's maximum, rescales its accumulator once
 *   and adds the block's p * v. Causal tiles stop at their last row's key.
 * - `decode`: one workgroup of 64 per (query row, key split), for few query rows (decode, short
 *   prefill): invocation t scores key j0 + t of each block of 64 against q in workgroup memory, the
 *   block's probabilities go through workgroup memory, and invocation t accumulates value dims
 *   t, t + 64, ... With one split it writes the output; with several it writes each split's
 *   (max, sum, NaN flag, accumulator) to a float32 scratch that `combine` merges (flash-decoding).
 *
 * Semantics of the CPU kernel: key j is seen by row i when j <= i under `causal` (top-left); a
 * bool mask drops keys where false, a floating mask is added (a key whose score becomes -inf is
 * dropped); a row with no key left, or with a NaN score, is NaN. Exponentials are the math
 * library's kiln_exp (WGSL's exp is loose and undefined at the first block's e^(-3.4e38 - s)).
 *
 * Metadata (u32 words): [nb, L, S, scale bits, causal, qRow, qCol, kRow, kCol, vRow, vCol, mRow,
 * mCol, oRow, oCol, qOff, kOff, vOff, mOff, oOff, splits, splitLen, batch dims, then per batch dim
 * (innermost last): size, qStride, qDiv, kStride, kDiv, vStride, vDiv, mStride, oStride].
 */
import type { StorageKind } from './storage.js';
import { loadExpr, storeStmt } from './storage.js';
import { header, type Bind } from './template.js';

/** Words before the per-batch-dim entries. */
export const ATTN_HEAD = 23;
/** Words per batch dim. */
export const ATTN_DIM_WORDS = 9;
/** Invocations per workgroup (and query rows per prefill tile, keys per decode block). */
export const ATTN_WG = 64;
/** f32s of workgroup memory the prefill's key and value blocks may take (16 KiB). */
const TILE_FLOATS = 4096;

/** Keys per prefill block for head dims e and ev (a power of two, at most 64), or 0 when none fits. */
export function prefillBlock(e: number, ev: number): number {
  let bk = 64;
  while (bk > 0 && bk * (e + ev) > TILE_FLOATS) bk >>= 1;
  return bk;
}

export interface AttnKinds {
  /** Storage of query, key, value and output. */
  readonly x: StorageKind;
  /** Storage of the mask, null without one. */
  readonly mask: StorageKind | null;
  /** Whether a bool mask (loaded as i32 0/1) rather than an additive one. */
  readonly maskBool: boolean;
  readonly e: number;
  readonly ev: number;
}

/** The most negative f32, the running maximum before any key is seen. */
export const NEG_MAX = '-3.4028234663852886e38f';

/** WGSL declaring `qo ko vo mo oo` for batch index `bi` (offsets through the batch map). */
export function batchOffsets(): string[] {
  return [
    'var qo = kmeta[15]; var ko = kmeta[16]; var vo = kmeta[17]; var mo = kmeta[18]; var oo = kmeta[19]; var rem = bi;',
    'for (var q = kmeta[22]; q > 0u; q = q - 1u) {',
    `  let w = ${ATTN_HEAD}u + ${ATTN_DIM_WORDS}u * (q - 1u); let c = rem % kmeta[w]; rem = rem / kmeta[w];`,
    '  qo += (c / kmeta[w + 2u]) * kmeta[w + 1u]; ko += (c / kmeta[w + 4u]) * kmeta[w + 3u]; vo += (c / kmeta[w + 6u]) * kmeta[w + 5u];',
    '  mo += c * kmeta[w + 7u]; oo += c * kmeta[w + 8u];',
    '}',
  ];
}

/** Statements applying the mask of (row i, key j) to score `s` and validity `ok`. */
export function maskStmts(k: AttnKinds): string[] {
  if (k.mask === null) return [];
  const mv = loadExpr(k.mask, 'b4', 'mo + i * kmeta[11] + j * kmeta[12]', false);
  if (k.maskBool) return [`ok = ok && ${mv} != 0i;`];
  return [`s = s + ${mv};`, `ok = ok && bitcast<u32>(s) != 0xff800000u;`];
}

/** The bindings of an attention kernel: the output (of kind `out`), query, key, value, then the mask if any. */
export function binds(k: AttnKinds, out: StorageKind): Bind[] {
  const bs: Bind[] = [
    { kind: out, written: true },
    { kind: k.x, written: false },
    { kind: k.x, written: false },
    { kind: k.x, written: false },
  ];
  if (k.mask !== null) bs.push({ kind: k.mask, written: false });
  return bs;
}

const indent = (s: string, n: number): string => s.replace(/\n/g, `\n${' '.repeat(n)}`);

/** The prefill kernel for `k` with BK keys per block. */
export function prefillSource(k: AttnKinds, bk: number): string {
  const { e, ev, x } = k;
  const lines = header(binds(k, x));
  lines.push(
    `const E = ${e}u;`,
    `const EV = ${ev}u;`,
    `const BK = ${bk}u;`,
    `var<workgroup> kt: array<f32, ${bk * e}>;`,
    `var<workgroup> vt: array<f32, ${bk * ev}>;`,
    `@compute @workgroup_size(${ATTN_WG})`,
    'fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) ng: vec3u) {',
    '  let L = kmeta[1]; let S = kmeta[2]; let scale = bitcast<f32>(kmeta[3]); let causal = kmeta[4] != 0u;',
    `  let rb = (L + ${ATTN_WG - 1}u) / ${ATTN_WG}u; let tiles = kmeta[0] * rb;`,
    '  for (var t = wid.x; t < tiles; t = t + ng.x) {',
    `    let bi = t / rb; let i0 = (t % rb) * ${ATTN_WG}u; let i = i0 + lid; let live = i < L;`,
    ...batchOffsets().map((l) => `    ${l}`),
    '    var qv: array<f32, E>; var acc: array<f32, EV>;',
    '    let qi = qo + min(i, L - 1u) * kmeta[5];',
    `    for (var d = 0u; d < E; d++) { qv[d] = select(0.0f, ${loadExpr(x, 'b1', 'qi + d * kmeta[6]', false)} * scale, live); }`,
    '    for (var d = 0u; d < EV; d++) { acc[d] = 0.0f; }',
    `    var m = ${NEG_MAX}; var l = 0.0f; var bad = false; var started = false;`,
    `    var kend = S; if (causal) { kend = min(S, i0 + ${ATTN_WG}u); }`,
    '    for (var j0 = 0u; j0 < kend; j0 = j0 + BK) {',
    '      workgroupBarrier();',
    `      for (var z = lid; z < BK * E; z = z + ${ATTN_WG}u) {`,
    '        let j = j0 + z / E;',
    `        kt[z] = select(0.0f, ${loadExpr(x, 'b2', 'ko + min(j, S - 1u) * kmeta[7] + (z % E) * kmeta[8]', false)}, j < S);`,
    '      }',
    `      for (var z = lid; z < BK * EV; z = z + ${ATTN_WG}u) {`,
    '        let j = j0 + z / EV;',
    `        vt[z] = select(0.0f, ${loadExpr(x, 'b3', 'vo + min(j, S - 1u) * kmeta[9] + (z % EV) * kmeta[10]', false)}, j < S);`,
    '      }',
    '      workgroupBarrier();',
    '      if (live) {',
    '        var sc: array<f32, BK>; var okb: array<bool, BK>;',
    `        var bm = ${NEG_MAX}; var any = false;`,
    '        for (var jj = 0u; jj < BK; jj++) {',
    '          let j = j0 + jj;',
    '          var s = 0.0f;',
    '          for (var d = 0u; d < E; d++) { s += qv[d] * kt[jj * E + d]; }',
    '          var ok = j < S && (!causal || j <= i);',
    ...maskStmts(k).map((l) => `          ${l}`),
    '          if (ok && kiln_isnan(s)) { bad = true; }',
    '          okb[jj] = ok; sc[jj] = s;',
    '          if (ok) { bm = max(bm, s); any = true; }',
    '        }',
    '        if (any) {',
    '          let m2 = max(m, bm);',
    '          let c = select(0.0f, kiln_exp(m - m2), started);',
    '          l = l * c;',
    '          for (var d = 0u; d < EV; d++) { acc[d] = acc[d] * c; }',
    '          for (var jj = 0u; jj < BK; jj++) {',
    '            if (okb[jj]) {',
    '              let p = kiln_exp(sc[jj] - m2);',
    '              l += p;',
    '              for (var d = 0u; d < EV; d++) { acc[d] += p * vt[jj * EV + d]; }',
    '            }',
    '          }',
    '          m = m2; started = true;',
    '        }',
    '      }',
    '    }',
    '    if (live) {',
    '      let nan = bad || l == 0.0f;',
    '      for (var d = 0u; d < EV; d++) {',
    '        let o = select(acc[d] / l, kiln_nan(), nan);',
    `        ${indent(storeStmt(x, 'b0', 'oo + i * kmeta[13] + d * kmeta[14]', 'o'), 8)}`,
    '      }',
    '    }',
    '  }',
    '}',
  );
  return lines.join('\n');
}

/** Value dims each decode invocation accumulates. */
const perThread = (ev: number): number => Math.max(1, Math.ceil(ev / ATTN_WG));

/**
 * The decode kernel: with `partial`, binding 0 is the float32 scratch of (max, sum, NaN flag,
 * accumulator[Ev]) per (row, split); else the output.
 */
export function decodeSource(k: AttnKinds, partial: boolean): string {
  const { e, ev, x } = k;
  const R = perThread(ev);
  const lines = header(binds(k, partial ? 'f32' : x));
  lines.push(
    `const E = ${e}u;`,
    `const EV = ${ev}u;`,
    `var<workgroup> qs: array<f32, ${e}>;`,
    `var<workgroup> ps: array<f32, ${ATTN_WG}>;`,
    `var<workgroup> fl: array<u32, ${ATTN_WG}>;`,
    `@compute @workgroup_size(${ATTN_WG})`,
    'fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) ng: vec3u) {',
    '  let L = kmeta[1]; let S = kmeta[2]; let scale = bitcast<f32>(kmeta[3]); let causal = kmeta[4] != 0u;',
    '  let splits = kmeta[20]; let splitLen = kmeta[21]; let total = kmeta[0] * L * splits;',
    '  for (var t = wid.x; t < total; t = t + ng.x) {',
    '    let sp = t % splits; let row = t / splits; let bi = row / L; let i = row % L;',
    ...batchOffsets().map((l) => `    ${l}`),
    '    workgroupBarrier();',
    `    for (var d = lid; d < E; d = d + ${ATTN_WG}u) { qs[d] = ${loadExpr(x, 'b1', 'qo + i * kmeta[5] + d * kmeta[6]', false)} * scale; }`,
    '    workgroupBarrier();',
    `    var acc: array<f32, ${R}>;`,
    `    for (var r = 0u; r < ${R}u; r++) { acc[r] = 0.0f; }`,
    `    var m = ${NEG_MAX}; var l = 0.0f; var bad = false; var started = false;`,
    '    let js = sp * splitLen; var je = min(S, js + splitLen);',
    '    if (causal) { je = min(je, i + 1u); }',
    `    for (var j0 = js; j0 < je; j0 = j0 + ${ATTN_WG}u) {`,
    '      let j = j0 + lid;',
    '      var ok = j < je; var s = 0.0f;',
    '      if (ok) {',
    '        let kr = ko + j * kmeta[7];',
    `        for (var d = 0u; d < E; d++) { s += qs[d] * ${loadExpr(x, 'b2', 'kr + d * kmeta[8]', false)}; }`,
    ...maskStmts(k).map((l) => `        ${l}`),
    '      }',
    '      ps[lid] = s; fl[lid] = select(0u, select(1u, 2u, kiln_isnan(s)), ok);',
    '      workgroupBarrier();',
    `      var bm = ${NEG_MAX}; var any = false;`,
    `      for (var z = 0u; z < ${ATTN_WG}u; z++) {`,
    '        let f = fl[z];',
    '        if (f == 2u) { bad = true; }',
    '        if (f == 1u) { any = true; bm = max(bm, ps[z]); }',
    '      }',
    '      let m2 = max(m, bm);',
    '      workgroupBarrier();',
    '      ps[lid] = select(0.0f, kiln_exp(s - m2), ok && fl[lid] == 1u);',
    '      workgroupBarrier();',
    '      if (any) {',
    '        let c = select(0.0f, kiln_exp(m - m2), started);',
    '        l = l * c;',
    `        for (var r = 0u; r < ${R}u; r++) { acc[r] = acc[r] * c; }`,
    `        let n = min(${ATTN_WG}u, je - j0);`,
    '        for (var z = 0u; z < n; z++) {',
    '          let p = ps[z];',
    '          l += p;',
    '          let vr = vo + (j0 + z) * kmeta[9];',
    `          for (var r = 0u; r < ${R}u; r++) {`,
    `            let d = lid + r * ${ATTN_WG}u;`,
    `            if (d < EV) { acc[r] += p * ${loadExpr(x, 'b3', 'vr + d * kmeta[10]', false)}; }`,
    '          }',
    '        }',
    '        m = m2; started = true;',
    '      }',
    '      workgroupBarrier();',
    '    }',
  );
  if (partial) {
    lines.push(
      '    let pb = t * (EV + 3u);',
      '    if (lid == 0u) { b0[pb] = m; b0[pb + 1u] = l; b0[pb + 2u] = select(0.0f, 1.0f, bad); }',
      `    for (var r = 0u; r < ${R}u; r++) { let d = lid + r * ${ATTN_WG}u; if (d < EV) { b0[pb + 3u + d] = acc[r]; } }`,
    );
  } else {
    lines.push(
      '    let nan = bad || l == 0.0f;',
      `    for (var r = 0u; r < ${R}u; r++) {`,
      `      let d = lid + r * ${ATTN_WG}u;`,
      '      if (d < EV) {',
      '        let o = select(acc[r] / l, kiln_nan(), nan);',
      `        ${indent(storeStmt(x, 'b0', 'oo + i * kmeta[13] + d * kmeta[14]', 'o'), 8)}`,
      '      }',
      '    }',
    );
  }
  lines.push('  }', '}');
  return lines.join('\n');
}

/** Merges the splits' partial results: one invocation per (row, value dim). */
export function combineSource(x: StorageKind, ev: number): string {
  const lines = header([
    { kind: x, written: true },
    { kind: 'f32', written: false },
  ]);
  lines.push(
    `const EV = ${ev}u;`,
    `@compute @workgroup_size(${ATTN_WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let L = kmeta[1]; let splits = kmeta[20]; let n = kmeta[0] * L * EV;',
    `  for (var g = gid.x; g < n; g = g + ng.x * ${ATTN_WG}u) {`,
    '    let d = g % EV; let row = g / EV; let bi = row / L; let i = row % L;',
    ...batchOffsets().map((l) => `    ${l}`),
    `    var mx = ${NEG_MAX}; var bad = false;`,
    '    for (var sp = 0u; sp < splits; sp++) {',
    '      let pb = (row * splits + sp) * (EV + 3u);',
    '      if (b1[pb + 1u] > 0.0f) { mx = max(mx, b1[pb]); }',
    '      if (b1[pb + 2u] != 0.0f) { bad = true; }',
    '    }',
    '    var l = 0.0f; var a = 0.0f;',
    '    for (var sp = 0u; sp < splits; sp++) {',
    '      let pb = (row * splits + sp) * (EV + 3u);',
    '      if (b1[pb + 1u] > 0.0f) { let c = kiln_exp(b1[pb] - mx); l += b1[pb + 1u] * c; a += b1[pb + 3u + d] * c; }',
    '    }',
    '    let o = select(a / l, kiln_nan(), bad || l == 0.0f);',
    `    ${indent(storeStmt(x, 'b0', 'oo + i * kmeta[13] + d * kmeta[14]', 'o'), 4)}`,
    '  }',
    '}',
  );
  return lines.join('\n');
}
