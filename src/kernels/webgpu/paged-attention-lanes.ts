/**
 * WGSL of the "lanes" form of webgpu paged decode attention (issue #20; llm-paged.ts picks it, with
 * KILN_WEBGPU_PAGED_LANES): one workgroup of NI invocations per (sequence, kv head, head group), in
 * one dispatch, with or without llm.qkNormRotaryCache's work as its prologue (the fused form's
 * prologue, paged-attention-source.ts qkPrologue, reused as is).
 *
 * Why another form: in place in a Qwen3-0.6B float16 batch-1 decode step on the H200, leaving the
 * fused attention dispatch out of the replay took the step from 2.12-2.27 to 1.72 ms (16-20 us a
 * layer for ~1 MB of K/V; bench/results/h200-s20-measure-*). That kernel walks its keys in 64-key
 * blocks with a chain of dependent global loads per block (table -> key row, then the value pass's
 * keys eight at a time) and a serial max over the block in every invocation. Here the waits are
 * few and wide, per chunk of NI keys:
 * - every invocation takes one key: it resolves the key's row through the block table and loads the
 *   whole key row as 16-byte words at once (one round of loads), scores it against the HG queries
 *   (read from workgroup memory as vec4s) and publishes the row's base;
 * - after one barrier each invocation (key slot ks, lane) issues the value loads of all its keys
 *   (keys ks, ks + KS, ...: NI / KS of them, 16-byte words of dims lane * V ..) before the softmax's
 *   max and flags are reduced (a tree over the chunk), so the value round overlaps that reduction;
 * - the running max is one per head for the whole workgroup (online softmax across chunks), so the
 *   key slots' accumulators merge by plain sums at the end, G slots at a time through workgroup
 *   memory, in slot order.
 * A chunk costs three rounds of global loads (table, key, value) instead of ~12 per 64-key block.
 * The plan is shapes only (NI from the device's limits and the kinds), never the lengths.
 *
 * Semantics are the split kernel's: tokens t < contextLens[b] clamped to the table's capacity, a
 * block id outside the cache skips its token, a row with no token is zeros, a NaN score makes the
 * head's row NaN, exponentials are kiln_exp, everything in f32 (16-bit storage rounded once when
 * stored). Needs 16-byte words for both caches (the kinds' vecK: head dim and offsets whole words).
 */
import type { PagedKinds, PagedQk } from './paged-attention-source.js';
import { indent, keyRowStart, keyWordHelpers, NEG_MAX, pagedVecElems, PAGED_WG, qkHelpers, qkPrologue, splitHeader } from './paged-attention-source.js';
import { loadExpr, storeStmt } from './storage.js';
import { indexLoad } from './template.js';

/** Most value words an invocation loads before using any (registers: 4 each). */
const VALUE_BATCH = 16;
/** Most key words an invocation loads before using any. */
const KEY_BATCH = 16;

/** The lanes form's shape for head dim `d`, head group `hg` and storage `x` over NI invocations. */
export interface LanesShape {
  readonly ni: number;
  /** Elements of a 16-byte word. */
  readonly v: number;
  /** Words (lanes) of a row. */
  readonly ln: number;
  /** Key slots of the value pass (NI / LN). */
  readonly ks: number;
  /** Key slots merged per round of the final sum. */
  readonly g: number;
}

export function lanesShape(x: PagedKinds['x'], d: number, hg: number, ni: number): LanesShape | null {
  const v = pagedVecElems(x);
  if (v === 0 || d % v !== 0 || ni % PAGED_WG !== 0) return null;
  const ln = d / v;
  if (ni % ln !== 0 || ni < ln) return null;
  const ks = ni / ln;
  // Slots per merge round: their accumulators (G x HG x D f32) in at most 8 KiB.
  let g = Math.max(1, Math.min(ks, Math.floor(2048 / (hg * d))));
  while (ks % g !== 0) g--;
  return { ni, v, ln, ks, g };
}

/** Bytes of workgroup memory the lanes form takes (qs, qv, ps, tr, tf, kb, pw, red, redl). */
export function lanesWorkgroupBytes(s: LanesShape, hg: number, d: number): number {
  return 4 * (hg * d + hg * d + 3 * hg * s.ni + s.ni + d + s.g * hg * d + s.g * hg);
}

/** The lanes kernel (see the header); with `qk`, the q/k norm + rotary + cache write prologue. */
export function pagedLanesSource(k: PagedKinds, s: LanesShape, qk?: PagedQk): string {
  const { x, d, hg } = k;
  const { ni: NI, v: V, ln: LN, ks: KS, g: G } = s;
  if (k.vecK !== true) throw new Error('pagedLanesSource: needs the caches as 16-byte words (kinds.vecK)');
  const S = NI / PAGED_WG;
  if (qk && S < 2) throw new Error(`pagedLanesSource: the q/k prologue needs at least 128 invocations, got ${NI}`);
  const cw = qk !== undefined;
  const NV = V / 4;
  const VK = NI / KS;
  const lines = splitHeader(k, false, qk);
  if (qk?.subgroups === true) lines.unshift('enable subgroups;');
  for (const bnd of [2, 3]) {
    const at = lines.findIndex((l) => l.startsWith(`@group(0) @binding(${bnd})`));
    lines[at] = `@group(0) @binding(${bnd}) var<storage, ${cw ? 'read_write' : 'read'}> b${bnd}: array<vec4<u32>>;`;
  }
  lines.push(...keyWordHelpers(x));
  if (qk) lines.push(...qkHelpers(x, qk));
  const sg = qk?.subgroups === true ? ', @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) sgi: u32, @builtin(subgroup_size) sgsz: u32' : '';
  const words = (w: string, pre: string): string[] => [`let ${pre}0 = kiln_kw0(${w});`, ...(V === 8 ? [`let ${pre}1 = kiln_kw1(${w});`] : [])];
  lines.push(
    `const D = ${d}u;`,
    `const HG = ${hg}u;`,
    `const NI = ${NI}u;`,
    `var<workgroup> qs: array<f32, ${hg * d}>;`,
    `var<workgroup> qv: array<vec4<f32>, ${(hg * d) / 4}>;`,
    // ps: a chunk's probabilities per head (and the prologue's partial sums); tr / tf: the max tree.
    `var<workgroup> ps: array<f32, ${hg * NI}>;`,
    `var<workgroup> tr: array<f32, ${hg * NI}>;`,
    `var<workgroup> tf: array<u32, ${hg * NI}>;`,
    `var<workgroup> kb: array<u32, ${NI}>;`,
    `var<workgroup> pw: array<f32, ${d}>;`,
    `var<workgroup> red: array<f32, ${G * hg * d}>;`,
    `var<workgroup> redl: array<f32, ${G * hg}>;`,
    `@compute @workgroup_size(${NI})`,
    `fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32, @builtin(num_workgroups) ng: vec3u${sg}) {`,
    '  let B = kmeta[0]; let H = kmeta[1]; let hkv = kmeta[2]; let bs = kmeta[3]; let maxBlocks = kmeta[4];',
    '  let scale = bitcast<f32>(kmeta[12]); let numBlocks = kmeta[13];',
    '  let groups = kmeta[18];',
    '  let total = B * hkv * groups;',
    `  let lid = li % ${PAGED_WG}u; let sp = li / ${PAGED_WG}u;`,
    `  let lane = li % ${LN}u; let ks = li / ${LN}u;`,
    '  let kco = kmeta[14]; let vco = kmeta[15];',
    '  for (var t = wid.x; t < total; t = t + ng.x) {',
    '    let r1 = t; let gi = r1 % groups; let r2 = r1 / groups; let kvh = r2 % hkv; let b = r2 / hkv;',
    '    let h0 = kvh * (H / hkv) + gi * HG;',
    `    let len = u32(clamp(${indexLoad(k.lens, 'b5', 'kmeta[10] + b * kmeta[11]')}, 0i, i32(maxBlocks * bs)));`,
    '    let trow = kmeta[9] + b * kmeta[8];',
    '    workgroupBarrier();',
  );
  if (qk) lines.push(...qkPrologue(k, S, qk, true));
  else {
    lines.push(
      `    for (var z = li; z < HG * D; z = z + ${NI}u) {`,
      `      qs[z] = ${loadExpr(x, 'b1', 'kmeta[7] + b * kmeta[5] + (h0 + z / D) * kmeta[6] + z % D', false)} * scale;`,
      '    }',
      '    workgroupBarrier();',
    );
  }
  // The scaled queries as vec4s (one 16-byte workgroup read per 4 dims in the key pass).
  lines.push(
    `    for (var z = li; z < HG * D / 4u; z = z + ${NI}u) { qv[z] = vec4<f32>(qs[4u * z], qs[4u * z + 1u], qs[4u * z + 2u], qs[4u * z + 3u]); }`,
    '    workgroupBarrier();',
    `    var acc: array<vec4<f32>, ${hg * NV}>;`,
    `    for (var r = 0u; r < ${hg * NV}u; r++) { acc[r] = vec4<f32>(0.0f); }`,
    // m: the running max per head, the same in every invocation; lp: this slot's probability sum (lane 0 of a slot counts it).
    // seen: a scored key of the head came in an earlier chunk (its accumulators hold something to rescale).
    '    var m: array<f32, HG>; var lp: array<f32, HG>; var seen: array<bool, HG>; var bad: array<bool, HG>;',
    `    for (var h = 0u; h < HG; h++) { m[h] = ${NEG_MAX}; lp[h] = 0.0f; seen[h] = false; bad[h] = false; }`,
    `    for (var c0 = 0u; c0 < len; c0 = c0 + ${NI}u) {`,
    '      let j = c0 + li;',
    ...keyRowStart(k, 'len', `(kco + base) / ${V}u`),
  );
  for (let w0 = 0; w0 < LN; w0 += KEY_BATCH) {
    const n = Math.min(KEY_BATCH, LN - w0);
    const ws = Array.from({ length: n }, (_, i) => w0 + i);
    lines.push(...ws.map((w) => `          let kw${w} = b2[kr + ${w}u];`));
    lines.push(...ws.flatMap((w) => words(`kw${w}`, `k${w}_`).map((l) => `          ${l}`)));
    lines.push(
      '          for (var h = 0u; h < HG; h++) {',
      `            let qb = h * D / 4u;`,
      ...ws.map((w) => `            s[h] += dot(qv[qb + ${(w * V) / 4}u], k${w}_0)${V === 8 ? ` + dot(qv[qb + ${(w * V) / 4 + 1}u], k${w}_1)` : ''};`),
      '          }',
    );
  }
  lines.push(
    '        }',
    '      }',
    // A skipped or absent key: base 0 (a valid row; its value adds nothing, its probability is 0).
    '      kb[li] = base;',
    '      var f: array<u32, HG>;',
    `      for (var h = 0u; h < HG; h++) { f[h] = select(0u, select(1u, 2u, kiln_isnan(s[h])), ok); tr[h * NI + li] = select(${NEG_MAX}, s[h], f[h] == 1u); tf[h * NI + li] = f[h]; }`,
    '      workgroupBarrier();',
    // The value loads of this slot's keys, issued before the max tree (which hides their latency).
    `      let n = min(NI, len - c0);`,
  );
  // The slot's keys in batches of VALUE_BATCH loads; the first batch's loads go before the max tree.
  const vb = Math.min(VK, VALUE_BATCH);
  const batches = Array.from({ length: Math.ceil(VK / vb) }, (_, i) => Array.from({ length: Math.min(vb, VK - i * vb) }, (_, j) => i * vb + j));
  const valueLoads = (us: readonly number[]): string[] => us.map((u) => `      let z${u} = ks + ${u * KS}u; let vw${u} = b3[(vco + kb[z${u}]) / ${V}u + lane];`);
  lines.push(...valueLoads(batches[0]!));
  lines.push(
    `      for (var st = NI / 2u; st > 0u; st = st >> 1u) {`,
    '        if (li < st) { for (var h = 0u; h < HG; h++) { let i = h * NI + li; tr[i] = max(tr[i], tr[i + st]); tf[i] = tf[i] | tf[i + st]; } }',
    '        workgroupBarrier();',
    '      }',
    '      var c: array<f32, HG>;',
    '      for (var h = 0u; h < HG; h++) {',
    '        let fh = tf[h * NI];',
    '        if ((fh & 2u) != 0u) { bad[h] = true; }',
    // No scored key in this chunk for the head: nothing changes (its probabilities are 0).
    '        let any = (fh & 1u) != 0u;',
    '        let m2 = select(m[h], max(m[h], tr[h * NI]), any);',
    '        c[h] = select(0.0f, kiln_exp(m[h] - m2), seen[h]);',
    '        m[h] = m2; seen[h] = seen[h] || any;',
    '        ps[h * NI + li] = select(0.0f, kiln_exp(s[h] - m2), f[h] == 1u);',
    '      }',
    '      workgroupBarrier();',
    '      for (var h = 0u; h < HG; h++) {',
    `        for (var r = 0u; r < ${NV}u; r++) { acc[h * ${NV}u + r] = acc[h * ${NV}u + r] * c[h]; }`,
    '        lp[h] = lp[h] * c[h];',
    '      }',
  );
  const accumulate = (u: number): string[] => [
    `        { let in${u} = z${u} < n;`,
    ...words(`vw${u}`, `v${u}_`).map((l) => `          ${l}`),
    `          let p${u} = select(0.0f, ps[h * NI + z${u}], in${u});`,
    `          acc[h * ${NV}u] += p${u} * v${u}_0;`,
    ...(V === 8 ? [`          acc[h * ${NV}u + 1u] += p${u} * v${u}_1;`] : []),
    `          if (lane == 0u) { lp[h] += p${u}; } }`,
  ];
  batches.forEach((us, bi) => {
    if (bi > 0) lines.push(...valueLoads(us));
    lines.push('      for (var h = 0u; h < HG; h++) {', ...us.flatMap(accumulate), '      }');
  });
  lines.push(
    // The next chunk overwrites kb, ps, tr and tf.
    '      workgroupBarrier();',
    '    }',
    // The slots' sums, G slots a round, in slot order; invocation z < HG * D owns (head z / D, dim z % D).
    `    var tot: array<f32, ${Math.ceil((hg * d) / NI)}>; var lt: array<f32, ${Math.ceil((hg * d) / NI)}>;`,
    `    for (var q = 0u; q < ${Math.ceil((hg * d) / NI)}u; q++) { tot[q] = 0.0f; lt[q] = 0.0f; }`,
    `    for (var g0 = 0u; g0 < ${KS}u; g0 = g0 + ${G}u) {`,
    `      if (ks >= g0 && ks < g0 + ${G}u) {`,
    '        for (var h = 0u; h < HG; h++) {',
    `          for (var r = 0u; r < ${NV}u; r++) { let a = acc[h * ${NV}u + r]; let o = ((ks - g0) * HG + h) * D + lane * ${V}u + r * 4u; red[o] = a.x; red[o + 1u] = a.y; red[o + 2u] = a.z; red[o + 3u] = a.w; }`,
    '          if (lane == 0u) { redl[(ks - g0) * HG + h] = lp[h]; }',
    '        }',
    '      }',
    '      workgroupBarrier();',
    `      for (var q = 0u; q < ${Math.ceil((hg * d) / NI)}u; q++) {`,
    `        let z = li + q * ${NI}u;`,
    '        if (z < HG * D) {',
    '          let h = z / D; let e = z % D;',
    `          for (var i = 0u; i < ${G}u; i++) { tot[q] += red[(i * HG + h) * D + e]; lt[q] += redl[i * HG + h]; }`,
    '        }',
    '      }',
    '      workgroupBarrier();',
    '    }',
    `    for (var q = 0u; q < ${Math.ceil((hg * d) / NI)}u; q++) {`,
    `      let z = li + q * ${NI}u;`,
    '      if (z < HG * D) {',
    '        let h = z / D; let e = z % D;',
    '        let o = select(select(0.0f, tot[q] / lt[q], lt[q] > 0.0f), kiln_nan(), bad[h]);',
    `        ${indent(storeStmt(x, 'b0', 'kmeta[19] + (b * H + h0 + h) * D + e', 'o'), 8)}`,
    '      }',
    '    }',
    '  }',
    '}',
  );
  return lines.join('\n');
}
