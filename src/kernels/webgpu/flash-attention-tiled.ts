/**
 * The tiled webgpu flash-attention prefill (issue #20). The row-per-invocation prefill
 * (flash-attention-source.ts) kept a query row and its accumulator in each invocation's registers
 * (2 x 128 floats at head dim 128: spilled on NVIDIA) and ran one 64-invocation workgroup per 64
 * rows: a 128-token Qwen3-0.6B prefill got 32 workgroups and took ~355 us an attention on an H100
 * (bench/webgpu-profile.ts, half of the forward), against 15 us on cuda.
 *
 * Here a workgroup of WG invocations owns a tile of BQ query rows of one (batch, head), TPR =
 * WG / BQ invocations per row. Per block of BK keys:
 *   1. the keys go to workgroup memory (rows padded to E + 1 floats, so a warp's reads of
 *      different rows hit different banks) and every invocation scores KPT = BK / TPR of them for
 *      its row against the query tile (also in workgroup memory, pre-scaled);
 *   2. the scores go through workgroup memory, so each invocation takes its row's block maximum
 *      over all BK keys (the TPR invocations of a row compute the same one), while the values
 *      replace the keys in workgroup memory;
 *   3. each invocation turns its own scores into probabilities, and accumulates p v for its DPT =
 *      EV / TPR value dims (dims c, c + TPR, ...) over the whole block.
 * A row's sum of probabilities is split over its TPR invocations (each sums its own keys) and
 * added up once, at the end of the tile. Semantics are the row kernel's: top-left causal, bool and
 * additive masks, a row with no key left or a NaN score is NaN; every value is f32, rounded once
 * when stored.
 *
 * The tile sizes are chosen by tiledPrefillPlan from the device's workgroup memory (16 KiB
 * guaranteed by WebGPU, 48 KiB on NVIDIA): where no plan fits, the row kernel runs.
 */
import { batchOffsets, binds, maskStmts, NEG_MAX, type AttnKinds } from './flash-attention-source.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { header } from './template.js';

/** Invocations per workgroup of the tiled prefill. */
export const TILED_WG = 128;

export interface TiledPrefillPlan {
  /** Query rows per tile (workgroup). */
  readonly bq: number;
  /** Keys per block. */
  readonly bk: number;
}

/** Workgroup bytes of a plan for head dims e, ev: query tile, key/value block, scores and probabilities. */
export function tiledPrefillBytes(p: TiledPrefillPlan, e: number, ev: number): number {
  return 4 * (p.bq * (e + 1) + p.bk * Math.max(e + 1, ev) + 2 * p.bq * (p.bk + 1));
}

/**
 * The tile sizes for `tiles32` tiles of 32 rows (all batches and heads), head dims e and ev, and
 * `maxBytes` of workgroup memory, or null when none fits. 32-row tiles where there are enough of
 * them to fill a large GPU (256), else 16-row tiles (twice the workgroups: a 128-token prefill of
 * 16 heads gets 128); blocks of 32 keys, fewer where memory is short.
 */
export function tiledPrefillPlan(tiles32: number, e: number, ev: number, maxBytes: number): TiledPrefillPlan | null {
  const rowsFirst = tiles32 >= 256 ? [32, 16, 8] : [16, 32, 8];
  for (const bk of [32, 16, 8]) {
    for (const bq of rowsFirst) {
      const tpr = TILED_WG / bq;
      if (bk < tpr) continue;
      const p = { bq, bk };
      if (tiledPrefillBytes(p, e, ev) <= maxBytes) return p;
    }
  }
  return null;
}

const NEG_INF_BITS = '0xff800000u';

/**
 * WGSL copying the block of BK keys (or values) from key j0 into `kv`, rows `stride` floats apart:
 * binding `b` at offset `off`, row and column strides in kmeta[meta] and kmeta[meta + 1], `dim`
 * elements a row; rows past S are zeros.
 */
function blockCopy(x: StorageKind, b: string, off: string, meta: number, dim: string, stride: string): string[] {
  return [
    `for (var z = lid; z < BK * ${dim}; z = z + ${TILED_WG}u) {`,
    `  let jj = z / ${dim}; let d = z % ${dim}; let j = j0 + jj;`,
    `  kv[jj * ${stride} + d] = select(0.0f, ${loadExpr(x, b, `${off} + min(j, S - 1u) * kmeta[${meta}] + d * kmeta[${meta + 1}]`, false)}, j < S);`,
    '}',
  ];
}

/** Elements per 16-byte word in the vector copies (4 float32, 8 float16), null for other kinds. */
export function tiledWordWidth(x: StorageKind): 4 | 8 | null {
  return x === 'f32' ? 4 : x === 'f16' ? 8 : null;
}

/**
 * WGSL copying `rows` rows of `dim` elements from binding `b` (bound as 16-byte words) into
 * workgroup memory, every load issued before any store and unrolled (no array an index could
 * push to local memory): word z of the block is row z / (dim / w), word z % (dim / w) of it.
 * `row(jj)` gives the source row of block row jj and whether it exists (else zeros); the host
 * checked that the operand's offsets and row strides are whole words (flash-attention.ts).
 * Why: a scalar copy loop stores each element right after its load, so a warp waits out a load's
 * latency per element; a float16 element also cannot go straight from memory to workgroup memory.
 */
function wordCopy(x: StorageKind, w: 4 | 8, rows: number, dim: number, b: string, base: string, strideMeta: number, row: (jj: string) => { index: string; ok: string }, store: (jj: string, d: string, v: string) => string): string[] {
  const per = dim / w;
  const words = rows * per;
  const n = Math.ceil(words / TILED_WG);
  const lines: string[] = [];
  for (let u = 0; u < n; u++) {
    lines.push(`let z${u} = lid + ${u * TILED_WG}u; let jj${u} = min(z${u}, ${words - 1}u) / ${per}u; let dw${u} = z${u} % ${per}u;`);
    const r = row(`jj${u}`);
    lines.push(`let w${u} = select(vec4<u32>(), ${b}[(${base} + ${r.index} * kmeta[${strideMeta}]) / ${w}u + dw${u}], ${r.ok});`);
  }
  for (let u = 0; u < n; u++) {
    const body: string[] = [];
    if (w === 4) {
      body.push(`let f = bitcast<vec4<f32>>(w${u});`);
      for (let c = 0; c < 4; c++) body.push(store(`jj${u}`, `dw${u} * 4u + ${c}u`, `f[${c}]`));
    } else {
      for (let p = 0; p < 4; p++) {
        body.push(`let h${p} = unpack2x16float(w${u}[${p}]);`);
        for (let c = 0; c < 2; c++) body.push(store(`jj${u}`, `dw${u} * 8u + ${2 * p + c}u`, `h${p}[${c}]`));
      }
    }
    const guard = (u + 1) * TILED_WG > words ? `if (z${u} < ${words}u) ` : '';
    lines.push(`${guard}{`, ...body.map((l) => `  ${l}`), '}');
  }
  // One block scope, so that the key and the value copies in one loop body may reuse the names.
  return ['{', ...lines.map((l) => `  ${l}`), '}'];
}

/**
 * The tiled prefill kernel for `k` under `plan` (metadata as the row kernel's: flash-attention-source.ts).
 * `words`: query, keys and values are read as 16-byte words (wordCopy; the host checked alignment).
 */
export function tiledPrefillSource(k: AttnKinds, plan: TiledPrefillPlan, words = false): string {
  const { e, ev, x } = k;
  const { bq, bk } = plan;
  const tpr = TILED_WG / bq;
  const kpt = bk / tpr;
  const dpt = Math.ceil(ev / tpr);
  const kvRow = (jj: string): { index: string; ok: string } => ({ index: `min(j0 + ${jj}, S - 1u)`, ok: `j0 + ${jj} < S` });
  const qs = e + 1;
  const ks = e + 1;
  const ps = bk + 1;
  const w = words ? tiledWordWidth(x) : null;
  if (words && w === null) throw new Error(`tiled attention prefill: no word copies for storage ${x}`);
  // With word copies the query, key and value bindings (1-3) are arrays of 16-byte words.
  const lines = header(binds(k, x)).map((l) => (w !== null && /^@group\(0\) @binding\([123]\) /.test(l) ? l.replace(/: array<[^;]*>;$/, ': array<vec4<u32>>;') : l));
  lines.push(
    `const E = ${e}u;`,
    `const EV = ${ev}u;`,
    `const BQ = ${bq}u;`,
    `const BK = ${bk}u;`,
    `const TPR = ${tpr}u;`,
    `const KPT = ${kpt}u;`,
    `const DPT = ${dpt}u;`,
    `const QS = ${qs}u;`,
    `const KS = ${ks}u;`,
    `const PS = ${ps}u;`,
    `var<workgroup> qt: array<f32, ${bq * qs}>;`,
    `var<workgroup> kv: array<f32, ${bk * Math.max(ks, ev)}>;`,
    `var<workgroup> sw: array<f32, ${bq * ps}>;`,
    `var<workgroup> pw: array<f32, ${bq * ps}>;`,
    `@compute @workgroup_size(${TILED_WG})`,
    'fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) ng: vec3u) {',
    '  let L = kmeta[1]; let S = kmeta[2]; let scale = bitcast<f32>(kmeta[3]); let causal = kmeta[4] != 0u;',
    '  let rb = (L + BQ - 1u) / BQ; let tiles = kmeta[0] * rb;',
    '  let r = lid / TPR; let c = lid % TPR;',
    // -inf marks a key that is not seen (a runtime value: WGSL rejects an infinite constant).
    `  var ninfBits = ${NEG_INF_BITS}; let ninf = bitcast<f32>(ninfBits);`,
    '  for (var t = wid.x; t < tiles; t = t + ng.x) {',
    '    let bi = t / rb; let i0 = (t % rb) * BQ; let ir = i0 + r; let live = ir < L; let i = min(ir, L - 1u);',
    ...batchOffsets().map((l) => `    ${l}`),
    '    workgroupBarrier();',
    ...(w !== null
      ? wordCopy(x, w, bq, e, 'b1', 'qo', 5, (jj) => ({ index: `min(i0 + ${jj}, L - 1u)`, ok: 'true' }), (jj, d, v) => `qt[${jj} * QS + ${d}] = ${v} * scale;`)
      : [
          `for (var z = lid; z < BQ * E; z = z + ${TILED_WG}u) {`,
          '  let row = z / E; let d = z % E; let qi = min(i0 + row, L - 1u);',
          `  qt[row * QS + d] = ${loadExpr(x, 'b1', 'qo + qi * kmeta[5] + d * kmeta[6]', false)} * scale;`,
          '}',
        ]
    ).map((l) => `    ${l}`),
    '    var acc: array<f32, DPT>;',
    '    for (var u = 0u; u < DPT; u++) { acc[u] = 0.0f; }',
    `    var m = ${NEG_MAX}; var l = 0.0f; var bad = false; var started = false;`,
    '    var kend = S; if (causal) { kend = min(S, i0 + BQ); }',
    '    for (var j0 = 0u; j0 < kend; j0 = j0 + BK) {',
    '      workgroupBarrier();',
    ...(w !== null ? wordCopy(x, w, bk, e, 'b2', 'ko', 7, kvRow, (jj, d, v) => `kv[${jj} * KS + ${d}] = ${v};`) : blockCopy(x, 'b2', 'ko', 7, 'E', 'KS')).map((l) => `      ${l}`),
    '      workgroupBarrier();',
    '      var sc: array<f32, KPT>;',
    '      for (var u = 0u; u < KPT; u++) { sc[u] = 0.0f; }',
    '      for (var d = 0u; d < E; d++) {',
    '        let qd = qt[r * QS + d];',
    '        for (var u = 0u; u < KPT; u++) { sc[u] += qd * kv[(c + u * TPR) * KS + d]; }',
    '      }',
    '      for (var u = 0u; u < KPT; u++) {',
    '        let jr = j0 + c + u * TPR;',
    '        var s = sc[u];',
    '        var ok = live && jr < S && (!causal || jr <= ir);',
    '        {',
    '          let j = min(jr, S - 1u);',
    ...maskStmts(k).map((l) => `          ${l}`),
    '        }',
    '        if (ok && kiln_isnan(s)) { bad = true; }',
    '        sc[u] = select(ninf, s, ok);',
    '        sw[r * PS + c + u * TPR] = sc[u];',
    '      }',
    '      workgroupBarrier();',
    // The keys are dead: the values take their place while the scores are reduced.
    ...(w !== null ? wordCopy(x, w, bk, ev, 'b3', 'vo', 9, kvRow, (jj, d, v) => `kv[${jj} * EV + ${d}] = ${v};`) : blockCopy(x, 'b3', 'vo', 9, 'EV', 'EV')).map((l) => `      ${l}`),
    `      var bm = ${NEG_MAX}; var any = false;`,
    '      for (var jj = 0u; jj < BK; jj++) {',
    '        let v = sw[r * PS + jj];',
    `        if (bitcast<u32>(v) != ${NEG_INF_BITS}) { any = true; bm = max(bm, v); }`,
    '      }',
    '      let m2 = max(m, bm);',
    '      var ls = 0.0f;',
    '      for (var u = 0u; u < KPT; u++) {',
    `        let p = select(0.0f, kiln_exp(sc[u] - m2), bitcast<u32>(sc[u]) != ${NEG_INF_BITS});`,
    '        pw[r * PS + c + u * TPR] = p;',
    '        ls += p;',
    '      }',
    '      workgroupBarrier();',
    '      if (any) {',
    '        let cf = select(0.0f, kiln_exp(m - m2), started);',
    '        l = l * cf + ls;',
    '        for (var u = 0u; u < DPT; u++) { acc[u] = acc[u] * cf; }',
    '        let nk = min(BK, kend - j0);',
    '        for (var jj = 0u; jj < nk; jj++) {',
    '          let p = pw[r * PS + jj];',
    '          for (var u = 0u; u < DPT; u++) {',
    '            let d = c + u * TPR;',
    '            if (d < EV) { acc[u] += p * kv[jj * EV + d]; }',
    '          }',
    '        }',
    '        m = m2; started = true;',
    '      }',
    '    }',
    // A row's probability sum and NaN flag, added up over its TPR invocations.
    '    workgroupBarrier();',
    '    sw[lid] = l; pw[lid] = select(0.0f, 1.0f, bad);',
    '    workgroupBarrier();',
    '    var lt = 0.0f; var bt = false;',
    '    for (var u = 0u; u < TPR; u++) { lt += sw[r * TPR + u]; bt = bt || pw[r * TPR + u] != 0.0f; }',
    '    if (live) {',
    '      let nan = bt || lt == 0.0f;',
    '      for (var u = 0u; u < DPT; u++) {',
    '        let d = c + u * TPR;',
    '        if (d < EV) {',
    '          let o = select(acc[u] / lt, kiln_nan(), nan);',
    `          ${storeStmt(x, 'b0', 'oo + ir * kmeta[13] + d * kmeta[14]', 'o')}`,
    '        }',
    '      }',
    '    }',
    '  }',
    '}',
  );
  return lines.join('\n');
}
