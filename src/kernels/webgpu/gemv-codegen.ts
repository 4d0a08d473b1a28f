/**
 * The WGSL source of Kiln's skinny GEMM on webgpu (a GEMV for a few rows): C [M, N] = alpha *
 * (A [M, K] @ B [K, N]) [+ bias] [+ beta * C] for M <= GEMV_MAX_M, with B read along K (linear's
 * weight W [N, K] read transposed: every output column is a contiguous row of W). This is the
 * shape of every projection of a decode step, where the tiled GEMMs fill a 64-row tile (tiled
 * kernel) or a 64-row tile of 16x16 matrices (subgroup matrix kernel) with one real row, and
 * N / 64 or N / 128 workgroups walk all of K one after another: a 1024-wide projection ran as 8 to
 * 16 workgroups on a 132-SM GPU, bound by latency, not by the bytes of the weight.
 *
 * Here a workgroup of 256 invocations computes 8 output columns (one team of 32 invocations per
 * column; GemvSpec.cols 4: 128 invocations, 4 columns) for MR rows (1, 2, 4 or 8; the grid's y covers M in steps of MR). A team reads its
 * column's weight row in 16-byte words (vec4<u32>: 8 16-bit or 4 f32 elements), lane-strided so a
 * team's 32 loads are 512 consecutive bytes, four words in flight per lane where K allows, and
 * takes each word's dot product with the same K range of each of its MR rows of A (read the same
 * way; A is small and stays in cache). Products accumulate in f32. The 256 x MR partial sums meet in
 * workgroup memory and 8 x MR invocations add their team's 32 partials and apply the epilogue,
 * storing through storage.ts (so a packed float16 output is written as the tiled kernel writes it).
 *
 * Every operand kind is read from the same vec4<u32> view (float16 with or without shader-f16:
 * unpack2x16float widens exactly; bfloat16 as the high halves of f32; float32 by bitcast). The
 * llm.addRmsNormLinear's variant (GemvSpec.norm, gemv-norm.ts) first normalises its rows of A
 * (x + residual, RMSNorm) into workgroup memory and reads them from there. The
 * host uses this kernel only when the 16-byte view is exact (linalg.ts: gemvEligible): A and B
 * contiguous along K, K and the offsets and row strides of A and B multiples of a word's elements,
 * and a single batch. Metadata are gemm-codegen.ts's GEMM_META words (tilesN = the number of
 * 8-column groups), so runGemm fills one layout for every kernel.
 */
import { GEMM_META } from './gemm-codegen.js';
import { gemvNormBindingCount, gemvNormBindings, gemvNormPrologue, type GemvNormSpec } from './gemv-norm.js';
import { PRELUDE_MARK, withPrelude } from '../math/wgsl-prelude.js';
import { arrayType, loadExpr, storagePrelude, storeStmt, type StorageKind } from './storage.js';

/** Rows of A up to which runGemm may use the skinny kernel. */
export const GEMV_MAX_M = 8;
/** Output columns per workgroup (one team of GEMV_TEAM invocations each). */
export const GEMV_COLS = 8;
const GEMV_TEAM = 32;
/** Invocations per workgroup. */
export const GEMV_THREADS = GEMV_COLS * GEMV_TEAM;
/** Independent 16-byte words each lane loads per step of its K loop (memory-level parallelism): the fixed form. */
const GEMV_UNROLL = 4;
/** The most words per lane per step where the unroll follows K (a gated team loads twice as many). */
const GEMV_UNROLL_MAX = 16;

/**
 * Words each lane loads per step of its K loop: KILN_WEBGPU_GEMV_UNROLL (default 4), or with it 0
 * the lane's share of K (ceil(K / V / 32) words, at least 4, at most 16, 8 for the gated GEMV), so a
 * decode projection's whole row is in flight at once. The idea: in place in a decode step the GEMVs
 * ran at ~1 TB/s on the H200 and the down projection (K 3072: 12 words a lane) waited on three rounds
 * of four. Measured there it was slower (more registers a lane, fewer workgroups resident), so the
 * fixed 4 stays the default and this form is an option.
 */
export function gemvUnroll(kind: StorageKind, K: number, gated: boolean, fixed: number): number {
  if (fixed > 0) return fixed;
  const V = gemvVecElems(kind);
  const share = V > 0 ? Math.ceil(K / V / GEMV_TEAM) : GEMV_UNROLL;
  return Math.max(GEMV_UNROLL, Math.min(gated ? GEMV_UNROLL_MAX / 2 : GEMV_UNROLL_MAX, share));
}

export interface GemvSpec {
  /** The storage kind of A, B and C (runGemm's GEMMs have one dtype). */
  readonly kind: StorageKind;
  /** Rows of A per workgroup: 1, 2, 4 or 8. */
  readonly mr: 1 | 2 | 4 | 8;
  readonly bias: boolean;
  readonly beta: boolean;
  /**
   * llm.linearSiluAndMul: B holds 2N columns (gate then up); a team streams gate column n and up
   * column N + n and stores silu(g) * u, g and u rounded to the dtype first (as the linear stores
   * them). No beta.
   */
  readonly gated?: boolean;
  /**
   * llm.addRmsNormLinear: A's rows are normalised first (x + residual, RMSNorm with gamma) into
   * workgroup memory, and workgroup x = 0 stores the sum (gemv-norm.ts). No beta, alpha 1.
   */
  readonly norm?: GemvNormSpec;
  /** Words per lane per K step (gemvUnroll); GEMV_UNROLL where absent. */
  readonly unroll?: number;
  /**
   * Output columns per workgroup (gemvCols): 8 (GEMV_COLS, 256 invocations) where absent, or 4
   * (128 invocations), twice the workgroups for the same N.
   */
  readonly cols?: 4 | 8;
  /**
   * A team's 32 partial sums through subgroupAdd, the team being one subgroup (the host asks for it
   * only where the subgroup size is exactly 32: teams then are subgroup_id, lanes subgroup_invocation_id),
   * instead of workgroup memory, a barrier and a 32-step serial sum per output.
   */
  readonly teamSubgroup?: boolean;
}

/** Elements of `kind` in one 16-byte word, or 0 where the kind has no GEMV form. */
export function gemvVecElems(kind: StorageKind): number {
  switch (kind) {
    case 'f32':
      return 4;
    case 'f16':
    case 'f16p':
    case 'bf16p':
      return 8;
    default:
      return 0;
  }
}

/**
 * Output columns per workgroup for a projection of N columns: 4 where N <= `cols4MaxN`
 * (KILN_WEBGPU_GEMV_COLS4_MAX_N), else 8. Why try 4: at batch 1 Qwen3-0.6B's o and down projections
 * (N = 1024) run as 128 workgroups of 8 columns on the H200's 132 SMs, one workgroup an SM, with a
 * K loop of 2 (o) and 3 (down) rounds of loads; half the columns gives each SM two workgroups'
 * loads in flight. Not measured yet (session 21 had no device), so the default keeps 8.
 */
export function gemvCols(N: number, cols4MaxN: number): 4 | 8 {
  return N <= cols4MaxN ? 4 : 8;
}

/** Invocations of a spec's workgroup. */
export function gemvThreads(s: Pick<GemvSpec, 'cols'>): number {
  return (s.cols ?? GEMV_COLS) * GEMV_TEAM;
}

/** The smallest row block that holds M rows (M <= GEMV_MAX_M). */
export function gemvRows(M: number): GemvSpec['mr'] {
  return M <= 1 ? 1 : M <= 2 ? 2 : M <= 4 ? 4 : 8;
}

export function gemvKey(s: GemvSpec): string {
  const n = s.norm;
  const u = s.unroll !== undefined && s.unroll !== GEMV_UNROLL ? `,u${s.unroll}` : '';
  return `gemv${s.mr},${s.kind},${s.bias ? 'bias' : ''},${s.beta ? 'beta' : ''}${s.gated ? ',gated' : ''}${n ? `,norm${n.kv}${n.residual ? 'r' : ''}${n.subgroups ? 'sg' : ''}${n.prefetch === true ? 'pf' : ''}` : ''}${u}${s.teamSubgroup === true ? ',tsg' : ''}${s.cols !== undefined && s.cols !== GEMV_COLS ? `,c${s.cols}` : ''}`;
}

/** WGSL that turns a 16-byte word into f32 lanes: one vec4 (f32) or two (16-bit kinds, low first). */
function unpackHelpers(kind: StorageKind): string {
  switch (kind) {
    case 'f32':
      return 'fn kiln_w0(w: vec4<u32>) -> vec4<f32> { return bitcast<vec4<f32>>(w); }';
    case 'f16':
    case 'f16p':
      return [
        'fn kiln_w0(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)); }',
        'fn kiln_w1(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)); }',
      ].join('\n');
    case 'bf16p':
      return [
        'fn kiln_bf2(u: u32) -> vec2<f32> { return vec2<f32>(bitcast<f32>(u << 16u), bitcast<f32>(u & 0xffff0000u)); }',
        'fn kiln_w0(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(kiln_bf2(w.x), kiln_bf2(w.y)); }',
        'fn kiln_w1(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(kiln_bf2(w.z), kiln_bf2(w.w)); }',
      ].join('\n');
    default:
      throw new Error(`the webgpu GEMV does not take ${kind}`);
  }
}

/**
 * Statements adding word `q` of B (at word `at` of its row) times the same words of the MR rows of A
 * to acc0..acc(MR-1); `kv`: A's rows come from the norm prologue's xs, kv words each.
 */
function wordTimesRows(q: string, at: string, tag: string, half: boolean, MR: number, acc = 'acc', kv = 0): string[] {
  const out = [`let w0_${tag} = kiln_w0(${q});`];
  if (half) out.push(`let w1_${tag} = kiln_w1(${q});`);
  for (let r = 0; r < MR; r++) {
    const x = kv > 0 ? `xs[${r * kv}u + ${at}]` : `a[ra${r} + ${at}]`;
    out.push(`{ let x = ${x}; ${acc}${r} = ${acc}${r} + dot(w0_${tag}, kiln_w0(x))${half ? ` + dot(w1_${tag}, kiln_w1(x))` : ''}; }`);
  }
  return out;
}

/** WGSL rounding an f32 to the storage kind's dtype (what a store then a load would give). */
function roundTo(kind: StorageKind, v: string): string {
  if (kind === 'f16' || kind === 'f16p') return `kiln_f16_value(kiln_f16_bits(${v}))`;
  if (kind === 'bf16p') return `bitcast<f32>(kiln_bf16_bits(${v}) << 16u)`;
  return v;
}

export function generateGemv(s: GemvSpec): string {
  const V = gemvVecElems(s.kind);
  if (V === 0) throw new Error(`the webgpu GEMV does not take ${s.kind}`);
  if (s.gated && s.beta) throw new Error('the gated webgpu GEMV has no beta');
  if (s.norm && s.beta) throw new Error('the norm-prologue webgpu GEMV has no beta');
  const nm = s.norm;
  const kvx = nm ? nm.kv : 0;
  const half = V === 8;
  const MR = s.mr;
  const C = s.cols ?? GEMV_COLS;
  const T = gemvThreads(s);
  const U = s.unroll ?? GEMV_UNROLL;
  const tsg = s.teamSubgroup === true;
  const m = GEMM_META;
  /** Accumulator sets: the plain product, or the gate's and the up projection's. */
  const sets = s.gated ? ['acc', 'upc'] : ['acc'];
  const L: string[] = [];
  if (s.kind === 'f16') L.push('enable f16;');
  if (nm?.subgroups || tsg) L.push('enable subgroups;');
  L.push(`@group(0) @binding(0) var<storage, read_write> c: ${arrayType(s.kind, true)};`);
  L.push('@group(0) @binding(1) var<storage, read> a: array<vec4<u32>>;');
  L.push('@group(0) @binding(2) var<storage, read> b: array<vec4<u32>>;');
  if (s.bias) L.push(`@group(0) @binding(3) var<storage, read> bias: ${arrayType(s.kind, false)};`);
  const first = s.bias ? 4 : 3;
  if (nm) L.push(...gemvNormBindings(nm, first, MR));
  L.push(`@group(0) @binding(${first + (nm ? gemvNormBindingCount(nm) : 0)}) var<storage, read> kmeta: array<u32>;`);
  if (s.gated || nm) L.push(PRELUDE_MARK);
  const helpers = storagePrelude([s.kind], { f16: s.gated === true && s.kind === 'f16p', bf16: s.gated === true && s.kind === 'bf16p' });
  if (helpers) L.push(helpers);
  L.push(unpackHelpers(s.kind));
  // Partial sums, lane-major per set: the 8 x MR invocations that add a team's partials read consecutive words.
  L.push(`var<workgroup> red: array<f32, ${T * MR * sets.length}>;`);
  L.push('');
  L.push(`@compute @workgroup_size(${T})`);
  const sgIn = nm?.subgroups || tsg ? ', @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) sgid: u32, @builtin(num_subgroups) nsub: u32' : '';
  L.push(`fn main(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) ng: vec3u${sgIn}) {`);
  L.push(`  let M = kmeta[${m.M}]; let N = kmeta[${m.N}]; let K = kmeta[${m.K}];`);
  L.push(`  let groups = kmeta[${m.tilesN}];`);
  L.push(`  let kv = K / ${V}u;`);
  L.push(`  let oA = kmeta[${m.a}] / ${V}u; let sAm = kmeta[${m.a + 1}] / ${V}u;`);
  L.push(`  let oB = kmeta[${m.b}] / ${V}u; let sBn = kmeta[${m.b + 2}] / ${V}u;`);
  L.push(`  let oC = kmeta[${m.c}]; let sCm = kmeta[${m.c + 1}]; let sCn = kmeta[${m.c + 2}];`);
  L.push(`  let alpha = bitcast<f32>(kmeta[${m.alpha}]);`);
  if (s.beta) L.push(`  let beta = bitcast<f32>(kmeta[${m.beta}]);`);
  // With teamSubgroup a team is a subgroup of 32 (whatever the mapping of invocations to subgroups).
  L.push(tsg ? '  let team = sid; let lane = sgid;' : `  let team = tid / ${GEMV_TEAM}u; let lane = tid % ${GEMV_TEAM}u;`);
  L.push(`  let m0 = wid.y * ${MR}u;`);
  // Rows past M read row M - 1 (in bounds, no divergence); their sums are never stored.
  for (let r = 0; r < MR; r++) L.push(`  let ra${r} = oA + min(m0 + ${r}u, M - 1u) * sAm;`);
  // Prefetch (norm variant): the first group's first K step of the weight, loaded before the
  // prologue so that its latency overlaps the norm's; the loop takes them instead of loading.
  const pre = nm?.prefetch === true;
  if (pre) {
    L.push(`  let rbPre = oB + min(wid.x * ${C}u + team, N - 1u) * sBn;`);
    if (s.gated) L.push(`  let rbuPre = oB + (N + min(wid.x * ${C}u + team, N - 1u)) * sBn;`);
    for (let u = 0; u < U; u++) {
      L.push(`  let pq${u} = b[rbPre + min(lane + ${u * GEMV_TEAM}u, kv - 1u)];`);
      if (s.gated) L.push(`  let pp${u} = b[rbuPre + min(lane + ${u * GEMV_TEAM}u, kv - 1u)];`);
    }
  }
  if (nm) L.push(...gemvNormPrologue(nm, s.kind, MR, T, V));
  L.push('  for (var g = wid.x; g < groups; g = g + ng.x) {');
  L.push(`    let n = g * ${C}u + team;`);
  for (const acc of sets) L.push(`    ${Array.from({ length: MR }, (_, r) => `var ${acc}${r} = 0.0;`).join(' ')}`);
  L.push('    if (n < N) {');
  L.push('      let rb = oB + n * sBn;');
  if (s.gated) L.push('      let rbu = oB + (N + n) * sBn;');
  L.push('      var kk = lane;');
  const step = U * GEMV_TEAM;
  L.push(`      for (; kk + ${(U - 1) * GEMV_TEAM}u < kv; kk = kk + ${step}u) {`);
  // Every word loaded first, then the arithmetic: U independent loads in flight per lane (per set).
  if (pre) {
    // The first step of the workgroup's first group (the same for every lane: no divergence).
    L.push('        let first = g == wid.x && kk == lane;');
    for (let u = 0; u < U; u++) {
      L.push(`        var q${u} = pq${u}; if (!first) { q${u} = b[rb + kk + ${u * GEMV_TEAM}u]; }`);
      if (s.gated) L.push(`        var p${u} = pp${u}; if (!first) { p${u} = b[rbu + kk + ${u * GEMV_TEAM}u]; }`);
    }
  } else {
    for (let u = 0; u < U; u++) {
      L.push(`        let q${u} = b[rb + kk + ${u * GEMV_TEAM}u];`);
      if (s.gated) L.push(`        let p${u} = b[rbu + kk + ${u * GEMV_TEAM}u];`);
    }
  }
  for (let u = 0; u < U; u++) {
    for (const line of wordTimesRows(`q${u}`, `kk + ${u * GEMV_TEAM}u`, `${u}`, half, MR, 'acc', kvx)) L.push(`        ${line}`);
    if (s.gated) for (const line of wordTimesRows(`p${u}`, `kk + ${u * GEMV_TEAM}u`, `u${u}`, half, MR, 'upc', kvx)) L.push(`        ${line}`);
  }
  L.push('      }');
  L.push(`      for (; kk < kv; kk = kk + ${GEMV_TEAM}u) {`);
  L.push('        let q = b[rb + kk];');
  for (const line of wordTimesRows('q', 'kk', 't', half, MR, 'acc', kvx)) L.push(`        ${line}`);
  if (s.gated) {
    L.push('        let p = b[rbu + kk];');
    for (const line of wordTimesRows('p', 'kk', 'tu', half, MR, 'upc', kvx)) L.push(`        ${line}`);
  }
  L.push('      }');
  L.push('    }');
  if (tsg) {
    // Each row's team sum in every lane; lane r stores row r.
    sets.forEach((acc) => {
      for (let r = 0; r < MR; r++) L.push(`    let ${acc}s${r} = subgroupAdd(${acc}${r});`);
    });
    const pick = (acc: string): string => Array.from({ length: MR - 1 }, (_, r) => r).reduceRight((e, r) => `select(${e}, ${acc}s${r}, lane == ${r}u)`, `${acc}s${MR - 1}`);
    L.push(`    if (lane < ${MR}u) {`);
    L.push(`      var v = ${pick('acc')};`);
    if (s.gated) L.push(`      var vu = ${pick('upc')};`);
    L.push(`      let gn = g * ${C}u + team; let gm = m0 + lane;`);
  } else {
    sets.forEach((acc, p) => {
      for (let r = 0; r < MR; r++) L.push(`    red[${p * T * MR}u + lane * ${C * MR}u + team * ${MR}u + ${r}u] = ${acc}${r};`);
    });
    L.push('    workgroupBarrier();');
    L.push(`    if (tid < ${C * MR}u) {`);
    L.push(`      var v = 0.0;`);
    L.push(`      for (var j = 0u; j < ${GEMV_TEAM}u; j = j + 1u) { v = v + red[j * ${C * MR}u + tid]; }`);
    if (s.gated) {
      L.push(`      var vu = 0.0;`);
      L.push(`      for (var j = 0u; j < ${GEMV_TEAM}u; j = j + 1u) { vu = vu + red[${T * MR}u + j * ${C * MR}u + tid]; }`);
    }
    L.push(`      let gn = g * ${C}u + tid / ${MR}u; let gm = m0 + tid % ${MR}u;`);
  }
  L.push('      if (gn < N && gm < M) {');
  L.push('        let ic = oC + gm * sCm + gn * sCn;');
  L.push('        v = alpha * v;');
  if (s.gated) L.push('        vu = alpha * vu;');
  if (s.bias) {
    L.push(`        { let ib = kmeta[${m.bias}] + gn * kmeta[${m.bias + 1}]; v = v + ${loadExpr(s.kind, 'bias', 'ib', false)}; }`);
    if (s.gated) L.push(`        { let ib = kmeta[${m.bias}] + (N + gn) * kmeta[${m.bias + 1}]; vu = vu + ${loadExpr(s.kind, 'bias', 'ib', false)}; }`);
  }
  if (s.beta) L.push(`        v = v + beta * ${loadExpr(s.kind, 'c', 'ic', true)};`);
  if (s.gated) {
    // As the unfused ops: the linear stores g and u (rounded), silu(g) * u is rounded once at the store.
    L.push(`        let gv = ${roundTo(s.kind, 'v')}; let uv = ${roundTo(s.kind, 'vu')};`);
    L.push('        v = (gv * kiln_sigmoid(gv)) * uv;');
  }
  L.push(`        ${storeStmt(s.kind, 'c', 'ic', 'v').replace(/\n/g, '\n        ')}`);
  L.push('      }');
  L.push('    }');
  // The next group's partials overwrite red (the subgroup form uses none).
  if (!tsg) L.push('    workgroupBarrier();');
  L.push('  }');
  L.push('}');
  return s.gated || nm ? withPrelude(L.join('\n')) : L.join('\n');
}
