/**
 * WGSL of the webgpu llm.pagedAttention (llm-paged.ts runs it): one query token per sequence over
 * its cached keys, read through the block table, in the style of the flash decode kernel
 * (flash-attention-source.ts): an online softmax over blocks of 64 keys, the keys split across
 * workgroups, the splits merged by a combine pass (flash-decoding). Every value is computed in f32
 * (16-bit storage is loaded into f32 and rounded once when stored).
 *
 * - `split`: one workgroup of 64 per (sequence, kv head, head group, key split); a sequence's
 *   keys are spread over the splits by its length (ceil(len / splits) rounded up to 64-key blocks),
 *   so a short context is split as finely as a long one. A head group is HG
 *   of the G = Hq / Hkv query heads that share the kv head (grouped-query attention), so each key
 *   and value row is read once for HG heads. Their scaled queries sit in workgroup memory;
 *   invocation t scores key j0 + t of each block of 64 for every head of the group (one read of the
 *   key row), resolving the key's cache row through the block table (the row's base goes to
 *   workgroup memory for the value pass); the block's probabilities go through workgroup memory, and
 *   invocation t accumulates value dims t, t + 64, ... of every head. With one split it writes the
 *   output; with several, each split's (max, sum, NaN flag, accumulator[D]) per head goes to a
 *   float32 scratch that `combine` merges.
 * - `combine`: one invocation per (sequence, head, dim).
 * - `fused` (pagedFusedSource, KILN_WEBGPU_PAGED_FUSED): the split kernel and the combine in one
 *   dispatch where the splits fit one workgroup: S = splits sub-splits of 64 invocations per work
 *   item (sequence, kv head, head group), each walking the keys of split `sp` as the split kernel
 *   does (same 64-key blocks, same arithmetic; the block loop runs ceil(splitLen / 64) times for
 *   every sub-split so the barriers stay uniform, a sub-split past its keys doing nothing), their
 *   partials in workgroup memory instead of the float32 scratch, then the combine's merge over the
 *   used splits in split order, behind a workgroupBarrier (no cross-workgroup ordering involved).
 *   The queries are loaded once per item and shared by the sub-splits.
 * - `fused` with the q/k norm + rotary and the cache write (pagedFusedSource's `qk`,
 *   llm.qkNormRotaryPagedAttention, KILN_WEBGPU_QK_ATTN): in place of loading rotated queries the
 *   work item's workgroup computes them from the raw q|k|v GEMV output, as llm.qkNormRotaryCache's
 *   kernel (llm-rotary.ts, register form) does, with the same roundings: its HG query heads and its
 *   kv head's new key row (row r on sub-split r, S at a time), each row's sum of squares over the
 *   same pairs reduced in the same order (subgroupAdd over the row's 64 lanes and the subgroups'
 *   partials in order where the rotary kernel takes subgroups, else the same workgroup-memory
 *   tree), n = round(x * rsqrt(mean(x^2) + eps) * w), rotated; the queries rounded to the dtype
 *   (as the stored q' the attention loaded) then scaled into qs, the key row into workgroup memory
 *   (pw, free until the merge). Then the key row (rounded at the store, as the rotary kernel stores
 *   it) and the value row go into the cache at the token's slot (none where the slot is negative
 *   or past the capacity), and storageBarrier() makes them visible to the workgroup's own key and
 *   value passes. Sound because the item's workgroup is the only reader of its kv head's cache
 *   rows of its sequence in this dispatch, and (the host launches it for one sequence only) no
 *   other row of the step reads the slot: with several rows, one may attend to a slot another
 *   writes (a prompt fed as decode rows), which only the two ops order. Where several head groups share a kv head (groups > 1)
 *   each of their workgroups writes the same bits to the same slot: a benign race (equal values,
 *   and no workgroup reads the slot before its own write and barrier). The caches are read_write
 *   bindings here (packed 16-bit kinds read with atomicLoad in the scalar passes; the vector key
 *   pass's 16-byte words are written whole, packed from the rounded bits).
 *
 * Semantics of the CPU kernel: tokens t < contextLens[b] (clamped to the table's capacity: a WGSL
 * kernel cannot raise); a row with no token is zeros; a NaN score makes the row NaN. A block id
 * outside the cache skips its token (the cpu and cuda kernels raise). Exponentials are the math
 * library's kiln_exp (WGSL's exp is loose).
 *
 * Metadata (u32 words): [B, H, hkv, blockSize, maxBlocks, qRow, qHead, qOff, tableRow, tableOff,
 * lenOff, lenStride, scale bits, numBlocks, kcOff, vcOff, splits, splitLen (the most keys a split
 * takes at full capacity; informational), headGroups, outOff].
 */
import type { DType } from '../../tensor/dtype.js';
import type { StorageKind } from './storage.js';
import { loadExpr, storeStmt } from './storage.js';
import { type Bind, header, indexBind, indexLoad } from './template.js';

/** Invocations per workgroup, and keys per block. */
export const PAGED_WG = 64;
/** Metadata words. */
export const PAGED_META_WORDS = 20;

/**
 * The fused kernel's q/k norm + rotary prologue (llm.qkNormRotaryPagedAttention): the rotary form
 * and where its operands are bound. Bindings b0..b5 are the attention's (b1 the raw q, b2 / b3 the
 * caches, written); `x` maps each further role to its binding (k and v may share q's b1, as slices
 * of one qkv output), `binds` is the count of bindings, `slotBind` the slot mapping's.
 */
export interface PagedQk {
  readonly isNeox: boolean;
  readonly slots: DType;
  /** The norm's sum through subgroupAdd (64-lane rows of subgroups of at most 64), else the workgroup-memory tree. */
  readonly subgroups: boolean;
  readonly bindK: number;
  readonly bindV: number;
  readonly bindQw: number;
  readonly bindKw: number;
  readonly bindCos: number;
  readonly bindSin: number;
  readonly bindSlots: number;
  /** Bindings in all (b0.. b(binds - 1)); those past 5 but the slots' are data of kind x, read only. */
  readonly binds: number;
}

/** Metadata words of the prologue, after PAGED_META_WORDS: k (off, row, head), v (off, row, head), qw and kw (off, stride), cos and sin (off, row, last), slots (off, stride), eps bits. */
export const PAGED_QK_META_WORDS = 19;

export interface PagedKinds {
  /** Storage of query, caches and output. */
  readonly x: StorageKind;
  readonly table: DType;
  readonly lens: DType;
  /** Head dim. */
  readonly d: number;
  /** Query heads per workgroup (a divisor of Hq / Hkv). */
  readonly hg: number;
  /**
   * Key rows read as 16-byte words (vec4<u32>: 8 16-bit or 4 f32 elements), a 128-dim float16 row
   * in 16 loads instead of 128: the head dim and the key cache's offset are multiples of a word's
   * elements and its buffer whole words (llm-paged.ts decides).
   */
  readonly vecK?: boolean;
  /**
   * Value rows read as 16-byte words too (same conditions on the value cache), the value pass
   * split over keys as well as dims (pagedVecV): LN = D / V lanes of V dims, 64 / LN key groups.
   */
  readonly vecV?: boolean;
  /**
   * Issue the loads of several key words (key pass) and of several keys' value elements (the scalar
   * value pass) before using any (KILN_WEBGPU_PAGED_UNROLL): the loops' every step waited on its own
   * load, a chain of 16 + 64 load latencies per 64-key block for 128-dim float16. Same products
   * accumulated in the same order.
   */
  readonly unroll?: boolean;
}

/** Whether the vector value pass applies: a row is whole words and its lanes divide the workgroup. */
export function pagedVecV(x: StorageKind, d: number): boolean {
  const v = pagedVecElems(x);
  return v > 0 && d % v === 0 && PAGED_WG % (d / v) === 0;
}

/** Elements of storage kind `x` in a 16-byte word (the vector key loads), or 0 where none. */
export function pagedVecElems(x: StorageKind): number {
  return x === 'f32' ? 4 : x === 'f16' || x === 'f16p' || x === 'bf16p' ? 8 : 0;
}

/** WGSL turning a 16-byte word into f32 lanes: kiln_kw0 (and kiln_kw1 for 16-bit kinds, the high half). */
export function keyWordHelpers(x: StorageKind): string[] {
  if (x === 'f32') return ['fn kiln_kw0(w: vec4<u32>) -> vec4<f32> { return bitcast<vec4<f32>>(w); }'];
  if (x === 'bf16p') {
    return [
      'fn kiln_kbf2(u: u32) -> vec2<f32> { return vec2<f32>(bitcast<f32>(u << 16u), bitcast<f32>(u & 0xffff0000u)); }',
      'fn kiln_kw0(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(kiln_kbf2(w.x), kiln_kbf2(w.y)); }',
      'fn kiln_kw1(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(kiln_kbf2(w.z), kiln_kbf2(w.w)); }',
    ];
  }
  return [
    'fn kiln_kw0(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)); }',
    'fn kiln_kw1(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)); }',
  ];
}

export const NEG_MAX = '-3.4028234663852886e38f';
export const indent = (s: string, n: number): string => s.replace(/\n/g, `\n${' '.repeat(n)}`);

/**
 * WGSL: the keys a split of a sequence takes (needs `len` and `splits`): ceil(len / splits) rounded
 * up to whole 64-key blocks. The split kernel and the combine pass must agree on it.
 */
const SPLIT_LEN_EXPR = `max(${PAGED_WG}u, (((len + splits - 1u) / splits + ${PAGED_WG - 1}u) / ${PAGED_WG}u) * ${PAGED_WG}u)`;

/** Key words whose loads a key-pass step issues together (unrolled): the most of 8, 4, 2, 1 that divides the row's D / V words. */
function keyStep(d: number, V: number, unroll: boolean): number {
  if (!unroll) return 1;
  for (const u of [8, 4, 2]) if ((d / V) % u === 0) return u;
  return 1;
}

/**
 * The vector key pass (key row at word offset kr / V, scores into s[h]): U words loaded, then
 * their dot products added in word order (so the sums are those of one word per step).
 */
function keyPassVec(d: number, V: number, unroll: boolean, pad: string): string[] {
  const U = keyStep(d, V, unroll);
  const dots = (w: number): string =>
    `for (var h = 0u; h < HG; h++) { let qb = h * D + e + ${w * V}u; s[h] += dot(vec4<f32>(qs[qb], qs[qb + 1u], qs[qb + 2u], qs[qb + 3u]), k${w}_0)${V === 8 ? ` + dot(vec4<f32>(qs[qb + 4u], qs[qb + 5u], qs[qb + 6u], qs[qb + 7u]), k${w}_1)` : ''}; }`;
  return [
    `for (var e = 0u; e < D; e = e + ${U * V}u) {`,
    ...Array.from({ length: U }, (_, w) => `  let kw${w} = b2[(kr + e) / ${V}u + ${w}u];`),
    ...Array.from({ length: U }, (_, w) => [`  let k${w}_0 = kiln_kw0(kw${w});`, ...(V === 8 ? [`  let k${w}_1 = kiln_kw1(kw${w});`] : [])]).flat(),
    ...Array.from({ length: U }, (_, w) => `  ${dots(w)}`),
    '}',
  ].map((l) => pad + l);
}

/** Keys per step of the scalar value pass (unrolled). */
const VALUE_STEP = 8;

/** Value dims each invocation accumulates per head. */
export const pagedPerThread = (d: number): number => Math.max(1, Math.ceil(d / PAGED_WG));

/** The split kernels' bindings: the output (float32 scratch with `partial`), q, k and v caches, table, lengths. */
export function splitHeader(k: PagedKinds, partial: boolean, qk?: PagedQk): string[] {
  const { x } = k;
  const extra: Bind[] = qk ? Array.from({ length: qk.binds - 6 }, (_, i) => (i + 6 === qk.bindSlots ? { kind: indexBind(qk.slots), written: false } : { kind: x, written: false })) : [];
  return header(
    [
      { kind: partial ? 'f32' : x, written: true },
      { kind: x, written: false },
      { kind: x, written: qk !== undefined },
      { kind: x, written: qk !== undefined },
      { kind: indexBind(k.table), written: false },
      { kind: indexBind(k.lens), written: false },
      ...extra,
    ],
    qk ? { f16: x === 'f16' || x === 'f16p', bf16: x === 'bf16p' } : {},
  );
}

/** The split kernels' constants, workgroup arrays, entry point and metadata reads (both forms share them); `fused` > 0: the fused kernel's, with that many sub-splits. */
function splitDeclarations(k: PagedKinds, fused = 0, qk?: PagedQk): string[] {
  const { d, hg } = k;
  const W = PAGED_WG;
  if (fused > 0) {
    const S = fused;
    const sg = qk?.subgroups === true ? ', @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) sgi: u32, @builtin(subgroup_size) sgsz: u32' : '';
    return [
      `const D = ${d}u;`,
      `const HG = ${hg}u;`,
      `var<workgroup> qs: array<f32, ${hg * d}>;`,
      `var<workgroup> ps: array<f32, ${S * hg * W}>;`,
      `var<workgroup> fl: array<u32, ${S * hg * W}>;`,
      `var<workgroup> kb: array<u32, ${S * W}>;`,
      `var<workgroup> pw: array<f32, ${S * hg * (d + 3)}>;`,
      `@compute @workgroup_size(${S * W})`,
      `fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32, @builtin(num_workgroups) ng: vec3u${sg}) {`,
      '  let B = kmeta[0]; let H = kmeta[1]; let hkv = kmeta[2]; let bs = kmeta[3]; let maxBlocks = kmeta[4];',
      '  let scale = bitcast<f32>(kmeta[12]); let numBlocks = kmeta[13];',
      '  let splits = kmeta[16]; let groups = kmeta[18];',
      '  let total = B * hkv * groups;',
      // Invocation li is lane lid of sub-split sp; po and ko: the sub-split's part of ps / fl and of kb.
      `  let lid = li % ${W}u; let sp = li / ${W}u; let po = sp * HG * ${W}u; let ko = sp * ${W}u;`,
    ];
  }
  return [
    `const D = ${d}u;`,
    `const HG = ${hg}u;`,
    `var<workgroup> qs: array<f32, ${hg * d}>;`,
    `var<workgroup> ps: array<f32, ${hg * W}>;`,
    `var<workgroup> fl: array<u32, ${hg * W}>;`,
    `var<workgroup> kb: array<u32, ${W}>;`,
    `@compute @workgroup_size(${W})`,
    'fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) ng: vec3u) {',
    '  let B = kmeta[0]; let H = kmeta[1]; let hkv = kmeta[2]; let bs = kmeta[3]; let maxBlocks = kmeta[4];',
    '  let scale = bitcast<f32>(kmeta[12]); let numBlocks = kmeta[13];',
    '  let splits = kmeta[16]; let groups = kmeta[18];',
    '  let total = B * hkv * groups * splits;',
  ];
}

/** Bytes of workgroup memory of the fused kernel with `splits` sub-splits (qs, ps, fl, kb, pw). */
export function pagedFusedWorkgroupBytes(splits: number, hg: number, d: number): number {
  return 4 * (hg * d + 2 * splits * hg * PAGED_WG + splits * PAGED_WG + splits * hg * (d + 3));
}

/** Opens the loop over work items (sequence, kv head, head group, split): the row's length and table row, the scaled queries in workgroup memory. */
function splitItemStart(k: PagedKinds, fused = 0, qk?: PagedQk): string[] {
  const W = PAGED_WG;
  const start = [
    '  for (var t = wid.x; t < total; t = t + ng.x) {',
    fused > 0
      ? '    let r1 = t; let gi = r1 % groups; let r2 = r1 / groups; let kvh = r2 % hkv; let b = r2 / hkv;'
      : '    let sp = t % splits; let r1 = t / splits; let gi = r1 % groups; let r2 = r1 / groups; let kvh = r2 % hkv; let b = r2 / hkv;',
    '    let h0 = kvh * (H / hkv) + gi * HG;',
    `    let len = u32(clamp(${indexLoad(k.lens, 'b5', 'kmeta[10] + b * kmeta[11]')}, 0i, i32(maxBlocks * bs)));`,
    '    let trow = kmeta[9] + b * kmeta[8];',
    '    workgroupBarrier();',
  ];
  if (qk) return [...start, ...qkPrologue(k, fused, qk)];
  return [
    ...start,
    fused > 0 ? `    for (var z = li; z < HG * D; z = z + ${fused * W}u) {` : `    for (var z = lid; z < HG * D; z = z + ${W}u) {`,
    `      qs[z] = ${loadExpr(k.x, 'b1', 'kmeta[7] + b * kmeta[5] + (h0 + z / D) * kmeta[6] + z % D', false)} * scale;`,
    '    }',
    '    workgroupBarrier();',
  ];
}

/** A value rounded to storage kind `x` and read back (what a store then a load of it gives), as llm-rotary.ts rounds. */
function roundTo(x: StorageKind, e: string): string {
  return x === 'f32' ? e : x === 'bf16p' ? `bitcast<f32>(kiln_bf16_bits(${e}) << 16u)` : `kiln_f16_value(kiln_f16_bits(${e}))`;
}

/** The bits storage kind `x` stores for value `e` (storage.ts's conversion), for whole-word stores. */
function rawBits(x: StorageKind, e: string): string {
  return x === 'f32' ? `bitcast<u32>(${e})` : x === 'bf16p' ? `kiln_bf16_bits(${e})` : `kiln_f16_bits(${e})`;
}

/**
 * The prologue of the fused kernel with `qk` (see the header): the work item's HG query rows and
 * its kv head's key row normalised and rotated as llm-rotary.ts's register form does them (lane
 * lid of sub-split sp takes pairs j = lid + 64u of row rb + sp), the queries into qs, the key row
 * into pw; then the key and value rows into the cache slot, and the barriers that make them
 * visible to the workgroup. Metadata words from PAGED_META_WORDS (PAGED_QK_META_WORDS).
 */
export function qkPrologue(k: PagedKinds, S: number, qk: PagedQk, valueWords = false): string[] {
  const { x, d } = k;
  const W = PAGED_WG;
  const M = PAGED_META_WORDS;
  const P = Math.ceil(d / 2 / W);
  const half = d / 2;
  const ld = (bnd: number, i: string): string => loadExpr(x, `b${bnd}`, i, false);
  // q's operand or k's: one load where they share a binding, else a branch (never select(), which would read the other binding at this index).
  const pick = (bq: number, bk: number, i: string): string => (bq === bk ? ld(bq, i) : `kiln_qk_pick${bq}_${bk}(isQ, ${i})`);
  const wq = (i: string): string => pick(qk.bindQw, qk.bindKw, `select(kmeta[${M + 8}], kmeta[${M + 6}], isQ) + (${i}) * select(kmeta[${M + 9}], kmeta[${M + 7}], isQ)`);
  const lines: string[] = [
    `    let qeps = bitcast<f32>(kmeta[${M + 18}]);`,
    `    let cs0 = ${indexLoad(qk.slots, `b${qk.bindSlots}`, `kmeta[${M + 16}] + b * kmeta[${M + 17}]`)};`,
    '    let cs = select(-1i, cs0, cs0 >= 0i && u32(cs0) < numBlocks * bs);',
    `    let co = kmeta[${M + 10}] + b * kmeta[${M + 11}]; let so = kmeta[${M + 13}] + b * kmeta[${M + 14}];`,
    `    for (var rb = 0u; rb <= HG; rb = rb + ${S}u) {`,
    '      let rr = rb + sp; let live = rr <= HG; let isQ = rr < HG;',
    `      let xo = select(kmeta[${M}] + b * kmeta[${M + 1}] + kvh * kmeta[${M + 2}], kmeta[7] + b * kmeta[5] + (h0 + min(rr, HG - 1u)) * kmeta[6], isQ);`,
  ];
  for (let u = 0; u < P; u++) {
    lines.push(
      `      let jv${u} = lid + ${u * W}u; let j${u} = min(jv${u}, ${half - 1}u);`,
      `      let p1_${u} = ${qk.isNeox ? `j${u}` : `2u * j${u}`}; let p2_${u} = ${qk.isNeox ? `j${u} + ${half}u` : `2u * j${u} + 1u`};`,
      `      let xa${u} = ${pick(1, qk.bindK, `xo + p1_${u}`)}; let xb${u} = ${pick(1, qk.bindK, `xo + p2_${u}`)};`,
      `      let w1_${u} = ${wq(`p1_${u}`)}; let w2_${u} = ${wq(`p2_${u}`)};`,
      `      let c1_${u} = ${ld(qk.bindCos, `co + p1_${u} * kmeta[${M + 12}]`)}; let s1_${u} = ${ld(qk.bindSin, `so + p1_${u} * kmeta[${M + 15}]`)};`,
      `      let c2_${u} = ${ld(qk.bindCos, `co + p2_${u} * kmeta[${M + 12}]`)}; let s2_${u} = ${ld(qk.bindSin, `so + p2_${u} * kmeta[${M + 15}]`)};`,
    );
  }
  lines.push('      var acc = 0.0;');
  for (let u = 0; u < P; u++) lines.push(`      acc = acc + select(0.0, xa${u} * xa${u} + xb${u} * xb${u}, jv${u} < ${half}u);`);
  if (qk.subgroups) {
    // The rotary kernel's order: subgroupAdd, then the row's subgroup partials in order (its 64 lanes are 64 / sgsz whole subgroups).
    lines.push(
      '      let sgs = subgroupAdd(acc);',
      '      if (sgi == 0u) { ps[sid] = sgs; }',
      '      workgroupBarrier();',
      `      let nsr = ${W}u / sgsz;`,
      '      var tot = ps[sp * nsr];',
      '      for (var q = 1u; q < nsr; q = q + 1u) { tot = tot + ps[sp * nsr + q]; }',
      '      let nsc = kiln_rsqrt(tot / f32(D) + qeps);',
      '      workgroupBarrier();',
    );
  } else {
    lines.push(
      '      ps[li] = acc;',
      '      workgroupBarrier();',
      `      for (var st = ${W / 2}u; st > 0u; st = st >> 1u) {`,
      `        if (lid < st) { ps[sp * ${W}u + lid] = ps[sp * ${W}u + lid] + ps[sp * ${W}u + lid + st]; }`,
      '        workgroupBarrier();',
      '      }',
      `      let nsc = kiln_rsqrt(ps[sp * ${W}u] / f32(D) + qeps);`,
      '      workgroupBarrier();',
    );
  }
  for (let u = 0; u < P; u++) {
    lines.push(
      `      if (live && jv${u} < ${half}u) {`,
      `        let n1v = ${roundTo(x, `xa${u} * nsc * w1_${u}`)}; let n2v = ${roundTo(x, `xb${u} * nsc * w2_${u}`)};`,
      `        let o1 = n1v * c1_${u} - n2v * s1_${u}; let o2 = n2v * c2_${u} + n1v * s2_${u};`,
      `        if (isQ) { qs[rr * D + p1_${u}] = ${roundTo(x, 'o1')} * scale; qs[rr * D + p2_${u}] = ${roundTo(x, 'o2')} * scale; } else { pw[p1_${u}] = o1; pw[p2_${u}] = o2; }`,
      '      }',
    );
  }
  lines.push('    }', '    workgroupBarrier();');
  // The key row (from pw) and the value row into the slot.
  const V = pagedVecElems(x);
  const vec = k.vecK === true && V > 0 && d % V === 0;
  const kAt = '(u32(cs) * hkv + kvh) * D';
  lines.push('    if (cs >= 0i) {');
  if (vec) {
    const lanes = (w: string): string =>
      V === 4
        ? `vec4<u32>(${[0, 1, 2, 3].map((i) => rawBits(x, `pw[${w} * 4u + ${i}u]`)).join(', ')})`
        : `vec4<u32>(${[0, 1, 2, 3].map((i) => `${rawBits(x, `pw[${w} * 8u + ${2 * i}u]`)} | (${rawBits(x, `pw[${w} * 8u + ${2 * i + 1}u]`)} << 16u)`).join(', ')})`;
    lines.push(`      for (var w = li; w < D / ${V}u; w = w + ${S * W}u) { b2[(kmeta[14] + ${kAt}) / ${V}u + w] = ${lanes('w')}; }`);
  } else {
    lines.push(`      for (var e = li; e < D; e = e + ${S * W}u) { ${indent(storeStmt(x, 'b2', `kmeta[14] + ${kAt} + e`, 'pw[e]'), 8)} }`);
  }
  const vAt = (e: string): string => `kmeta[${M + 3}] + b * kmeta[${M + 4}] + kvh * kmeta[${M + 5}] + ${e}`;
  if (valueWords && vec) {
    // The value cache bound as 16-byte words (paged-attention-lanes.ts): the row stored whole words, packed from its loaded values (exact: a 16-bit value is exact in f32).
    const vl = (w: string, i: number): string => rawBits(x, ld(qk.bindV, vAt(`${w} * ${V}u + ${i}u`)));
    const word = V === 4 ? `vec4<u32>(${[0, 1, 2, 3].map((i) => vl('w', i)).join(', ')})` : `vec4<u32>(${[0, 1, 2, 3].map((i) => `${vl('w', 2 * i)} | (${vl('w', 2 * i + 1)} << 16u)`).join(', ')})`;
    lines.push(`      for (var w = li; w < D / ${V}u; w = w + ${S * W}u) { b3[(kmeta[15] + ${kAt}) / ${V}u + w] = ${word}; }`);
  } else {
    lines.push(`      for (var e = li; e < D; e = e + ${S * W}u) { ${indent(storeStmt(x, 'b3', `kmeta[15] + ${kAt} + e`, ld(qk.bindV, vAt('e'))), 8)} }`);
  }
  lines.push(
    '    }',
    // WGSL (Synchronization Built-in Functions): "storageBarrier() executes a control barrier
    // synchronization function that affects memory and atomic operations in the storage address
    // space" -- all invocations of the workgroup reach it, and with its Acquire/Release semantics
    // the storage writes of the workgroup before it are visible to the workgroup's invocations after
    // it. Only within the workgroup: no other workgroup reads these rows (see the header).
    '    storageBarrier();',
    '    workgroupBarrier();',
  );
  return lines;
}

/** The prologue's branch helpers (pick of a q operand or a k operand in different bindings). */
export function qkHelpers(x: StorageKind, qk: PagedQk): string[] {
  const pairs = new Set<string>();
  const out: string[] = [];
  for (const [bq, bk] of [[1, qk.bindK], [qk.bindQw, qk.bindKw]] as const) {
    if (bq === bk || pairs.has(`${bq}_${bk}`)) continue;
    pairs.add(`${bq}_${bk}`);
    out.push(`fn kiln_qk_pick${bq}_${bk}(isQ: bool, i: u32) -> f32 { if (isQ) { return ${loadExpr(x, `b${bq}`, 'i', false)}; } return ${loadExpr(x, `b${bk}`, 'i', false)}; }`);
  }
  return out;
}

/**
 * Opens the loop over the split's 64-key blocks and resolves invocation lid's key row through the
 * block table, up to `kr` (the key row's offset), where the key pass follows. The row's keys spread
 * over every split whatever its length (a short context too): splits of whole 64-key blocks,
 * ceil(len / splits) rounded up; splits past the last key take none.
 */
function keyBlockStart(k: PagedKinds, fused = 0): string[] {
  return [
    `    let sl = ${SPLIT_LEN_EXPR};`,
    '    let js = sp * sl; let je = min(len, js + sl);',
    // Fused: every sub-split runs the loop sl / 64 times (uniform, for the barriers), a block past its keys scoring none.
    ...(fused > 0 ? [`    for (var ib = 0u; ib < sl / ${PAGED_WG}u; ib++) {`, `      let j0 = js + ib * ${PAGED_WG}u;`] : [`    for (var j0 = js; j0 < je; j0 = j0 + ${PAGED_WG}u) {`]),
    '      let j = j0 + lid;',
    ...keyRowStart(k, 'je', 'kmeta[14] + base'),
  ];
}

/**
 * Key j's row (j below `end`): its block through the table (a block id outside the cache skips the
 * key), its row's base into `base`, zeroed scores s[HG], then `let kr = <kr>` inside two open ifs
 * (keyBlockEnd closes them). Shared by the split kernels and the lanes form.
 */
export function keyRowStart(k: PagedKinds, end: string, kr: string): string[] {
  return [
    `      var ok = j < ${end};`,
    '      var base = 0u;',
    '      var s: array<f32, HG>;',
    '      for (var h = 0u; h < HG; h++) { s[h] = 0.0f; }',
    '      if (ok) {',
    `        let blk = ${indexLoad(k.table, 'b4', 'trow + j / bs')};`,
    '        ok = blk >= 0i && u32(blk) < numBlocks;',
    '        if (ok) {',
    '          base = ((u32(blk) * bs + j % bs) * hkv + kvh) * D;',
    `          let kr = ${kr};`,
  ];
}

/** Closes the key pass: the row's base goes to workgroup memory for the value pass (`ko`: the fused kernel's sub-split offset). */
function keyBlockEnd(ko = ''): string[] {
  return ['        }', '      }', `      kb[${ko}lid] = base;`];
}

/** The split kernel; with `partial`, binding 0 is the float32 scratch, else the output. */
export function pagedSplitSource(k: PagedKinds, partial: boolean): string {
  return scalarSplitSource(k, partial, 0);
}

/**
 * The split kernel and the combine in one dispatch (see the header: `fused`), for the scalar value
 * pass (not kinds.vecV): `splits` sub-splits of 64 invocations in one workgroup per work item, binding
 * 0 the output. The host launches it only where splits x 64 invocations and
 * pagedFusedWorkgroupBytes fit the device, and sets metadata word 16 (splits) to `splits`.
 */
export function pagedFusedSource(k: PagedKinds, splits: number, qk?: PagedQk): string {
  if (!(splits >= 1) || k.vecV === true) throw new Error(`pagedFusedSource: needs splits >= 1 and the scalar value pass, got splits ${splits}, vecV ${k.vecV}`);
  // The prologue's scratch: a row's partial sums in ps (S x 64), the key row in pw (D), which needs S >= 2.
  if (qk && splits < 2) throw new Error(`pagedFusedSource: the q/k prologue needs splits >= 2, got ${splits}`);
  return scalarSplitSource(k, false, splits, qk);
}

/** The scalar split kernel: `fused` 0 the split kernel (partial or not), else the fused kernel with that many sub-splits. */
function scalarSplitSource(k: PagedKinds, partial: boolean, fused: number, qk?: PagedQk): string {
  const { x, d, hg } = k;
  const R = pagedPerThread(d);
  const W = PAGED_WG;
  // The fused kernel's sub-split offsets into ps / fl (po) and kb (ko); empty in the split kernel (its text unchanged).
  const P = fused > 0 ? 'po + ' : '';
  const KO = fused > 0 ? 'ko + ' : '';
  // With the prologue the caches are written: packed kinds load through atomicLoad.
  const cw = qk !== undefined;
  const lines = splitHeader(k, partial, qk);
  if (qk?.subgroups === true) lines.unshift('enable subgroups;');
  const V = pagedVecElems(x);
  const vec = k.vecK === true && V > 0 && d % V === 0;
  if (vec) {
    // The key cache as 16-byte words (its other loads are the value cache's, through b3).
    const at = lines.findIndex((l) => l.startsWith('@group(0) @binding(2)'));
    lines[at] = `@group(0) @binding(2) var<storage, ${cw ? 'read_write' : 'read'}> b2: array<vec4<u32>>;`;
    lines.push(...keyWordHelpers(x));
  }
  if (qk) lines.push(...qkHelpers(x, qk));
  lines.push(
    ...splitDeclarations(k, fused, qk),
    ...splitItemStart(k, fused, qk),
    `    var acc: array<f32, ${hg * R}>;`,
    `    for (var r = 0u; r < ${hg * R}u; r++) { acc[r] = 0.0f; }`,
    '    var m: array<f32, HG>; var l: array<f32, HG>; var started: array<bool, HG>; var bad: array<bool, HG>;',
    `    for (var h = 0u; h < HG; h++) { m[h] = ${NEG_MAX}; l[h] = 0.0f; started[h] = false; bad[h] = false; }`,
    ...keyBlockStart(k, fused),
    ...(vec
      ? keyPassVec(d, V, k.unroll === true, '          ')
      : [
          '          for (var e = 0u; e < D; e++) {',
          `            let kv = ${loadExpr(x, 'b2', 'kr + e', cw)};`,
          '            for (var h = 0u; h < HG; h++) { s[h] += qs[h * D + e] * kv; }',
          '          }',
        ]),
    ...keyBlockEnd(KO),
    `      for (var h = 0u; h < HG; h++) { ps[${P}h * ${W}u + lid] = s[h]; fl[${P}h * ${W}u + lid] = select(0u, select(1u, 2u, kiln_isnan(s[h])), ok); }`,
    '      workgroupBarrier();',
    '      var m2: array<f32, HG>; var any: array<bool, HG>;',
    '      for (var h = 0u; h < HG; h++) {',
    `        var bm = ${NEG_MAX}; var a = false;`,
    `        for (var z = 0u; z < ${W}u; z++) {`,
    `          let f = fl[${P}h * ${W}u + z];`,
    '          if (f == 2u) { bad[h] = true; }',
    `          if (f == 1u) { a = true; bm = max(bm, ps[${P}h * ${W}u + z]); }`,
    '        }',
    '        m2[h] = max(m[h], bm); any[h] = a;',
    '      }',
    '      workgroupBarrier();',
    `      for (var h = 0u; h < HG; h++) { ps[${P}h * ${W}u + lid] = select(0.0f, kiln_exp(s[h] - m2[h]), ok && fl[${P}h * ${W}u + lid] == 1u); }`,
    '      workgroupBarrier();',
    '      for (var h = 0u; h < HG; h++) {',
    '        if (any[h]) {',
    '          let c = select(0.0f, kiln_exp(m[h] - m2[h]), started[h]);',
    '          l[h] = l[h] * c;',
    `          for (var r = 0u; r < ${R}u; r++) { acc[h * ${R}u + r] = acc[h * ${R}u + r] * c; }`,
    '          m[h] = m2[h]; started[h] = true;',
    '        }',
    '      }',
    // A fused sub-split's block past its keys (j0 >= je) takes none.
    fused > 0 ? `      let n = select(0u, min(${W}u, je - j0), j0 < je);` : `      let n = min(${W}u, je - j0);`,
    '      var z0 = 0u;',
    ...(k.unroll === true ? valueSteps(x, d, R, W, P, KO, cw) : []),
    '      for (var z = z0; z < n; z++) {',
    `        let vr = kmeta[15] + kb[${KO}z];`,
    `        for (var h = 0u; h < HG; h++) { l[h] += ps[${P}h * ${W}u + z]; }`,
    `        for (var r = 0u; r < ${R}u; r++) {`,
    `          let e = lid + r * ${W}u;`,
    '          if (e < D) {',
    `            let v = ${loadExpr(x, 'b3', 'vr + e', cw)};`,
    `            for (var h = 0u; h < HG; h++) { acc[h * ${R}u + r] += ps[${P}h * ${W}u + z] * v; }`,
    '          }',
    '        }',
    '      }',
    '      workgroupBarrier();',
    '    }',
  );
  if (fused > 0) lines.push(...fusedCombine(x, R, fused));
  else if (partial) {
    lines.push(
      '    for (var h = 0u; h < HG; h++) {',
      '      let pb = ((b * H + h0 + h) * splits + sp) * (D + 3u);',
      '      if (lid == 0u) { b0[pb] = m[h]; b0[pb + 1u] = l[h]; b0[pb + 2u] = select(0.0f, 1.0f, bad[h]); }',
      `      for (var r = 0u; r < ${R}u; r++) { let e = lid + r * ${W}u; if (e < D) { b0[pb + 3u + e] = acc[h * ${R}u + r]; } }`,
      '    }',
    );
  } else {
    lines.push(
      '    for (var h = 0u; h < HG; h++) {',
      `      for (var r = 0u; r < ${R}u; r++) {`,
      `        let e = lid + r * ${W}u;`,
      '        if (e < D) {',
      `          let o = select(select(0.0f, acc[h * ${R}u + r] / l[h], l[h] > 0.0f), kiln_nan(), bad[h]);`,
      `          ${indent(storeStmt(x, 'b0', 'kmeta[19] + (b * H + h0 + h) * D + e', 'o'), 10)}`,
      '        }',
      '      }',
      '    }',
    );
  }
  lines.push('  }', '}');
  return lines.join('\n');
}

/**
 * The fused kernel's end of a work item: each sub-split's (max, sum, NaN flag, accumulator[D]) per
 * head into workgroup memory (pw, laid out as the split kernel's scratch with S splits a row), a
 * barrier, then the combine pass's merge over the splits that hold keys, in split order, invocation
 * li taking (head, dim) li, li + S x 64, ...
 */
function fusedCombine(x: StorageKind, R: number, S: number): string[] {
  const W = PAGED_WG;
  return [
    '    for (var h = 0u; h < HG; h++) {',
    `      let pb = (h * ${S}u + sp) * (D + 3u);`,
    '      if (lid == 0u) { pw[pb] = m[h]; pw[pb + 1u] = l[h]; pw[pb + 2u] = select(0.0f, 1.0f, bad[h]); }',
    `      for (var r = 0u; r < ${R}u; r++) { let e = lid + r * ${W}u; if (e < D) { pw[pb + 3u + e] = acc[h * ${R}u + r]; } }`,
    '    }',
    '    workgroupBarrier();',
    '    let used = min(splits, (len + sl - 1u) / sl);',
    `    for (var z = li; z < HG * D; z = z + ${S * W}u) {`,
    '      let h = z / D; let e = z % D;',
    `      var cm = ${NEG_MAX}; var cbad = false;`,
    '      for (var c = 0u; c < used; c++) {',
    `        let pb = (h * ${S}u + c) * (D + 3u);`,
    '        if (pw[pb + 1u] > 0.0f) { cm = max(cm, pw[pb]); }',
    '        if (pw[pb + 2u] != 0.0f) { cbad = true; }',
    '      }',
    '      var cl = 0.0f; var ca = 0.0f;',
    '      for (var c = 0u; c < used; c++) {',
    `        let pb = (h * ${S}u + c) * (D + 3u);`,
    '        if (pw[pb + 1u] > 0.0f) { let f = kiln_exp(pw[pb] - cm); cl += pw[pb + 1u] * f; ca += pw[pb + 3u + e] * f; }',
    '      }',
    '      let o = select(select(0.0f, ca / cl, cl > 0.0f), kiln_nan(), cbad);',
    `      ${indent(storeStmt(x, 'b0', 'kmeta[19] + (b * H + h0 + h) * D + e', 'o'), 6)}`,
    '    }',
  ];
}

/**
 * The scalar value pass's unrolled steps (before its one-key loop, which takes the rest from z0):
 * VALUE_STEP keys per step, each dim's loads of all of them issued before the first product, then
 * the products and the probability sums added in key order (each accumulator's order unchanged).
 */
function valueSteps(x: StorageKind, d: number, R: number, W: number, P = '', KO = '', written = false): string[] {
  const U = VALUE_STEP;
  const keys = Array.from({ length: U }, (_, u) => u);
  return [
    `      for (; z0 + ${U}u <= n; z0 = z0 + ${U}u) {`,
    ...keys.map((u) => `        let vr${u} = kmeta[15] + kb[${KO}z0 + ${u}u];`),
    `        for (var r = 0u; r < ${R}u; r++) {`,
    `          let e = lid + r * ${W}u;`,
    '          if (e < D) {',
    ...keys.map((u) => `            let v${u} = ${loadExpr(x, 'b3', `vr${u} + e`, written)};`),
    `            for (var h = 0u; h < HG; h++) {`,
    ...keys.map((u) => `              acc[h * ${R}u + r] += ps[${P}h * ${W}u + z0 + ${u}u] * v${u};`),
    '            }',
    '          }',
    '        }',
    `        for (var h = 0u; h < HG; h++) {`,
    ...keys.map((u) => `          l[h] += ps[${P}h * ${W}u + z0 + ${u}u];`),
    '        }',
    '      }',
  ];
}

/**
 * The split kernel with vector value loads (kinds.vecK and kinds.vecV): the old value pass had each
 * invocation walk all 64 keys of a block for its dims, a serial chain of 64 dependent global loads
 * (latency-bound: ~70 us a layer on an H200 at a 300-token context). Here invocation (kg, lane)
 * reads dims lane*V.. of keys kg, kg + KG, ... as 16-byte words (KG = 64 / LN key groups, LN = D / V
 * lanes: 4 x 16 for 128-dim float16, 16 loads per block instead of 64 x 2); the key groups' partial
 * accumulators are summed once per split through workgroup memory (the queries' array, free then).
 * The block max and NaN/any flags are a tree reduction (6 barriers, not 64 x HG serial reads per
 * invocation), and each invocation keeps the sum of its own keys' probabilities, summed at the end.
 */
export function pagedSplitSourceV(k: PagedKinds, partial: boolean): string {
  const { x, d, hg } = k;
  const W = PAGED_WG;
  const V = pagedVecElems(x);
  const LN = d / V;
  const KG = W / LN;
  const NV = V / 4;
  /** Keys per value-pass step (independent loads in flight), at most the keys an invocation takes. */
  const U = Math.min(4, LN);
  const lines = splitHeader(k, partial);
  for (const bnd of [2, 3]) {
    const at = lines.findIndex((l) => l.startsWith(`@group(0) @binding(${bnd})`));
    lines[at] = `@group(0) @binding(${bnd}) var<storage, read> b${bnd}: array<vec4<u32>>;`;
  }
  lines.push(...keyWordHelpers(x));
  const words = (w: string, pre: string): string[] => [`let ${pre}0 = kiln_kw0(${w});`, ...(V === 8 ? [`let ${pre}1 = kiln_kw1(${w});`] : [])];
  lines.push(
    ...splitDeclarations(k),
    `  let lane = lid % ${LN}u; let kg = lid / ${LN}u;`,
    ...splitItemStart(k),
    `    var acc: array<vec4<f32>, ${hg * NV}>;`,
    `    for (var r = 0u; r < ${hg * NV}u; r++) { acc[r] = vec4<f32>(0.0f); }`,
    '    var m: array<f32, HG>; var lt: array<f32, HG>; var started: array<bool, HG>; var bad: array<bool, HG>;',
    `    for (var h = 0u; h < HG; h++) { m[h] = ${NEG_MAX}; lt[h] = 0.0f; started[h] = false; bad[h] = false; }`,
    ...keyBlockStart(k),
    ...keyPassVec(d, V, k.unroll === true, '          '),
    ...keyBlockEnd(),
    // Flags as bits: 1 a scored key, 2 a NaN score; the tree ORs them and takes the max of the scored.
    '      var f: array<u32, HG>;',
    `      for (var h = 0u; h < HG; h++) { f[h] = select(0u, select(1u, 2u, kiln_isnan(s[h])), ok); ps[h * ${W}u + lid] = select(${NEG_MAX}, s[h], f[h] == 1u); fl[h * ${W}u + lid] = f[h]; }`,
    '      workgroupBarrier();',
    `      for (var st = ${W / 2}u; st > 0u; st = st >> 1u) {`,
    `        if (lid < st) { for (var h = 0u; h < HG; h++) { let i = h * ${W}u + lid; ps[i] = max(ps[i], ps[i + st]); fl[i] = fl[i] | fl[i + st]; } }`,
    '        workgroupBarrier();',
    '      }',
    '      var m2: array<f32, HG>; var any: array<bool, HG>;',
    `      for (var h = 0u; h < HG; h++) { let fh = fl[h * ${W}u]; if ((fh & 2u) != 0u) { bad[h] = true; } any[h] = (fh & 1u) != 0u; m2[h] = max(m[h], ps[h * ${W}u]); }`,
    '      workgroupBarrier();',
    '      for (var h = 0u; h < HG; h++) {',
    '        let p = select(0.0f, kiln_exp(s[h] - m2[h]), f[h] == 1u);',
    `        ps[h * ${W}u + lid] = p;`,
    '        if (any[h]) {',
    '          let c = select(0.0f, kiln_exp(m[h] - m2[h]), started[h]);',
    '          lt[h] = lt[h] * c;',
    `          for (var r = 0u; r < ${NV}u; r++) { acc[h * ${NV}u + r] = acc[h * ${NV}u + r] * c; }`,
    '          m[h] = m2[h]; started[h] = true;',
    '        }',
    '        lt[h] += p;',
    '      }',
    '      workgroupBarrier();',
    `      let n = min(${W}u, je - j0);`,
    // U keys per step, their loads issued before any is used (a key past the block reads the
    // block's first row and adds nothing): a chain of ceil(n / (KG * U)) load latencies.
    `      for (var z = kg; z < n; z = z + ${KG * U}u) {`,
    ...Array.from({ length: U }, (_, u) => `        let z${u} = min(z + ${u * KG}u, ${W - 1}u); let in${u} = z + ${u * KG}u < n; let vw${u} = b3[(kmeta[15] + kb[select(0u, z${u}, in${u})]) / ${V}u + lane];`),
    ...Array.from({ length: U }, (_, u) => words(`vw${u}`, `v${u}_`).map((l) => `        ${l}`)).flat(),
    '        for (var h = 0u; h < HG; h++) {',
    ...Array.from({ length: U }, (_, u) => [
      `          let p${u} = ps[h * ${W}u + z${u}];`,
      `          acc[h * ${NV}u] += select(vec4<f32>(0.0f), p${u} * v${u}_0, in${u});`,
      ...(V === 8 ? [`          acc[h * ${NV}u + 1u] += select(vec4<f32>(0.0f), p${u} * v${u}_1, in${u});`] : []),
    ]).flat(),
    '        }',
    '      }',
    '      workgroupBarrier();',
    '    }',
    // The key groups' accumulators into group 0 (through qs: the queries are done), the
    // invocations' probability sums into ps[h * W].
    `    for (var g = 1u; g < ${KG}u; g++) {`,
    `      if (kg == g) { for (var h = 0u; h < HG; h++) { for (var r = 0u; r < ${NV}u; r++) { let a = acc[h * ${NV}u + r]; let o = h * D + lane * ${V}u + r * 4u; qs[o] = a.x; qs[o + 1u] = a.y; qs[o + 2u] = a.z; qs[o + 3u] = a.w; } } }`,
    '      workgroupBarrier();',
    `      if (kg == 0u) { for (var h = 0u; h < HG; h++) { for (var r = 0u; r < ${NV}u; r++) { let o = h * D + lane * ${V}u + r * 4u; acc[h * ${NV}u + r] += vec4<f32>(qs[o], qs[o + 1u], qs[o + 2u], qs[o + 3u]); } } }`,
    '      workgroupBarrier();',
    '    }',
    `    for (var h = 0u; h < HG; h++) { ps[h * ${W}u + lid] = lt[h]; }`,
    '    workgroupBarrier();',
    `    for (var st = ${W / 2}u; st > 0u; st = st >> 1u) {`,
    `      if (lid < st) { for (var h = 0u; h < HG; h++) { let i = h * ${W}u + lid; ps[i] = ps[i] + ps[i + st]; } }`,
    '      workgroupBarrier();',
    '    }',
    '    var l: array<f32, HG>;',
    `    for (var h = 0u; h < HG; h++) { l[h] = ps[h * ${W}u]; }`,
  );
  if (partial) {
    lines.push(
      '    for (var h = 0u; h < HG; h++) {',
      '      let pb = ((b * H + h0 + h) * splits + sp) * (D + 3u);',
      '      if (lid == 0u) { b0[pb] = m[h]; b0[pb + 1u] = l[h]; b0[pb + 2u] = select(0.0f, 1.0f, bad[h]); }',
      `      if (kg == 0u) { for (var r = 0u; r < ${NV}u; r++) { let a = acc[h * ${NV}u + r]; let o = pb + 3u + lane * ${V}u + r * 4u; b0[o] = a.x; b0[o + 1u] = a.y; b0[o + 2u] = a.z; b0[o + 3u] = a.w; } }`,
      '    }',
    );
  } else {
    lines.push(
      '    if (kg == 0u) {',
      '      for (var h = 0u; h < HG; h++) {',
      `        for (var i = 0u; i < ${V}u; i++) {`,
      `          let e = lane * ${V}u + i;`,
      `          let av = acc[h * ${NV}u + i / 4u][i % 4u];`,
      '          let o = select(select(0.0f, av / l[h], l[h] > 0.0f), kiln_nan(), bad[h]);',
      `          ${indent(storeStmt(x, 'b0', 'kmeta[19] + (b * H + h0 + h) * D + e', 'o'), 10)}`,
      '        }',
      '      }',
      '    }',
    );
  }
  // The next work item's query load overwrites qs and ps: its leading barrier orders it after these reads.
  lines.push('  }', '}');
  return lines.join('\n');
}

/** Splits per unrolled combine step. */
const COMBINE_STEP = 4;

/**
 * The combine's unrolled steps over the splits (before its one-split loop, which takes the rest
 * from s0): COMBINE_STEP splits' words loaded, then folded in split order as the loop folds them
 * ('max': the largest max and the NaN flag; 'sum': the rescaled sums), so the result is the loop's.
 */
function combineSteps(kind: 'max' | 'sum'): string[] {
  const U = COMBINE_STEP;
  const us = Array.from({ length: U }, (_, u) => u);
  return [
    `    for (; s0 + ${U}u <= used; s0 = s0 + ${U}u) {`,
    ...us.map((u) => `      let pb${u} = (row * splits + s0 + ${u}u) * (D + 3u);`),
    ...us.map((u) => `      let m${u} = b1[pb${u}]; let l${u} = b1[pb${u} + 1u]; ${kind === 'max' ? `let f${u} = b1[pb${u} + 2u];` : `let a${u} = b1[pb${u} + 3u + e];`}`),
    ...us.map((u) =>
      kind === 'max'
        ? `      if (l${u} > 0.0f) { mx = max(mx, m${u}); } if (f${u} != 0.0f) { bad = true; }`
        : `      if (l${u} > 0.0f) { let c = kiln_exp(m${u} - mx); l += l${u} * c; a += a${u} * c; }`,
    ),
    '    }',
  ];
}

/**
 * Merges the splits' partial results: one invocation per (sequence, head, dim), over the splits
 * that hold keys of the sequence (ceil(len / sl), the rest are empty): a short context reads a few
 * partials, not all `splits`.
 */
export function pagedCombineSource(x: StorageKind, d: number, lens: DType, unroll = false): string {
  const lines = header([
    { kind: x, written: true },
    { kind: 'f32', written: false },
    { kind: indexBind(lens), written: false },
  ]);
  lines.push(
    `const D = ${d}u;`,
    `@compute @workgroup_size(${PAGED_WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let splits = kmeta[16]; let n = kmeta[0] * kmeta[1] * D;',
    `  for (var g = gid.x; g < n; g = g + ng.x * ${PAGED_WG}u) {`,
    '    let e = g % D; let row = g / D; let b = row / kmeta[1];',
    `    let len = u32(clamp(${indexLoad(lens, 'b2', 'kmeta[10] + b * kmeta[11]')}, 0i, i32(kmeta[4] * kmeta[3])));`,
    `    let sl = ${SPLIT_LEN_EXPR};`,
    '    let used = min(splits, (len + sl - 1u) / sl);',
    `    var mx = ${NEG_MAX}; var bad = false;`,
    '    var s0 = 0u;',
    ...(unroll ? combineSteps('max') : []),
    '    for (var sp = s0; sp < used; sp++) {',
    '      let pb = (row * splits + sp) * (D + 3u);',
    '      if (b1[pb + 1u] > 0.0f) { mx = max(mx, b1[pb]); }',
    '      if (b1[pb + 2u] != 0.0f) { bad = true; }',
    '    }',
    '    var l = 0.0f; var a = 0.0f;',
    '    s0 = 0u;',
    ...(unroll ? combineSteps('sum') : []),
    '    for (var sp = s0; sp < used; sp++) {',
    '      let pb = (row * splits + sp) * (D + 3u);',
    '      if (b1[pb + 1u] > 0.0f) { let c = kiln_exp(b1[pb] - mx); l += b1[pb + 1u] * c; a += b1[pb + 3u + e] * c; }',
    '    }',
    '    let o = select(select(0.0f, a / l, l > 0.0f), kiln_nan(), bad);',
    `    ${indent(storeStmt(x, 'b0', 'kmeta[19] + row * D + e', 'o'), 4)}`,
    '  }',
    '}',
  );
  return lines.join('\n');
}
