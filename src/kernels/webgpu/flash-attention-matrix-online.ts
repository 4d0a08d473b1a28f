/**
 * The one-pass ("online") form of the float16 webgpu attention prefill on subgroup matrices
 * (issue #20; KILN_WEBGPU_ATTN_MATRIX_FORM=online, row-tile plans only). The two-pass kernel
 * (flash-attention-matrix.ts) reads every key block twice and computes q k^T twice, because a
 * result matrix is opaque: its output accumulators cannot be rescaled per row when a row's
 * maximum grows. Here they are, through workgroup memory: a subgroup matrix result can be stored
 * and loaded again (subgroupMatrixLoad of a subgroup_matrix_result, validated on Dawn), so each
 * block does, for each subgroup's t rows:
 *   1. the block's keys and values to workgroup memory (two buffers, alternating, so the next
 *      block's copy does not wait for this block's p v: no barrier before the copy);
 *   2. S = q k^T into the subgroup's f32 scratch, and the output accumulators into its f32 tile
 *      Osc; one barrier;
 *   3. per row (its KPL parts combined with subgroup shuffles): the block's maximum, the new
 *      running maximum m', alpha = exp(m - m'), p = exp(s - m') rounded to float16 into P, the
 *      running sum l = l * alpha + sum(p), and the row of Osc scaled by alpha; one barrier;
 *   4. the accumulators loaded from Osc, += P v.
 * Three barriers a block against the two-pass kernel's seven per block of keys, one read of the
 * keys, one q k^T. The same results as the two-pass kernel up to rounding (p is relative to the
 * running maximum, then rescaled in float32, as flash attention does): masks, causality
 * (top-left), NaN scores (the row is NaN), fully masked rows (NaN), as there.
 *
 * Workgroup memory is the price: the f32 output tile (t x Ev a subgroup) and the second key and
 * value buffers, so plans take fewer subgroups a workgroup than the two-pass kernel's (the
 * planner below). `emulate`: the two-pass kernel's emulation (tests on SwiftShader), where a
 * row's parts are combined through workgroup memory instead of shuffles.
 */
import { NEG_MAX, type AttnKinds } from './flash-attention-source.js';
import { matrixDialect, matrixDims, matrixHeader, matrixPrefillProblem, PAD, rowTileChoices, rowTileParts, SPAD, type MatrixPrefillPlan } from './flash-attention-matrix.js';
import { storeStmt } from './storage.js';

/** Workgroup bytes of an online plan for head dims e, ev (tile elements of `tileBytes`: 2, or 4 emulated). */
export function matrixOnlineBytes(p: MatrixPrefillPlan, e: number, ev: number, tileBytes: number): number {
  const bq = p.sgs * p.t;
  const tiles = bq * (e + PAD) + 2 * p.bk * (e + PAD) + 2 * p.bk * (ev + PAD) + bq * (p.bk + PAD);
  // Scores, the output tile, and (emulated) the row parts' exchange.
  const f32s = bq * (p.bk + SPAD) + bq * (ev + SPAD) + (tileBytes === 4 ? p.sgs * p.sg : 0);
  return tileBytes * tiles + 4 * f32s;
}

/**
 * The online plan for `heads` (batch x heads) of L query rows: the largest blocks of keys (32, 16,
 * 8; never fewer than t) with the most subgroups a workgroup (4, 2, 1; at most rowTileChoices'
 * `most`) that fit `maxBytes`. Blocks before subgroups (the
 * two-pass planner's order is the other way): a block's three barriers are the kernel's fixed
 * cost, so halving the block doubles them per key, while fewer subgroups only copy each block
 * for fewer rows. null where nothing fits.
 */
export function matrixOnlinePlan(t: number, sg: number, heads: number, L: number, e: number, ev: number, maxBytes: number, maxInvocations: number, tileBytes = 2): MatrixPrefillPlan | null {
  if (matrixPrefillProblem(t, sg, e, ev) !== null) return null;
  const { subgroups, blocks, most } = rowTileChoices(t, sg, heads, L, maxInvocations);
  for (const bk of blocks) {
    for (const sgs of subgroups.filter((s) => s <= most)) {
      const p = { t, sg, sgs, bk, split: false };
      if (matrixOnlineBytes(p, e, ev, tileBytes) <= maxBytes) return p;
    }
  }
  return null;
}

/** The online kernel for `k` (x 'f16', or 'f16p' emulated) under row-tile `plan`; metadata as the row kernel's (flash-attention-source.ts). */
export function matrixOnlinePrefillSource(k: AttnKinds, plan: MatrixPrefillPlan, opts: { emulate?: boolean } = {}): string {
  if (plan.split) throw new Error('the online attention prefill takes row-tile plans, not key-split ones');
  const emulate = opts.emulate === true;
  const { ev, x } = k;
  const { t, sg, sgs, bk } = plan;
  const D = matrixDialect(k, plan, emulate);
  const WG = sgs * sg;
  const BQ = sgs * t;
  const { QS, KS, VS, PS, SCS, KPL, RPL, KPI, EQ, NB, VQ } = matrixDims(k, plan);
  const OS = ev + SPAD;
  const L: string[] = matrixHeader(D, k);
  L.push(
    `var<workgroup> Qs: array<${D.tile}, ${BQ * QS}>;`,
    `var<workgroup> Ks: array<${D.tile}, ${2 * bk * KS}>;`,
    `var<workgroup> Vs: array<${D.tile}, ${2 * bk * VS}>;`,
    `var<workgroup> Ps: array<${D.tile}, ${BQ * PS}>;`,
    `var<workgroup> Sc: array<f32, ${BQ * SCS}>;`,
    `var<workgroup> Osc: array<f32, ${BQ * OS}>;`,
    ...(emulate ? [`var<workgroup> Mx: array<f32, ${WG}>;`] : []),
  );
  const { rowOf, part, kCopy, vCopy, score, opening } = rowTileParts(k, plan, D, emulate);
  // The copies write buffer `kb` (0 or 1) of Ks / Vs: their stores address the tile from `at`, so
  // the buffer's offset is added where they index it.
  const shifted = (lines: readonly string[], arr: string, off: string): string[] => lines.map((l) => l.replaceAll(`${arr}[at + `, `${arr}[${off} + at + `));
  L.push(...opening);
  for (let v = 0; v < VQ; v++) L.push(`    var o${v} = ${D.result}();`);
  L.push(
    '    var kb = 0u;',
    `    for (var j0 = 0u; j0 < kend; j0 = j0 + ${bk}u) {`,
    // (1) This block's keys and values into buffer kb: its last reader was the p v two blocks
    // back, which every invocation finished before the barriers of the block between.
    ...[...kCopy.load('j0'), ...vCopy.load('j0'), ...shifted(kCopy.store, 'Ks', `kb * ${bk * KS}u`), ...shifted(vCopy.store, 'Vs', `kb * ${bk * VS}u`)].map((l) => `      ${l}`),
    '      workgroupBarrier();',
  );
  // (2) S = q k^T into the subgroup's scratch; the accumulators into Osc.
  for (let nb = 0; nb < NB; nb++) {
    L.push(`      { var s = ${D.result}();`);
    for (let q = 0; q < EQ; q++) L.push(`        s = ${D.mma(`ql${q}`, D.load('right', 'Ks', `kb * ${bk * KS}u + ${nb * t * KS + q * t}u`, true, `${KS}u`), 's')};`);
    L.push(`        ${D.store(`sgi * ${t * SCS}u + ${nb * t}u`, 's', `${SCS}u`)} }`);
  }
  for (let v = 0; v < VQ; v++) L.push(`      ${D.storeO(`sgi * ${t * OS}u + ${v * t}u`, `o${v}`, `${OS}u`)}`);
  L.push('      workgroupBarrier();');
  // (3) Per row: the running maximum and sum, p into P, the row of Osc scaled.
  for (let r = 0; r < RPL; r++) {
    const row = rowOf(r);
    L.push(
      `      { var bm = ${NEG_MAX};`,
      `        for (var u = 0u; u < ${KPI}u; u++) {`,
      ...score(row).map((l) => `          ${l}`),
      `          if (ok && kiln_isnan(s)) { bad[${r}] = true; }`,
      '          if (ok && !kiln_isnan(s)) { bm = max(bm, s); }',
      '        }',
      ...(KPL > 1 ? D.rowCombine('bm', 'max', t, sg).map((l) => `        ${l}`) : []),
      `        let mn = max(mr[${r}], bm); let alpha = kiln_exp(mr[${r}] - mn);`,
      '        var sum = 0.0f;',
      `        for (var u = 0u; u < ${KPI}u; u++) {`,
      ...score(row).map((l) => `          ${l}`),
      '          let p = select(0.0f, kiln_exp(s - mn), ok && !kiln_isnan(s));',
      `          Ps[(rg * ${t}u + ${row}) * ${PS}u + jj] = ${D.toTile('p')};`,
      '          sum = sum + p;',
      '        }',
      `        lr[${r}] = lr[${r}] * alpha + sum; mr[${r}] = mn;`,
      `        for (var u = 0u; u < ${ev / KPL}u; u++) { let at = (rg * ${t}u + ${row}) * ${OS}u + ${part} + u * ${KPL}u; Osc[at] = Osc[at] * alpha; }`,
      '      }',
    );
  }
  L.push('      workgroupBarrier();');
  // (4) The accumulators back from Osc, += P v.
  for (let v = 0; v < VQ; v++) L.push(`      o${v} = ${D.loadO(`sgi * ${t * OS}u + ${v * t}u`, `${OS}u`)};`);
  for (let q = 0; q < NB; q++) {
    L.push(`      { let pl = ${D.load('left', 'Ps', `sgi * ${t * PS}u + ${q * t}u`, false, `${PS}u`)};`);
    for (let v = 0; v < VQ; v++) L.push(`        o${v} = ${D.mma('pl', D.load('right', 'Vs', `kb * ${bk * VS}u + ${q * t * VS + v * t}u`, false, `${VS}u`), `o${v}`)};`);
    L.push('      }');
  }
  L.push('      kb = 1u - kb;', '    }');
  // The accumulators through Osc, divided by the row sums (the parts' sums and NaN flags combined).
  for (let v = 0; v < VQ; v++) L.push(`    ${D.storeO(`sgi * ${t * OS}u + ${v * t}u`, `o${v}`, `${OS}u`)}`);
  L.push('    workgroupBarrier();');
  for (let r = 0; r < RPL; r++) {
    const row = rowOf(r);
    L.push(`    { var rl = lr[${r}]; var rbad = select(0.0f, 1.0f, bad[${r}]);`);
    if (KPL > 1) L.push(...D.rowCombine('rl', 'add', t, sg).map((l) => `      ${l}`), ...D.rowCombine('rbad', 'max', t, sg).map((l) => `      ${l}`));
    L.push(
      `      let ir = i0 + rg * ${t}u + ${row};`,
      `      for (var u = 0u; u < ${ev / KPL}u; u++) {`,
      `        let cc = ${part} + u * ${KPL}u;`,
      '        if (ir < L) {',
      '          let nan = rbad != 0.0f || rl == 0.0f;',
      `          let val = select(Osc[(rg * ${t}u + ${row}) * ${OS}u + cc] / rl, kiln_nan(), nan);`,
      `          ${storeStmt(x, 'b0', 'oo + ir * kmeta[13] + cc * kmeta[14]', 'val')}`,
      '        }',
      '      }',
      '    }',
    );
  }
  L.push('  }', '}', ...D.helpers(true));
  return L.join('\n');
}
