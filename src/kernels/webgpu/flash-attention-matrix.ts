/**
 * The float16 webgpu attention prefill on subgroup matrices (issue #20; KILN_WEBGPU_ATTN_PREFILL=
 * matrix). The tiled prefill (flash-attention-tiled.ts) computes q k^T and p v with f32 FMAs: on an
 * H100 the transformer block's attention ([8, 16, 512, 64], causal, float16) took 0.705 ms of the
 * block's 1.55 ms against 0.040 ms on Kiln cuda, and a Qwen3-0.6B prefill's ~31 us a layer.
 *
 * Shape of the kernel: a workgroup of SGS subgroups owns BQ = SGS * t query rows of one (batch,
 * head), t rows per subgroup (t x t x t float16 matrices with float32 results: the device's square
 * configuration, 16 on NVIDIA). Keys go by blocks of BK. Two passes over the keys instead of an
 * online softmax, because a result matrix is opaque (no per-row rescale of the output
 * accumulators between blocks) and q k^T is the cheap half of the work:
 *   1. per block: keys to workgroup memory; each subgroup's scores S = q k^T (E / t multiplies per
 *      t keys) to its f32 scratch; then each row's running maximum and sum of exponentials
 *      (masks, causality and NaN scores as the tiled kernel treats them), kept per invocation;
 *      at the end the parts of a row are merged through the scratch;
 *   2. per block: keys and values to workgroup memory; S again; p = exp(s - max) rounded to
 *      float16 into the subgroup's P tile (as flash attention's p v multiply takes it); the output
 *      accumulators += P v (BK / t multiplies per t value dims).
 * At the end each subgroup's accumulators go through its scratch, divided by the row sum, rounded
 * once to the output. Top-left causal; a row with no key left or a NaN score is NaN, as the other
 * kernels do. The scores and softmax are float32; only p is float16 (relative error 2^-11 per
 * term), which is what the float16 output can hold anyway.
 *
 * Query, keys and values are read as 16-byte words (the host checked flash-attention.ts's
 * wordAligned); the query tile stays in workgroup memory for the launch and its matrices are
 * loaded once into registers. (Session 31 also loaded each block's words while the block before it computed its
 * softmax: 158 -> 167 us at 512 rows on an H100, slower; dropped, code in 70dd1d3.)
 *
 * `emulate` (tests): the same kernel without shader-f16, subgroups or subgroup matrices, as the
 * staged GEMM's emulation does it (gemm-subgroup-matrix-staged.ts): a "subgroup" is sg consecutive
 * invocations; a loaded matrix is a descriptor (array, offset, stride, majorness) read when it is
 * multiplied (exact here: every matrix is multiplied before its memory changes); a result matrix
 * is spread over the subgroup's invocations; tiles are f32 and the output packed float16. Every
 * index, barrier and pass is the real kernel's, so SwiftShader checks the plans' numbers.
 *
 * The key-split form (flash-attention-matrix-split.ts, plans with `split`) shares the plans, the
 * dialects and the word copies below: the planner takes it where the row tiles would leave the
 * device short of workgroups.
 */
import { batchOffsets, binds, maskStmts, NEG_MAX, type AttnKinds } from './flash-attention-source.js';
import { storeStmt } from './storage.js';
import { header } from './template.js';

/**
 * A plan: the matrix side t, invocations per subgroup, subgroups per workgroup, keys per block;
 * `split`: the key-split form (a workgroup owns t query rows, its subgroups take one block each of
 * every sgs consecutive blocks), else the row tiles (sgs * t rows, every subgroup all the blocks).
 */
export interface MatrixPrefillPlan {
  readonly t: number;
  readonly sg: number;
  readonly sgs: number;
  readonly bk: number;
  readonly split: boolean;
}

/** Padding (elements) of each float16 tile row, against bank conflicts (16 bytes). */
export const PAD = 8;
/** Padding of the f32 score rows. */
export const SPAD = 4;
/** float16 elements per 16-byte word. */
const W = 8;

/** Workgroups below which the planner takes fewer subgroups per workgroup (more workgroups), or splits the keys. */
const TARGET_GROUPS = 256;

/** Query rows a workgroup of plan `p` owns. */
export function matrixPrefillRows(p: MatrixPrefillPlan): number {
  return p.split ? p.t : p.sgs * p.t;
}

/**
 * f32s of the key-split form's scratch: each subgroup's scores (t x bk), or the (max, sum, NaN
 * flag) of each part of each row (sgs subgroups x max(1, sg / t) invocations a row) when merged.
 */
export function splitScratchFloats(p: MatrixPrefillPlan): number {
  return Math.max(p.sgs * p.t * (p.bk + SPAD), 3 * p.sgs * Math.max(p.t, p.sg));
}

/** Workgroup bytes of a plan for head dims e, ev (tile elements of `tileBytes`: 2, or 4 emulated). */
export function matrixPrefillBytes(p: MatrixPrefillPlan, e: number, ev: number, tileBytes: number): number {
  if (p.split) {
    // The query tile, sgs blocks of keys and values, a P tile per subgroup.
    const kb = p.sgs * p.bk;
    const tiles = p.t * (e + PAD) + kb * (e + PAD) + kb * (ev + PAD) + p.sgs * p.t * (p.bk + PAD);
    return tileBytes * tiles + 4 * splitScratchFloats(p);
  }
  const bq = p.sgs * p.t;
  const tiles = bq * (e + PAD) + p.bk * (e + PAD) + p.bk * (ev + PAD) + bq * (p.bk + PAD);
  return tileBytes * tiles + 4 * bq * (p.bk + SPAD);
}

/** Why the kernel cannot take these head dims on matrices of side t, or null. */
export function matrixPrefillProblem(t: number, sg: number, e: number, ev: number): string | null {
  if (e % t !== 0 || ev % t !== 0) return `head dims ${e}, ${ev} are not multiples of the matrix side ${t}`;
  if (e % W !== 0 || ev % W !== 0) return `head dims ${e}, ${ev} are not whole 16-byte words`;
  if (sg % t !== 0 && t % sg !== 0) return `subgroups of ${sg} do not divide ${t} rows evenly`;
  return null;
}

/** Planner options: tile element bytes (2, or 4 emulated); the form; the key-split form's most subgroups (tests). */
export interface MatrixPlanOptions {
  readonly tileBytes?: number;
  /** true: the key-split form (null where it does not fit); false (the default): the row tiles; 'auto': the rule below. */
  readonly split?: boolean | 'auto';
  readonly maxSplitSubgroups?: number;
}

/**
 * What the planners choose from: subgroups a workgroup (4, 2, 1, within the invocation limit),
 * keys a block (32, 16, 8: whole matrices, split evenly over a row's parts), and `most`, the most
 * subgroups that still leave TARGET_GROUPS row tiles of `heads` x L rows (else one: the most
 * workgroups).
 */
export function rowTileChoices(t: number, sg: number, heads: number, L: number, maxInvocations: number): { subgroups: number[]; blocks: number[]; most: number } {
  const subgroups = [4, 2, 1].filter((s) => s * sg <= maxInvocations);
  const kpl = Math.max(1, sg / t);
  const blocks = [32, 16, 8].filter((bk) => bk >= t && bk % t === 0 && bk % kpl === 0);
  const most = subgroups.find((s) => heads * Math.ceil(L / (s * t)) >= TARGET_GROUPS) ?? 1;
  return { subgroups, blocks, most };
}

/** The key-split rule: row tiles of 4 subgroups would give fewer than TARGET_GROUPS workgroups. */
export function matrixSplitWanted(t: number, heads: number, L: number): boolean {
  return heads * Math.ceil(L / (4 * t)) < TARGET_GROUPS;
}

/**
 * The plan for `heads` (batch x heads) of L query rows. Row tiles: the most subgroups a workgroup
 * (4, 2, 1) that still gives TARGET_GROUPS workgroups (else one), blocks of 32 keys (16 where
 * memory is short, never fewer than t). Key split (forced, or 'auto' where row tiles of 4
 * subgroups would give fewer than TARGET_GROUPS workgroups: short sequences, where one-subgroup
 * workgroups each wait out every block's round trips): 4 subgroups a workgroup where the limits
 * allow (else 2), then the largest blocks that fit; 'auto' keeps the row tiles where no split plan
 * fits. null where nothing fits `maxBytes`.
 */
export function matrixPrefillPlan(t: number, sg: number, heads: number, L: number, e: number, ev: number, maxBytes: number, maxInvocations: number, opts: MatrixPlanOptions = {}): MatrixPrefillPlan | null {
  if (matrixPrefillProblem(t, sg, e, ev) !== null) return null;
  const tileBytes = opts.tileBytes ?? 2;
  const { subgroups, blocks, most } = rowTileChoices(t, sg, heads, L, maxInvocations);
  const split = opts.split === 'auto' ? matrixSplitWanted(t, heads, L) : (opts.split ?? false);
  if (split) {
    for (const sgs of subgroups.filter((s) => s > 1 && s <= (opts.maxSplitSubgroups ?? 4))) {
      for (const bk of blocks) {
        const p = { t, sg, sgs, bk, split: true };
        if (matrixPrefillBytes(p, e, ev, tileBytes) <= maxBytes) return p;
      }
    }
    if (opts.split === true) return null;
  }
  for (const sgs of subgroups.filter((s) => s <= most)) {
    for (const bk of blocks) {
      const p = { t, sg, sgs, bk, split: false };
      if (matrixPrefillBytes(p, e, ev, tileBytes) <= maxBytes) return p;
    }
  }
  return null;
}

/** How the kernels spell matrices, tiles and f16 roundings: the device's, or the emulation's. */
export interface Dialect {
  readonly enables: string[];
  /** Element type of the tiles in workgroup memory. */
  readonly tile: string;
  readonly left: string;
  readonly right: string;
  readonly result: string;
  /** A word's u32 as a vec2 of tile elements. */
  unpack(x: string): string;
  /** A float32 value as the tile element the p v multiply takes (float16 rounding). */
  toTile(x: string): string;
  load(kind: 'left' | 'right', arr: string, off: string, col: boolean, stride: string): string;
  mma(l: string, r: string, acc: string): string;
  /** Stores result `v` row-major into Sc at `off`, rows `stride` apart. */
  store(off: string, v: string, stride: string): string;
  /** Stores result `v` row-major into the f32 array Osc (the online form's output tile). */
  storeO(off: string, v: string, stride: string): string;
  /** A result matrix loaded row-major from Osc. */
  loadO(off: string, stride: string): string;
  /**
   * Statements that combine `x` (an f32 variable) over the invocations that share a row (the
   * KPL parts of a subgroup: lanes ln ^ t, ln ^ 2t, ...), with max or add, into every one of them.
   */
  rowCombine(x: string, op: 'max' | 'add', t: number, sg: number): string[];
  /** Helper functions; `o`: also those of Osc (the online form). */
  helpers(o?: boolean): string[];
}

/** The xor masks that reach a row's other parts: t, 2t, ... below sg. */
function partMasks(t: number, sg: number): number[] {
  const m: number[] = [];
  for (let x = t; x < sg; x *= 2) m.push(x);
  return m;
}

function realDialect(t: number): Dialect {
  const left = `subgroup_matrix_left<f16, ${t}, ${t}>`;
  const right = `subgroup_matrix_right<f16, ${t}, ${t}>`;
  return {
    enables: ['enable subgroups;', 'enable chromium_experimental_subgroup_matrix;'],
    tile: 'f16',
    left,
    right,
    result: `subgroup_matrix_result<f32, ${t}, ${t}>`,
    unpack: (x) => `bitcast<vec2<f16>>(${x})`,
    toTile: (x) => `f16(${x})`,
    load: (kind, arr, off, col, stride) => `subgroupMatrixLoad<${kind === 'left' ? left : right}, ${col ? 'col_major' : 'row_major'}>(&${arr}, ${off}, ${stride})`,
    mma: (l, r, acc) => `subgroupMatrixMultiplyAccumulate(${l}, ${r}, ${acc})`,
    store: (off, v, stride) => `subgroupMatrixStore<row_major>(&Sc, ${off}, ${v}, ${stride});`,
    storeO: (off, v, stride) => `subgroupMatrixStore<row_major>(&Osc, ${off}, ${v}, ${stride});`,
    loadO: (off, stride) => `subgroupMatrixLoad<subgroup_matrix_result<f32, ${t}, ${t}>, row_major>(&Osc, ${off}, ${stride})`,
    // The parts of a row are lanes of one subgroup (lane ln is invocation lid % sg of the
    // workgroup, as the row tiles already assume of subgroup_id): a butterfly of shuffles.
    rowCombine: (x, op, tt, sg) => partMasks(tt, sg).map((m) => (op === 'max' ? `${x} = max(${x}, subgroupShuffleXor(${x}, ${m}u));` : `${x} = ${x} + subgroupShuffleXor(${x}, ${m}u);`)),
    helpers: () => [],
  };
}

/** Arrays a descriptor may name (emulation). */
const EMU_ARRAYS = ['Qs', 'Ks', 'Vs', 'Ps'] as const;

function emulatedDialect(t: number, sg: number): Dialect {
  if ((t * t) % sg !== 0) throw new Error(`the emulated attention prefill needs ${t} x ${t} results to split over subgroups of ${sg}`);
  const E = (t * t) / sg;
  return {
    enables: [],
    tile: 'f32',
    left: 'vec4<u32>',
    right: 'vec4<u32>',
    result: `array<f32, ${E}>`,
    unpack: (x) => `unpack2x16float(${x})`,
    toTile: (x) => `unpack2x16float(pack2x16float(vec2<f32>(${x}, 0.0f))).x`,
    load: (_kind, arr, off, col, stride) => `vec4<u32>(${EMU_ARRAYS.indexOf(arr as (typeof EMU_ARRAYS)[number])}u, ${off}, ${stride}, ${col ? 1 : 0}u)`,
    mma: (l, r, acc) => `emu_mma(${l}, ${r}, ${acc})`,
    store: (off, v, stride) => `emu_store(${off}, ${stride}, ${v});`,
    storeO: (off, v, stride) => `emu_store_o(${off}, ${stride}, ${v});`,
    loadO: (off, stride) => `emu_load_o(${off}, ${stride})`,
    // No subgroups here: through the workgroup array Mx, between barriers (uniform: the callers'
    // loops are unrolled or workgroup-uniform).
    rowCombine: (x, op, tt, sgw) => [
      'workgroupBarrier();',
      `Mx[lid] = ${x};`,
      'workgroupBarrier();',
      `{ let mx_at = lid - lid % ${sgw}u + lid % ${tt}u; var mx_c = Mx[mx_at]; for (var mx_q = 1u; mx_q < ${sgw / tt}u; mx_q++) { mx_c = ${op === 'max' ? `max(mx_c, Mx[mx_at + mx_q * ${tt}u])` : `mx_c + Mx[mx_at + mx_q * ${tt}u]`}; } ${x} = mx_c; }`,
    ],
    helpers: (o = false) => [
      'var<private> emu_lane: u32;',
      // Element (row, col) of the matrix descriptor d: array d.x, offset d.y, stride d.z, col-major d.w.
      'fn emu_at(d: vec4<u32>, row: u32, col: u32) -> f32 {',
      '  let e = select(d.y + row * d.z + col, d.y + col * d.z + row, d.w == 1u);',
      ...EMU_ARRAYS.map((a, i) => `  if (d.x == ${i}u) { return ${a}[e]; }`),
      '  return 0.0f;',
      '}',
      `fn emu_mma(l: vec4<u32>, r: vec4<u32>, acc: array<f32, ${E}>) -> array<f32, ${E}> {`,
      '  var c = acc;',
      `  for (var q = 0u; q < ${E}u; q++) {`,
      `    let e = emu_lane + q * ${sg}u; let i = e / ${t}u; let j = e % ${t}u;`,
      '    var s = c[q];',
      `    for (var x = 0u; x < ${t}u; x++) { s = s + emu_at(l, i, x) * emu_at(r, x, j); }`,
      '    c[q] = s;',
      '  }',
      '  return c;',
      '}',
      `fn emu_store(off: u32, stride: u32, v: array<f32, ${E}>) {`,
      `  for (var q = 0u; q < ${E}u; q++) { let e = emu_lane + q * ${sg}u; Sc[off + (e / ${t}u) * stride + e % ${t}u] = v[q]; }`,
      '}',
      ...(o
        ? [
            `fn emu_store_o(off: u32, stride: u32, v: array<f32, ${E}>) {`,
            `  for (var q = 0u; q < ${E}u; q++) { let e = emu_lane + q * ${sg}u; Osc[off + (e / ${t}u) * stride + e % ${t}u] = v[q]; }`,
            '}',
            `fn emu_load_o(off: u32, stride: u32) -> array<f32, ${E}> {`,
            `  var v: array<f32, ${E}>;`,
            `  for (var q = 0u; q < ${E}u; q++) { let e = emu_lane + q * ${sg}u; v[q] = Osc[off + (e / ${t}u) * stride + e % ${t}u]; }`,
            '  return v;',
            '}',
          ]
        : []),
    ],
  };
}

/** A copy of rows of 16-byte words into a tile, in halves: the loads into registers, the stores. */
export interface WordCopy {
  /** Register declarations (once, before any loop that holds them). */
  readonly decl: string[];
  /** The loads of the block starting at `start` (zeros for rows that do not exist). */
  load(start: string): string[];
  /** The stores of the registers into the tile (the loads must have run). */
  readonly store: string[];
}

/**
 * Copying `rows` rows of `dim` elements (16-byte words) of binding `b` into tile `arr` (rows
 * `stride` apart): source row of block row r is row(start, r), zeros where not ok. Word z of the
 * block goes through invocation z % wg's register `name` z / wg.
 */
export function wordCopy(D: Dialect, wg: number, rows: number, dim: number, b: string, base: string, strideMeta: number, row: (start: string, r: string) => { index: string; ok: string }, arr: string, stride: number, name: string): WordCopy {
  const per = dim / W;
  const total = rows * per;
  const n = Math.ceil(total / wg);
  const decl = [`var ${Array.from({ length: n }, (_, u) => `${name}${u}: vec4<u32>`).join('; var ')};`];
  const load = (start: string): string[] => {
    const L: string[] = [];
    for (let u = 0; u < n; u++) {
      const r = row(start, 'r');
      L.push(`{ let z = lid + ${u * wg}u; let r = min(z, ${total - 1}u) / ${per}u; let dw = z % ${per}u; ${name}${u} = select(vec4<u32>(), ${b}[(${base} + ${r.index} * kmeta[${strideMeta}]) / ${W}u + dw], ${r.ok}); }`);
    }
    return L;
  };
  const store: string[] = [];
  for (let u = 0; u < n; u++) {
    const guard = (u + 1) * wg > total ? `if (z < ${total}u) ` : '';
    const puts = [0, 1, 2, 3].map((p) => `let h${p} = ${D.unpack(`${name}${u}[${p}]`)}; ${arr}[at + ${2 * p}u] = h${p}.x; ${arr}[at + ${2 * p + 1}u] = h${p}.y;`);
    store.push(`{ let z = lid + ${u * wg}u; ${guard}{ let at = (z / ${per}u) * ${stride}u + (z % ${per}u) * ${W}u; ${puts.join(' ')} } }`);
  }
  return { decl, load, store };
}

/** The dialect of `plan` for `k` (checked: float16 storage, packed when emulated; head dims the plan takes). */
export function matrixDialect(k: AttnKinds, plan: MatrixPrefillPlan, emulate: boolean): Dialect {
  const { e, ev, x } = k;
  if (x !== (emulate ? 'f16p' : 'f16')) throw new Error(`the ${emulate ? 'emulated ' : ''}subgroup matrix attention prefill takes float16 (${emulate ? 'f16p' : 'f16'}), got ${x}`);
  const why = matrixPrefillProblem(plan.t, plan.sg, e, ev);
  if (why !== null) throw new Error(`subgroup matrix attention prefill: ${why}`);
  return emulate ? emulatedDialect(plan.t, plan.sg) : realDialect(plan.t);
}

/** The enables and bindings of the kernels: query, keys and values read as 16-byte words. */
export function matrixHeader(D: Dialect, k: AttnKinds): string[] {
  const lines = header(binds(k, k.x)).map((l) => (/^@group\(0\) @binding\([123]\) /.test(l) ? l.replace(/: array<[^;]*>;$/, ': array<vec4<u32>>;') : l));
  return [...D.enables, ...lines];
}

/**
 * What both forms derive from a plan and the head dims: the padded row strides of the query, key,
 * value, p and score tiles; invocations per row of a subgroup (each taking keys c, c + KPL, ...),
 * rows per invocation and keys per invocation of a block; matrices along E, a block and Ev.
 */
export function matrixDims(k: AttnKinds, plan: MatrixPrefillPlan): { QS: number; KS: number; VS: number; PS: number; SCS: number; KPL: number; RPL: number; KPI: number; EQ: number; NB: number; VQ: number } {
  const { e, ev } = k;
  const { t, sg, bk } = plan;
  const KPL = Math.max(1, sg / t);
  return { QS: e + PAD, KS: e + PAD, VS: ev + PAD, PS: bk + PAD, SCS: bk + SPAD, KPL, RPL: Math.max(1, t / sg), KPI: bk / KPL, EQ: e / t, NB: bk / t, VQ: ev / t };
}

/** Both forms' entry point and its first lines: the subgroup (emulated: from the invocation index) and the sizes, scale and causality. */
export function matrixEntry(WG: number, sg: number, emulate: boolean): string[] {
  return [
    `@compute @workgroup_size(${WG})`,
    `fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, ${emulate ? '' : '@builtin(subgroup_id) sgi: u32, '}@builtin(num_workgroups) ng: vec3u) {`,
    ...(emulate ? [`  let sgi = lid / ${sg}u; emu_lane = lid % ${sg}u;`] : []),
    '  let L = kmeta[1]; let S = kmeta[2]; let scale = bitcast<f32>(kmeta[3]); let causal = kmeta[4] != 0u;',
  ];
}

/**
 * What the row-tile kernels (the two-pass one here and the online one,
 * flash-attention-matrix-online.ts) share: the rows an invocation takes in the scalar parts
 * (region rg, a subgroup's t rows; row ln % t, + u * sg where rows outnumber the invocations; keys
 * from part `part`), the word copies of the query tile and of a block's keys and values, the score
 * of a key for a row with its mask (`score`: s, ok, jj, jr, ir for row expression `row` inside a
 * loop over u), and the kernel's opening: the entry, the loop over row tiles, the query tile copied
 * and its matrices loaded (ql0..), the causal end of the keys, and each row's running maximum,
 * sum and NaN flag (mr, lr, bad).
 */
export function rowTileParts(k: AttnKinds, plan: MatrixPrefillPlan, D: Dialect, emulate: boolean): { rowOf: (u: number) => string; part: string; kCopy: WordCopy; vCopy: WordCopy; score: (row: string) => string[]; opening: string[] } {
  const { e, ev } = k;
  const { t, sg, sgs, bk } = plan;
  const WG = sgs * sg;
  const BQ = sgs * t;
  const { QS, KS, VS, SCS, KPL, RPL, EQ } = matrixDims(k, plan);
  const rowOf = (u: number): string => (RPL > 1 ? `(ln + ${u * sg}u)` : KPL > 1 ? `(ln % ${t}u)` : 'ln');
  const part = KPL > 1 ? `(ln / ${t}u)` : '0u';
  const kvRow = (start: string, r: string): { index: string; ok: string } => ({ index: `min(${start} + ${r}, S - 1u)`, ok: `${start} + ${r} < S` });
  const qCopy = wordCopy(D, WG, BQ, e, 'b1', 'qo', 5, (start, r) => ({ index: `min(${start} + ${r}, L - 1u)`, ok: `${start} + ${r} < L` }), 'Qs', QS, 'wq');
  const kCopy = wordCopy(D, WG, bk, e, 'b2', 'ko', 7, kvRow, 'Ks', KS, 'wk');
  const vCopy = wordCopy(D, WG, bk, ev, 'b3', 'vo', 9, kvRow, 'Vs', VS, 'wv');
  const score = (row: string): string[] => [
    `let jj = ${part} + u * ${KPL}u; let jr = j0 + jj; let ir = i0 + rg * ${t}u + ${row}; let live = ir < L;`,
    `var s = Sc[(rg * ${t}u + ${row}) * ${SCS}u + jj] * scale;`,
    'var ok = live && jr < S && (!causal || jr <= ir);',
    '{',
    '  let i = min(ir, L - 1u); let j = min(jr, S - 1u);',
    ...maskStmts(k).map((l) => `  ${l}`),
    '}',
  ];
  const opening = [
    ...matrixEntry(WG, sg, emulate),
    `  let rb = (L + ${BQ - 1}u) / ${BQ}u; let tiles = kmeta[0] * rb;`,
    `  let rg = lid / ${sg}u; let ln = lid % ${sg}u;`,
    '  for (var tt = wid.x; tt < tiles; tt = tt + ng.x) {',
    `    let bi = tt / rb; let i0 = (tt % rb) * ${BQ}u;`,
    ...batchOffsets().map((l) => `    ${l}`),
    // The tile before this one may still read the tiles.
    '    workgroupBarrier();',
    ...['{', ...qCopy.decl, ...qCopy.load('i0'), ...qCopy.store, '}'].map((l) => `    ${l}`),
    ...kCopy.decl.map((l) => `    ${l}`),
    ...vCopy.decl.map((l) => `    ${l}`),
    '    workgroupBarrier();',
    ...Array.from({ length: EQ }, (_, q) => `    let ql${q} = ${D.load('left', 'Qs', `sgi * ${t * QS}u + ${q * t}u`, false, `${QS}u`)};`),
    `    var kend = S; if (causal) { kend = min(S, i0 + ${BQ}u); }`,
    `    var mr: array<f32, ${RPL}>; var lr: array<f32, ${RPL}>; var bad: array<bool, ${RPL}>;`,
    `    for (var u = 0u; u < ${RPL}u; u++) { mr[u] = ${NEG_MAX}; lr[u] = 0.0f; bad[u] = false; }`,
  ];
  return { rowOf, part, kCopy, vCopy, score, opening };
}

/** The kernel for `k` (x 'f16', or 'f16p' emulated) under row-tile `plan`; metadata as the row kernel's (flash-attention-source.ts). */
export function matrixPrefillSource(k: AttnKinds, plan: MatrixPrefillPlan, opts: { emulate?: boolean } = {}): string {
  if (plan.split) throw new Error('a key-split plan: flash-attention-matrix-split.ts writes its kernel');
  const emulate = opts.emulate === true;
  const { x } = k;
  const { t, sg, sgs, bk } = plan;
  const D = matrixDialect(k, plan, emulate);
  const BQ = sgs * t;
  const { QS, KS, VS, PS, SCS, KPL, RPL, KPI, EQ, NB, VQ } = matrixDims(k, plan);
  const L: string[] = matrixHeader(D, k);
  L.push(
    `var<workgroup> Qs: array<${D.tile}, ${BQ * QS}>;`,
    `var<workgroup> Ks: array<${D.tile}, ${bk * KS}>;`,
    `var<workgroup> Vs: array<${D.tile}, ${bk * VS}>;`,
    `var<workgroup> Ps: array<${D.tile}, ${BQ * PS}>;`,
    `var<workgroup> Sc: array<f32, ${BQ * SCS}>;`,
  );
  const { rowOf, part, kCopy, vCopy, score, opening } = rowTileParts(k, plan, D, emulate);
  // S = q k^T for this block into the subgroup's scratch.
  const scores = (): string[] => {
    const o: string[] = [];
    for (let nb = 0; nb < NB; nb++) {
      o.push(`{ var s = ${D.result}();`);
      for (let q = 0; q < EQ; q++) o.push(`  s = ${D.mma(`ql${q}`, D.load('right', 'Ks', `${nb * t * KS + q * t}u`, true, `${KS}u`), 's')};`);
      o.push(`  ${D.store(`sgi * ${t * SCS}u + ${nb * t}u`, 's', `${SCS}u`)} }`);
    }
    return o;
  };
  // A pass's block loop head: the block's words to their tiles (every load before any store), then
  // this block's scores in each subgroup's scratch, published by a barrier.
  const blockStart = (copies: readonly WordCopy[]): string[] => [
    `    for (var j0 = 0u; j0 < kend; j0 = j0 + ${bk}u) {`,
    '      workgroupBarrier();',
    ...[...copies.flatMap((c) => c.load('j0')), ...copies.flatMap((c) => c.store)].map((l) => `      ${l}`),
    '      workgroupBarrier();',
    ...scores().map((l) => `      ${l}`),
    '      workgroupBarrier();',
  ];
  L.push(
    ...opening,
    // Pass 1: each row's maximum and sum of exponentials (online, per invocation).
    ...blockStart([kCopy]),
  );
  for (let r = 0; r < RPL; r++) {
    L.push(
      `      for (var u = 0u; u < ${KPI}u; u++) {`,
      ...score(rowOf(r)).map((l) => `        ${l}`),
      `        if (ok && kiln_isnan(s)) { bad[${r}] = true; }`,
      `        if (ok && !kiln_isnan(s)) {`,
      `          if (s > mr[${r}]) { lr[${r}] = lr[${r}] * kiln_exp(mr[${r}] - s) + 1.0f; mr[${r}] = s; } else { lr[${r}] = lr[${r}] + kiln_exp(s - mr[${r}]); }`,
      '        }',
      '      }',
    );
  }
  L.push('    }');
  // The parts of a row merged through the scratch (every part computes the row's totals).
  if (KPL > 1) {
    L.push(
      '    workgroupBarrier();',
      `    Sc[lid * 3u] = mr[0]; Sc[lid * 3u + 1u] = lr[0]; Sc[lid * 3u + 2u] = select(0.0f, 1.0f, bad[0]);`,
      '    workgroupBarrier();',
      `    { var m = ${NEG_MAX}; var b = false;`,
      `      for (var c = 0u; c < ${KPL}u; c++) { let o = (rg * ${sg}u + c * ${t}u + ln % ${t}u) * 3u; m = max(m, Sc[o]); b = b || Sc[o + 2u] != 0.0f; }`,
      '      var l = 0.0f;',
      `      for (var c = 0u; c < ${KPL}u; c++) { let o = (rg * ${sg}u + c * ${t}u + ln % ${t}u) * 3u; if (Sc[o + 1u] > 0.0f) { l = l + Sc[o + 1u] * kiln_exp(Sc[o] - m); } }`,
      '      mr[0] = m; lr[0] = l; bad[0] = b; }',
    );
  }
  // Pass 2: p = exp(s - max) as float16 into P, the output accumulators += P v.
  for (let v = 0; v < VQ; v++) L.push(`    var o${v} = ${D.result}();`);
  L.push(
    ...blockStart([kCopy, vCopy]),
  );
  for (let r = 0; r < RPL; r++) {
    L.push(
      `      for (var u = 0u; u < ${KPI}u; u++) {`,
      ...score(rowOf(r)).map((l) => `        ${l}`),
      `        let p = select(0.0f, kiln_exp(s - mr[${r}]), ok && !kiln_isnan(s));`,
      `        Ps[(rg * ${t}u + ${rowOf(r)}) * ${PS}u + jj] = ${D.toTile('p')};`,
      '      }',
    );
  }
  L.push('      workgroupBarrier();');
  for (let q = 0; q < NB; q++) {
    L.push(`      { let pl = ${D.load('left', 'Ps', `sgi * ${t * PS}u + ${q * t}u`, false, `${PS}u`)};`);
    for (let v = 0; v < VQ; v++) L.push(`        o${v} = ${D.mma('pl', D.load('right', 'Vs', `${q * t * VS + v * t}u`, false, `${VS}u`), `o${v}`)};`);
    L.push('      }');
  }
  L.push('    }');
  // The accumulators through the scratch, NB matrices (bk columns) at a time, divided by the sums.
  for (let v0 = 0; v0 < VQ; v0 += NB) {
    const n = Math.min(NB, VQ - v0);
    L.push('    workgroupBarrier();');
    for (let v = v0; v < v0 + n; v++) L.push(`    ${D.store(`sgi * ${t * SCS}u + ${(v - v0) * t}u`, `o${v}`, `${SCS}u`)}`);
    L.push('    workgroupBarrier();');
    for (let r = 0; r < RPL; r++) {
      const row = rowOf(r);
      L.push(
        `    for (var u = 0u; u < ${(n * t) / KPL}u; u++) {`,
        `      let cc = ${part} + u * ${KPL}u; let ir = i0 + rg * ${t}u + ${row};`,
        '      if (ir < L) {',
        `        let nan = bad[${r}] || lr[${r}] == 0.0f;`,
        `        let val = select(Sc[(rg * ${t}u + ${row}) * ${SCS}u + cc] / lr[${r}], kiln_nan(), nan);`,
        `        ${storeStmt(x, 'b0', `oo + ir * kmeta[13] + (${v0 * t}u + cc) * kmeta[14]`, 'val')}`,
        '      }',
        '    }',
      );
    }
  }
  L.push('  }', '}', ...D.helpers());
  return L.join('\n');
}
