/**
 * The key-split form of the float16 attention prefill on subgroup matrices (plans with `split`;
 * KILN_WEBGPU_ATTN_PREFILL=matrix-split forces it; auto takes it from 128 rows a head where row
 * tiles of 4 subgroups would give fewer than 256 workgroups: flash-attention.ts).
 * The row-tiled kernel (flash-attention-matrix.ts) gives each subgroup t query rows and walks it
 * over every key block: at 128 tokens of a Qwen3-0.6B prefill (16 heads, head dim 128) that is
 * 128 one-subgroup workgroups each waiting out every block's round trips, 34 us against the tiled
 * f32 kernel's 22 on an H100.
 *
 * Here a workgroup of SGS subgroups owns t query rows (one matrix tile) and splits the KEYS: each
 * loop step loads SGS consecutive blocks of BK keys (one per subgroup) and subgroup s computes on
 * block j * SGS + s. A block past the keys, or past the tile's last row under causality, skips its
 * math but never the barriers (every subgroup runs the same trip count: the loop bound is the
 * workgroup's). The same two passes as the row-tiled kernel, with a merge after each:
 *   1. each subgroup's running (max, sum of exponentials) per row over its blocks, exactly as the
 *      row-tiled kernel keeps them; then the parts of each row (SGS subgroups x the invocations
 *      sharing a row) merged through the scratch: m = max of the m_p, l = sum of l_p e^(m_p - m),
 *      so every invocation holds its rows' global max and sum;
 *   2. p = exp(s - max) rounded to float16, O_s += P V over the subgroup's blocks: no rescale, the
 *      max being global already; then the SGS partial accumulators through the f32 scratch,
 *      summed, divided by the row sum, rounded once to the output.
 * Masks, top-left causality, grouped-query heads, NaN and fully masked rows as the row-tiled kernel
 * (its helpers and dialects: the `emulate` form is SwiftShader's, as there).
 *
 * Measured (Qwen3 heads, float16, device time): on an H100 14.6 / 39.9 / 99.8 us at 128 / 256 / 512
 * rows against the tiled kernel's 22.3 / 68.5 / 200.6 and the row tiles' 33.6 / 100.1 / 156.9; on
 * an H200 the row tiles win where there are enough of them (1024 rows: 295 against 303 us; the
 * transformer block's 128 heads of 512: 426 against 542), which is what the rule separates.
 */
import { batchOffsets, maskStmts, NEG_MAX, type AttnKinds } from './flash-attention-source.js';
import { matrixDialect, matrixDims, matrixEntry, matrixHeader, splitScratchFloats, wordCopy, type MatrixPrefillPlan, type WordCopy } from './flash-attention-matrix.js';
import { storeStmt } from './storage.js';

/** The key-split kernel for `k` (x 'f16', or 'f16p' emulated) under `plan`; metadata as the row kernel's (flash-attention-source.ts). */
export function matrixSplitPrefillSource(k: AttnKinds, plan: MatrixPrefillPlan, opts: { emulate?: boolean } = {}): string {
  if (!plan.split) throw new Error('a row-tile plan: flash-attention-matrix.ts writes its kernel');
  const emulate = opts.emulate === true;
  const D = matrixDialect(k, plan, emulate);
  const { e, ev, x } = k;
  const { t, sg, sgs, bk } = plan;
  const WG = sgs * sg;
  // Keys a loop step (a block per subgroup).
  const KB = sgs * bk;
  const { QS, KS, VS, PS, SCS, KPL, RPL, KPI, EQ, NB, VQ } = matrixDims(k, plan);
  // Parts of a row: the invocations of the workgroup that hold it, one per (subgroup, key share).
  const PARTS = sgs * KPL;
  const L: string[] = matrixHeader(D, k);
  L.push(
    `var<workgroup> Qs: array<${D.tile}, ${t * QS}>;`,
    `var<workgroup> Ks: array<${D.tile}, ${KB * KS}>;`,
    `var<workgroup> Vs: array<${D.tile}, ${KB * VS}>;`,
    `var<workgroup> Ps: array<${D.tile}, ${sgs * t * PS}>;`,
    `var<workgroup> Sc: array<f32, ${splitScratchFloats(plan)}>;`,
  );
  // The rows this invocation takes in the scalar parts (every subgroup the same t rows): row
  // ln % t (+ u * sg where rows outnumber the invocations), keys from share c of its subgroup.
  const rowOf = (u: number): string => (RPL > 1 ? `(ln + ${u * sg}u)` : KPL > 1 ? `(ln % ${t}u)` : 'ln');
  const share = KPL > 1 ? `(ln / ${t}u)` : '0u';
  // This invocation's part of its rows (0 .. PARTS - 1).
  const part = `(sgi * ${KPL}u + ${share})`;
  const kvRow = (start: string, r: string): { index: string; ok: string } => ({ index: `min(${start} + ${r}, S - 1u)`, ok: `${start} + ${r} < S` });
  const qCopy = wordCopy(D, WG, t, e, 'b1', 'qo', 5, (start, r) => ({ index: `min(${start} + ${r}, L - 1u)`, ok: `${start} + ${r} < L` }), 'Qs', QS, 'wq');
  const kCopy = wordCopy(D, WG, KB, e, 'b2', 'ko', 7, kvRow, 'Ks', KS, 'wk');
  const vCopy = wordCopy(D, WG, KB, ev, 'b3', 'vo', 9, kvRow, 'Vs', VS, 'wv');
  const indent = (n: number, ls: readonly string[]): string[] => ls.map((l) => `${' '.repeat(n)}${l}`);
  // S = q k^T of the subgroup's block (Ks rows sgi * bk ...) into its scratch.
  const scores = (): string[] => {
    const o: string[] = [];
    for (let nb = 0; nb < NB; nb++) {
      o.push(`{ var s = ${D.result}();`);
      for (let q = 0; q < EQ; q++) o.push(`  s = ${D.mma(`ql${q}`, D.load('right', 'Ks', `sgi * ${bk * KS}u + ${nb * t * KS + q * t}u`, true, `${KS}u`), 's')};`);
      o.push(`  ${D.store(`sgi * ${t * SCS}u + ${nb * t}u`, 's', `${SCS}u`)} }`);
    }
    return o;
  };
  // A pass's loop head: SGS blocks' words to their tiles (every load before any store); the
  // subgroup's block jb (`has`: it has keys this tile sees) scored into its scratch; a barrier.
  const stepStart = (copies: readonly WordCopy[]): string[] => [
    `    for (var j0 = 0u; j0 < kend; j0 = j0 + ${KB}u) {`,
    '      workgroupBarrier();',
    ...indent(6, [...copies.flatMap((c) => c.load('j0')), ...copies.flatMap((c) => c.store)]),
    '      workgroupBarrier();',
    `      let jb = j0 + sgi * ${bk}u; let has = jb < kend;`,
    '      if (has) {',
    ...indent(8, scores()),
    '      }',
    '      workgroupBarrier();',
  ];
  // Score s of key jj of the subgroup's block for row `row` (ir), with ok: the key counts.
  const score = (row: string): string[] => [
    `let jj = ${share} + u * ${KPL}u; let jr = jb + jj; let ir = i0 + ${row}; let live = ir < L;`,
    `var s = Sc[(sgi * ${t}u + ${row}) * ${SCS}u + jj] * scale;`,
    'var ok = live && jr < S && (!causal || jr <= ir);',
    '{',
    '  let i = min(ir, L - 1u); let j = min(jr, S - 1u);',
    ...indent(2, maskStmts(k)),
    '}',
  ];
  L.push(
    ...matrixEntry(WG, sg, emulate),
    `  let rb = (L + ${t - 1}u) / ${t}u; let tiles = kmeta[0] * rb;`,
    `  let ln = lid % ${sg}u;`,
    '  for (var tt = wid.x; tt < tiles; tt = tt + ng.x) {',
    `    let bi = tt / rb; let i0 = (tt % rb) * ${t}u;`,
    ...indent(4, batchOffsets()),
    '    workgroupBarrier();',
    ...indent(4, ['{', ...qCopy.decl, ...qCopy.load('i0'), ...qCopy.store, '}', ...kCopy.decl, ...vCopy.decl]),
    '    workgroupBarrier();',
  );
  // Every subgroup multiplies the same query rows.
  for (let q = 0; q < EQ; q++) L.push(`    let ql${q} = ${D.load('left', 'Qs', `${q * t}u`, false, `${QS}u`)};`);
  L.push(
    `    var kend = S; if (causal) { kend = min(S, i0 + ${t}u); }`,
    `    var mr: array<f32, ${RPL}>; var lr: array<f32, ${RPL}>; var bad: array<bool, ${RPL}>;`,
    `    for (var u = 0u; u < ${RPL}u; u++) { mr[u] = ${NEG_MAX}; lr[u] = 0.0f; bad[u] = false; }`,
    // Pass 1: each row's maximum and sum of exponentials over this part's keys (online).
    ...stepStart([kCopy]),
    '      if (has) {',
  );
  for (let r = 0; r < RPL; r++) {
    L.push(
      `        for (var u = 0u; u < ${KPI}u; u++) {`,
      ...indent(10, score(rowOf(r))),
      `          if (ok && kiln_isnan(s)) { bad[${r}] = true; }`,
      '          if (ok && !kiln_isnan(s)) {',
      `            if (s > mr[${r}]) { lr[${r}] = lr[${r}] * kiln_exp(mr[${r}] - s) + 1.0f; mr[${r}] = s; } else { lr[${r}] = lr[${r}] + kiln_exp(s - mr[${r}]); }`,
      '          }',
      '        }',
    );
  }
  L.push('      }', '    }');
  // The PARTS parts of each row through the scratch (part-major): every part computes the totals.
  L.push('    workgroupBarrier();');
  for (let r = 0; r < RPL; r++) {
    L.push(`    { let o = (${part} * ${t}u + ${rowOf(r)}) * 3u; Sc[o] = mr[${r}]; Sc[o + 1u] = lr[${r}]; Sc[o + 2u] = select(0.0f, 1.0f, bad[${r}]); }`);
  }
  L.push('    workgroupBarrier();');
  for (let r = 0; r < RPL; r++) {
    L.push(
      `    { var m = ${NEG_MAX}; var b = false;`,
      `      for (var c = 0u; c < ${PARTS}u; c++) { let o = (c * ${t}u + ${rowOf(r)}) * 3u; m = max(m, Sc[o]); b = b || Sc[o + 2u] != 0.0f; }`,
      '      var l = 0.0f;',
      `      for (var c = 0u; c < ${PARTS}u; c++) { let o = (c * ${t}u + ${rowOf(r)}) * 3u; if (Sc[o + 1u] > 0.0f) { l = l + Sc[o + 1u] * kiln_exp(Sc[o] - m); } }`,
      `      mr[${r}] = m; lr[${r}] = l; bad[${r}] = b; }`,
    );
  }
  // Pass 2: p = exp(s - max) as float16 into the subgroup's P, its accumulators += P v.
  for (let v = 0; v < VQ; v++) L.push(`    var o${v} = ${D.result}();`);
  L.push(...stepStart([kCopy, vCopy]), '      if (has) {');
  for (let r = 0; r < RPL; r++) {
    L.push(
      `        for (var u = 0u; u < ${KPI}u; u++) {`,
      ...indent(10, score(rowOf(r))),
      `          let p = select(0.0f, kiln_exp(s - mr[${r}]), ok && !kiln_isnan(s));`,
      `          Ps[(sgi * ${t}u + ${rowOf(r)}) * ${PS}u + jj] = ${D.toTile('p')};`,
      '        }',
    );
  }
  L.push('      }', '      workgroupBarrier();', '      if (has) {');
  for (let q = 0; q < NB; q++) {
    L.push(`        { let pl = ${D.load('left', 'Ps', `sgi * ${t * PS}u + ${q * t}u`, false, `${PS}u`)};`);
    for (let v = 0; v < VQ; v++) L.push(`          o${v} = ${D.mma('pl', D.load('right', 'Vs', `sgi * ${bk * VS}u + ${q * t * VS + v * t}u`, false, `${VS}u`), `o${v}`)};`);
    L.push('        }');
  }
  L.push('      }', '    }');
  // The subgroups' accumulators through the scratch, NB matrices (bk columns) at a time: each
  // output element (its row's part, columns split over the PARTS parts) sums the SGS of them.
  for (let v0 = 0; v0 < VQ; v0 += NB) {
    const n = Math.min(NB, VQ - v0);
    const cols = n * t;
    L.push('    workgroupBarrier();');
    for (let v = v0; v < v0 + n; v++) L.push(`    ${D.store(`sgi * ${t * SCS}u + ${(v - v0) * t}u`, `o${v}`, `${SCS}u`)}`);
    L.push('    workgroupBarrier();');
    for (let r = 0; r < RPL; r++) {
      const row = rowOf(r);
      L.push(
        `    for (var u = 0u; u < ${Math.ceil(cols / PARTS)}u; u++) {`,
        `      let cc = ${part} + u * ${PARTS}u; let ir = i0 + ${row};`,
        `      if (ir < L${cols % PARTS !== 0 ? ` && cc < ${cols}u` : ''}) {`,
        `        var a = 0.0f; for (var g = 0u; g < ${sgs}u; g++) { a = a + Sc[(g * ${t}u + ${row}) * ${SCS}u + cc]; }`,
        `        let nan = bad[${r}] || lr[${r}] == 0.0f;`,
        `        let val = select(a / lr[${r}], kiln_nan(), nan);`,
        `        ${storeStmt(x, 'b0', `oo + ir * kmeta[13] + (${v0 * t}u + cc) * kmeta[14]`, 'val')}`,
        '      }',
        '    }',
      );
    }
  }
  L.push('  }', '}', ...D.helpers());
  return L.join('\n');
}
