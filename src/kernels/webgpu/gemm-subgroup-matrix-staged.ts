/**
 * The second float16 subgroup matrix GEMM (KILN_WEBGPU_SM_KERNEL=staged): the same product and
 * metadata as gemm-subgroup-matrix.ts (GEMM_META; C = alpha * (A @ B) [+ bias] [+ beta * C]), with
 * the operand tiles moved the way a register-blocked GEMM moves them. Why: the first kernel fills
 * its workgroup tiles one float16 element per invocation per loop step (48 dependent scalar loads
 * per invocation per 32-wide K step, each waited for before the next), so its time went to load
 * latency, not to the matrix units: 9.6 TFLOP/s at 4096^3 on an H200, below the f32 FMA kernel.
 *
 * Here:
 * - Workgroup tiles are 16-byte words (vec4<u32>, 8 float16) read along each operand's contiguous
 *   dimension, a fixed number per invocation (fully unrolled, every load issued before any use).
 * - The words of the next K step are loaded into registers before the current step's matrix
 *   multiplies and stored to workgroup memory after them, so global latency overlaps the
 *   multiplies. With one tile buffer (stages 1, the default) a K step has two barriers (before the
 *   store: nobody still reads the tile; after it: the tile is complete); with two (stages 2) the
 *   next step's words go to the other buffer, and one barrier per step does both jobs.
 * - Stages 0 keeps no operand tiles at all: each subgroup loads its matrices straight from the
 *   storage buffers (the cache shares them between the workgroup's subgroups), the next K step's
 *   matrices in flight during this step's multiplies, with no barrier in the K loop. It needs
 *   M, N and K to be multiples of the workgroup tile (linalg.ts checks; else the stages-1 plan runs).
 * - Each subgroup owns TM x TN result matrices (default 4 x 4 of 16 x 16: a 64 x 64 block); per K
 *   slice it loads TN right matrices once and then one left matrix at a time (TM + TN loads for
 *   TM x TN multiplies). Four subgroups make a 128 x 128 workgroup tile, K steps of 32 (of 16
 *   where the device has only 16 KiB of workgroup memory).
 * - Tiles keep their operand's layout in workgroup memory (row-major A as [m][k], transposed A as
 *   [k][m], and so on), so a word is stored as 8 consecutive float16 and matrices are loaded
 *   row_major or col_major to match; rows are padded by 8 elements against bank conflicts.
 * - Workgroups walk the output tiles in row-major order (group 1, the default), or in bands of
 *   `group` tile rows, down each band's columns (consecutive workgroups share B's column panel and
 *   the band's A panels stay in L2).
 *
 * - The refill (plan.refill, KILN_WEBGPU_SM_REFILL): 'halves' stores a word as 8 float16 into
 *   array<f16> tiles, because subgroupMatrixLoad takes an array of the matrix's scalar type.
 *   'words' declares the tiles as one untyped workgroup buffer (Dawn's `buffer<N>`) seen through
 *   `bufferView` as vec4<u32> for the stores and as f16 for the loads, so a word is one store.
 *   Why it is worth a form: bench/webgpu-mma-peak.ts put the K step with the 8-halves refill
 *   (form step) at ~220 TFLOP/s on an H100 and with whole-word stores (stepv) at ~274.
 *
 * KILN_WEBGPU_SM_PLAN overrides the plan ("sgm,sgn,tm,tn,ks[,stages=S][,group=G]", parsed and
 * checked by parseStagedPlan / stagedPlanProblem) for experiments (scripts/device/wggemm-sweep.sh).
 *
 * A word is either wholly inside the operand or wholly outside (zero): the host (linalg.ts:
 * stagedEligible) uses this kernel only when each operand is contiguous along one of its two
 * matrix dims, that dim's extent is a multiple of 8, and its offset, other stride and batch strides
 * are multiples of 8; anything else runs on the first kernel. The epilogue is the first kernel's
 * (each accumulator through the subgroup's f32 scratch; alpha, bias, beta, float16 rounding).
 *
 * `emulate` (tests only) writes the same kernel without shader-f16, subgroups or subgroup matrices:
 * a "subgroup" is sg consecutive invocations; a loaded left or right matrix is its offset and
 * stride, read from its array when multiplied (exact here: every matrix is multiplied before a
 * barrier or store can change its memory); a result matrix is spread over the subgroup's
 * invocations (element e on invocation e % sg), as real results are. Tiles are f32 and the output
 * packed float16 (storage.ts 'f16p'). Every index, barrier and buffer switch is the real kernel's,
 * so SwiftShader checks a plan's numbers on a machine without subgroup matrices.
 *
 * Split K (spec.partial, stages 1 and 2): workgroup z is K slice z of kmeta[kc] elements (a
 * multiple of the K step, so a word never straddles a slice's end); the epilogue stores the raw
 * f32 sums to the scratch [slice][M][N] (binding 0) and gemm-codegen.ts's combine kernel applies
 * alpha, bias and beta (see there).
 */
import { checkPartialSpec, CONV_A_META, GEMM_META, actKey, actStmts, withActPrelude, type GemmSpec } from './gemm-codegen.js';
import type { SubgroupMatrixPlan } from './gemm-subgroup-matrix.js';
import { loadExpr, storagePrelude, storeStmt, type StorageKind } from './storage.js';

/** float16 elements per 16-byte word. */
const W = 8;
/** Padding (elements) of each workgroup-memory tile row. */
const PAD = 8;

/** A staged plan: the subgroup matrix plan plus how tiles are buffered and workgroups ordered. */
export interface StagedPlan extends SubgroupMatrixPlan {
  /** Operand tile buffers in workgroup memory: 0 (matrices from storage), 1 (register prefetch), 2 (double buffered). */
  readonly stages: 0 | 1 | 2;
  /** Output tile rows per band of the workgroup order (1: row-major order). */
  readonly group: number;
  /**
   * How a prefetched word reaches the tile (stages 1 and 2): 'halves' stores its 8 float16 one by
   * one into f16 tiles; 'words' stores it whole through a vec4<u32> view of an untyped workgroup
   * buffer (Dawn's buffer<N>) that the matrix loads read through an f16 view (see the header).
   */
  readonly refill: StagedRefill;
}

/** The tile refill forms (StagedPlan.refill). */
export const STAGED_REFILLS = ['halves', 'words'] as const;
export type StagedRefill = (typeof STAGED_REFILLS)[number];

export interface StagedOptions {
  /** Without subgroup matrices or shader-f16 (tests on SwiftShader; see the header). */
  readonly emulate?: boolean;
}

export const stagedTileM = (p: SubgroupMatrixPlan): number => p.sgm * p.tm * p.m;
export const stagedTileN = (p: SubgroupMatrixPlan): number => p.sgn * p.tn * p.n;
export const stagedTileK = (p: SubgroupMatrixPlan): number => p.ks * p.k;
const threads = (p: SubgroupMatrixPlan): number => p.sgm * p.sgn * p.sg;

/** Bytes of workgroup memory the staged kernel declares (the padded tiles per stage and the epilogue scratch). */
export function stagedWorkgroupBytes(p: StagedPlan | SubgroupMatrixPlan, opts: StagedOptions = {}): number {
  const stages = 'stages' in p ? p.stages : 1;
  const BM = stagedTileM(p);
  const BN = stagedTileN(p);
  const BK = stagedTileK(p);
  // Either layout of a tile pads its rows by PAD: take the larger.
  const a = Math.max(BM * (BK + PAD), BK * (BM + PAD));
  const b = Math.max(BK * (BN + PAD), BN * (BK + PAD));
  return stages * (opts.emulate === true ? 4 : 2) * (a + b) + 4 * p.sgm * p.sgn * p.m * p.n;
}

export interface StagedLimits {
  readonly maxInvocations: number;
  readonly maxWorkgroupBytes: number;
}

/** Why plan `p` cannot run on a device with these limits, or null when it can. */
export function stagedPlanProblem(p: StagedPlan, limits: StagedLimits, opts: StagedOptions = {}): string | null {
  const T = threads(p);
  if (T > limits.maxInvocations) return `${p.sgm} x ${p.sgn} subgroups of ${p.sg} invocations make ${T}, over the device's ${limits.maxInvocations} per workgroup`;
  const bytes = stagedWorkgroupBytes(p, opts);
  if (bytes > limits.maxWorkgroupBytes) return `its tiles need ${bytes} bytes of workgroup memory, over the device's ${limits.maxWorkgroupBytes}`;
  if (p.stages > 0) {
    const wa = (stagedTileM(p) * stagedTileK(p)) / W;
    const wb = (stagedTileK(p) * stagedTileN(p)) / W;
    if (wa % T !== 0 || wb % T !== 0) return `its ${wa} + ${wb} tile words per K step do not split evenly over ${T} invocations`;
  }
  return null;
}

/**
 * The staged plan for a matrix shape (from the first kernel's plan: its m, n, k and subgroup size),
 * largest first, or null when none fits: every invocation must load whole words, an equal count.
 */
export function planStaged(base: SubgroupMatrixPlan, limits: StagedLimits, opts: StagedOptions = {}, refill: StagedRefill = 'halves'): StagedPlan | null {
  // K steps of 32 where the workgroup memory allows, else of one matrix K (16 KiB holds 128 x 128 tiles at K 16).
  const deep = Math.max(1, Math.floor(32 / base.k));
  for (const [tm, tn, ks] of [[4, 4, deep], [4, 4, 1], [4, 2, deep], [4, 2, 1], [2, 2, deep], [2, 2, 1]] as const) {
    const p: StagedPlan = { ...base, sgm: 2, sgn: 2, tm, tn, ks, stages: 1, group: 1, refill };
    if (stagedPlanProblem(p, limits, opts) === null) return p;
  }
  return null;
}

/** The syntax KILN_WEBGPU_SM_PLAN takes (for errors). */
export const SM_PLAN_SYNTAX = '"sgm,sgn,tm,tn,ks[,stages=0|1|2][,group=G][,refill=halves|words]" (subgroups along M and N, 16x16 matrices per subgroup along M and N, matrix K slices per K step; e.g. "2,4,4,4,2,stages=2,group=8")';

/**
 * The plan of a KILN_WEBGPU_SM_PLAN string on the device's matrix shape and subgroup size (`base`):
 * five positive integers sgm, sgn, tm, tn, ks, then optional stages=0|1|2 (default 1), group=G
 * (default 1) and refill=halves|words (default `refill`). Throws naming the variable on bad syntax;
 * device limits are stagedPlanProblem's.
 */
export function parseStagedPlan(text: string, base: SubgroupMatrixPlan, refill: StagedRefill = 'halves'): StagedPlan {
  const bad = (why: string): Error => new RangeError(`KILN_WEBGPU_SM_PLAN=${JSON.stringify(text)}: ${why}; expected ${SM_PLAN_SYNTAX}`);
  const parts = text.split(',').map((s) => s.trim());
  if (parts.length < 5) throw bad(`${parts.length} fields`);
  const int = (s: string, what: string, lo: number, hi: number): number => {
    if (!/^\d+$/.test(s)) throw bad(`${what} must be an integer, got ${JSON.stringify(s)}`);
    const v = Number(s);
    if (v < lo || v > hi) throw bad(`${what} must be in ${lo}..${hi}, got ${v}`);
    return v;
  };
  const [sgm, sgn, tm, tn, ks] = (['sgm', 'sgn', 'tm', 'tn', 'ks'] as const).map((name, i) => int(parts[i]!, name, 1, 16)) as [number, number, number, number, number];
  let stages: 0 | 1 | 2 = 1;
  let group = 1;
  let fill = refill;
  const seen = new Set<string>();
  for (const kv of parts.slice(5)) {
    const m = /^(stages|group|refill)=(.*)$/.exec(kv);
    if (!m) throw bad(`unknown field ${JSON.stringify(kv)}`);
    if (seen.has(m[1]!)) throw bad(`${m[1]} given twice`);
    seen.add(m[1]!);
    if (m[1] === 'stages') stages = int(m[2]!, 'stages', 0, 2) as 0 | 1 | 2;
    else if (m[1] === 'group') group = int(m[2]!, 'group', 1, 1024);
    else {
      const r = STAGED_REFILLS.find((x) => x === m[2]);
      if (r === undefined) throw bad(`refill must be one of ${STAGED_REFILLS.join(', ')}, got ${JSON.stringify(m[2])}`);
      fill = r;
    }
  }
  return { ...base, sgm, sgn, tm, tn, ks, stages, group, refill: fill };
}

export function stagedKey(s: GemmSpec, p: StagedPlan, opts: StagedOptions = {}): string {
  // The default plan's key (stages 1, group 1) is the key it always had.
  const extra = `${p.stages !== 1 ? `.s${p.stages}` : ''}${p.group !== 1 ? `.g${p.group}` : ''}${wordRefill(p, opts) ? '.rw' : ''}${opts.emulate === true ? '.emu' : ''}`;
  return `smstaged${p.m}x${p.n}x${p.k}.sg${p.sg}.${p.sgm}x${p.sgn}.${p.tm}x${p.tn}.${p.ks}${extra},${s.aMajor}${s.bMajor},${s.bias ? 'bias' : ''},${s.beta ? 'beta' : ''}${s.partial === true ? ',partial' : ''}${actKey(s)}${s.aConv === true ? `,conv${s.aConvCarry === true ? 'c' : ''}` : ''}`;
}

/**
 * Whether the kernel refills its tiles with whole words (plan.refill 'words' with tiles at all:
 * stages 1 or 2). The emulation keeps float32 tiles, which a word cannot be stored into, so it
 * always refills by halves: its checks cover the indices, which both forms share.
 */
const wordRefill = (p: StagedPlan, opts: StagedOptions): boolean => p.refill === 'words' && p.stages > 0 && opts.emulate !== true;

/** How the kernel spells matrices: the real builtins, or their emulation (see the header). */
interface Dialect {
  readonly enables: string[];
  /** The output's and bias's storage kind. */
  readonly out: StorageKind;
  /** Element type of the operand tiles in workgroup memory. */
  readonly tile: string;
  /** Element type of operand bindings read as matrices (stages 0). */
  readonly operand: string;
  readonly left: string;
  readonly right: string;
  readonly result: string;
  /** A word's u32 as two tile elements (a vec2). */
  unpack(x: string): string;
  /** A matrix of `type` (left / right) loaded from array `src` at element `off`, row or column major, rows (columns) `stride` apart. */
  load(kind: 'left' | 'right', src: string, off: string, col: boolean, stride: string): string;
  mma(l: string, r: string, acc: string): string;
  /** Stores result `v` row-major to the f32 array `dst` at `off`. */
  store(dst: string, off: string, v: string, stride: string): string;
  /** Functions the calls above use. */
  helpers(): string[];
}

/** `viewed`: the tiles are bufferView pointers (word refill), passed to the loads as they are. */
function realDialect(p: SubgroupMatrixPlan, viewed = false): Dialect {
  const left = `subgroup_matrix_left<f16, ${p.k}, ${p.m}>`;
  const right = `subgroup_matrix_right<f16, ${p.n}, ${p.k}>`;
  return {
    enables: ['enable f16;', 'enable subgroups;', 'enable chromium_experimental_subgroup_matrix;'],
    out: 'f16',
    tile: 'f16',
    operand: 'f16',
    left,
    right,
    result: `subgroup_matrix_result<f32, ${p.n}, ${p.m}>`,
    unpack: (x) => `bitcast<vec2<f16>>(${x})`,
    load: (kind, src, off, col, stride) => `subgroupMatrixLoad<${kind === 'left' ? left : right}, ${col ? 'col_major' : 'row_major'}>(${viewed && (src === 'As' || src === 'Bs') ? '' : '&'}${src}, ${off}, ${stride})`,
    mma: (l, r, acc) => `subgroupMatrixMultiplyAccumulate(${l}, ${r}, ${acc})`,
    store: (dst, off, v, stride) => `subgroupMatrixStore<row_major>(&${dst}, ${off}, ${v}, ${stride});`,
    helpers: () => [],
  };
}

function emulatedDialect(p: SubgroupMatrixPlan): Dialect {
  const { m, n, k, sg } = p;
  if ((m * n) % sg !== 0) throw new Error(`the emulated subgroup matrix GEMM needs ${m} x ${n} results to split over subgroups of ${sg}`);
  const E = (m * n) / sg;
  // Where the kernel loads each kind of matrix from: one array and one majorness per kernel.
  const from: { left?: { src: string; col: boolean }; right?: { src: string; col: boolean } } = {};
  // Element (row, col) of a matrix whose descriptor is d (offset, stride).
  const elem = (kind: 'left' | 'right', d: string, row: string, col: string): string => {
    const f = from[kind];
    if (!f) return '0.0';
    const e = f.col ? `${d}.x + (${col}) * ${d}.y + (${row})` : `${d}.x + (${row}) * ${d}.y + (${col})`;
    return f.src === 'a' || f.src === 'b' ? `unpack2x16float(${f.src}[(${e}) / 2u])[(${e}) % 2u]` : `${f.src}[${e}]`;
  };
  return {
    enables: [],
    out: 'f16p',
    tile: 'f32',
    // Packed float16 pairs: element e is half e % 2 of word e / 2.
    operand: 'u32',
    left: 'vec2<u32>',
    right: 'vec2<u32>',
    result: `array<f32, ${E}>`,
    unpack: (x) => `unpack2x16float(${x})`,
    load: (kind, src, off, col, stride) => {
      const f = from[kind];
      if (f && (f.src !== src || f.col !== col)) throw new Error(`the emulated subgroup matrix GEMM loads ${kind} matrices from one array in one order (${f.src}, ${src})`);
      from[kind] = { src, col };
      return `vec2<u32>(${off}, ${stride})`;
    },
    mma: (l, r, acc) => `emu_mma(${l}, ${r}, ${acc})`,
    store: (dst, off, v, stride) => `emu_store_${dst}(${off}, ${stride}, ${v});`,
    helpers: () => [
      `var<private> emu_lane: u32;`,
      // Result element e = emu_lane + q * sg of a matrix is this invocation's q-th.
      `fn emu_mma(l: vec2<u32>, r: vec2<u32>, acc: array<f32, ${E}>) -> array<f32, ${E}> {`,
      '  var c = acc;',
      `  for (var q = 0u; q < ${E}u; q++) {`,
      `    let e = emu_lane + q * ${sg}u; let i = e / ${n}u; let j = e % ${n}u;`,
      '    var s = c[q];',
      `    for (var t = 0u; t < ${k}u; t++) { s = s + ${elem('left', 'l', 'i', 't')} * ${elem('right', 'r', 't', 'j')}; }`,
      '    c[q] = s;',
      '  }',
      '  return c;',
      '}',
      `fn emu_store_Cs(off: u32, stride: u32, v: array<f32, ${E}>) {`,
      `  for (var q = 0u; q < ${E}u; q++) { let e = emu_lane + q * ${sg}u; Cs[off + (e / ${n}u) * stride + e % ${n}u] = v[q]; }`,
      '}',
    ],
  };
}

/** WGSL of the staged subgroup matrix GEMM for `s` (float16 through shader-f16) on plan `p`. */
export function generateStagedGemm(s: GemmSpec, p: StagedPlan, opts: StagedOptions = {}): string {
  const emulate = opts.emulate === true;
  // The emulation reads and writes float16 packed in u32 words (no shader-f16 needed).
  const f16 = emulate ? 'f16p' : 'f16';
  const partial = s.partial === true;
  checkPartialSpec(s);
  if (partial && p.stages === 0) throw new Error('the staged subgroup matrix GEMM splits K with stages 1 or 2 only (stages 0 loads whole tiles of K)');
  if (s.aConv === true && (p.stages === 0 || s.aMajor !== 'k')) throw new Error('the staged GEMM gathers a conv input (aConv) as row-major A words with stages 1 or 2 only');
  if (s.a !== f16 || s.b !== f16 || (partial ? s.c !== 'f32' : s.c !== f16)) throw new Error(`the ${emulate ? 'emulated ' : ''}subgroup matrix GEMM takes float16 (${f16}), got ${s.a} x ${s.b} -> ${s.c}`);
  const words = wordRefill(p, opts);
  const D = emulate ? emulatedDialect(p) : realDialect(p, words);
  const BM = stagedTileM(p);
  const BN = stagedTileN(p);
  const BK = stagedTileK(p);
  const T = threads(p);
  const MN = p.m * p.n;
  const w = GEMM_META;
  const direct = p.stages === 0;
  // Tile layouts: A as [m][k] (row-major A) or [k][m]; B as [k][n] (row-major B) or [n][k].
  const aRows = s.aMajor === 'k';
  const bRows = s.bMajor === 'n';
  const SA = aRows ? BK + PAD : BM + PAD;
  const SB = bRows ? BN + PAD : BK + PAD;
  const aWordsPerLine = (aRows ? BK : BM) / W;
  const bWordsPerLine = (bRows ? BN : BK) / W;
  const NA = direct ? 0 : (BM * BK) / W / T;
  const NB = direct ? 0 : (BK * BN) / W / T;
  // One stage's tile sizes (elements); stages 2 keeps two of each, the second at these offsets.
  const ZA = (aRows ? BM : BK) * SA;
  const ZB = (bRows ? BK : BN) * SB;
  const outArray = partial ? 'array<f32>' : emulate ? 'array<atomic<u32>>' : 'array<f16>';
  const L: string[] = [...D.enables];
  L.push(`@group(0) @binding(0) var<storage, read_write> c: ${outArray};`);
  const opType = direct ? `array<${D.operand}>` : 'array<vec4<u32>>';
  L.push(`@group(0) @binding(1) var<storage, read> a: ${opType};`);
  L.push(`@group(0) @binding(2) var<storage, read> b: ${opType};`);
  if (s.bias) L.push(`@group(0) @binding(3) var<storage, read> bias: ${emulate ? 'array<u32>' : 'array<f16>'};`);
  L.push(`@group(0) @binding(${s.bias ? 4 : 3}) var<storage, read> kmeta: array<u32>;`);
  L.push(storagePrelude([D.out]));
  if (words) {
    // One untyped buffer: A's tiles then B's, float16 (2 bytes) each; ZA * 2 is a multiple of 16
    // (rows of a multiple of 8 halves), so B's word view starts on a word.
    L.push(`var<workgroup> Ts: buffer<${2 * p.stages * (ZA + ZB)}>;`);
  } else if (!direct) {
    L.push(`var<workgroup> As: array<${D.tile}, ${p.stages * ZA}>;`);
    L.push(`var<workgroup> Bs: array<${D.tile}, ${p.stages * ZB}>;`);
  }
  L.push(`var<workgroup> Cs: array<f32, ${p.sgm * p.sgn * MN}>;`);
  // A word's 8 float16 to 8 consecutive elements of a tile.
  if (!direct && !words) {
    for (const [name, arr] of [['kiln_put_a', 'As'], ['kiln_put_b', 'Bs']] as const) {
      L.push(`fn ${name}(at: u32, v: vec4<u32>) {`);
      L.push(`  let h0 = ${D.unpack('v.x')}; let h1 = ${D.unpack('v.y')}; let h2 = ${D.unpack('v.z')}; let h3 = ${D.unpack('v.w')};`);
      L.push(`  ${arr}[at] = h0.x; ${arr}[at + 1u] = h0.y; ${arr}[at + 2u] = h1.x; ${arr}[at + 3u] = h1.y;`);
      L.push(`  ${arr}[at + 4u] = h2.x; ${arr}[at + 5u] = h2.y; ${arr}[at + 6u] = h3.x; ${arr}[at + 7u] = h3.y;`);
      L.push('}');
    }
  }
  L.push(`@compute @workgroup_size(${T})`);
  L.push(`fn main(@builtin(local_invocation_index) tid: u32, ${emulate ? '' : '@builtin(subgroup_id) sgi: u32, '}@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) ng: vec3u) {`);
  if (emulate) L.push(`  let sgi = tid / ${p.sg}u; emu_lane = tid % ${p.sg}u;`);
  if (words) {
    // The tiles as float16 for the matrix loads and as 16-byte words for the refill's stores.
    L.push(`  let As = bufferView<array<f16>>(&Ts, 0); let Bs = bufferView<array<f16>>(&Ts, ${2 * p.stages * ZA});`);
    L.push(`  let Aw = bufferView<array<vec4<u32>>>(&Ts, 0); let Bw = bufferView<array<vec4<u32>>>(&Ts, ${2 * p.stages * ZA});`);
  }
  L.push(`  let M = kmeta[${w.M}]; let N = kmeta[${w.N}]; let K = kmeta[${w.K}];`);
  L.push(`  let batch = kmeta[${w.batch}]; let tilesN = kmeta[${w.tilesN}]; let tilesM = kmeta[${w.tilesM}];`);
  L.push(`  let bd1 = kmeta[${w.batchSizes + 1}]; let bd2 = kmeta[${w.batchSizes + 2}];`);
  L.push(`  let sCm = kmeta[${w.c + 1}]; let sCn = kmeta[${w.c + 2}];`);
  if (s.aConv === true) {
    const g = (i: number): string => `kmeta[${CONV_A_META.at + i}]`;
    L.push(`  let cOH = ${g(0)}; let cOW = ${g(1)}; let cC = ${g(2)}; let cKW = ${g(3)}; let cSh = ${g(4)}; let cSw = ${g(5)};`);
    L.push(`  let cPt = i32(${g(6)}); let cPl = i32(${g(7)}); let cDh = ${g(8)}; let cDw = ${g(9)}; let cH = i32(${g(10)}); let cW = i32(${g(11)});`);
    L.push(`  let cXn = ${g(12)}; let cXh = ${g(13)}; let cXw = ${g(14)};`);
  }
  if (direct) {
    // The operands' non-contiguous strides, in elements (matrix loads take element offsets).
    L.push(`  let sA = kmeta[${w.a + (aRows ? 1 : 2)}]; let sB = kmeta[${w.b + (bRows ? 1 : 2)}];`);
  } else {
    // The operands' non-contiguous strides, in words (the host checked they are multiples of 8).
    L.push(`  let sA = kmeta[${w.a + (aRows ? 1 : 2)}] / ${W}u; let sB = kmeta[${w.b + (bRows ? 1 : 2)}] / ${W}u;`);
  }
  L.push(`  let alpha = bitcast<f32>(kmeta[${w.alpha}]);`);
  if (s.beta) L.push(`  let beta = bitcast<f32>(kmeta[${w.beta}]);`);
  L.push(`  let wm = sgi / ${p.sgn}u; let wn = sgi % ${p.sgn}u;`);
  L.push(`  let es = tid / ${p.sg}u; let lane = tid % ${p.sg}u; let em = es / ${p.sgn}u; let en = es % ${p.sgn}u;`);
  // Each invocation's words: the line (row of the tile layout) and the word within it.
  for (let i = 0; i < NA; i++) L.push(`  let la${i} = (tid + ${i * T}u) / ${aWordsPerLine}u; let wa${i} = (tid + ${i * T}u) % ${aWordsPerLine}u;`);
  for (let i = 0; i < NB; i++) L.push(`  let lb${i} = (tid + ${i * T}u) / ${bWordsPerLine}u; let wb${i} = (tid + ${i * T}u) % ${bWordsPerLine}u;`);
  L.push('  for (var bz = wid.z; bz < batch; bz = bz + ng.z) {');
  L.push('    let c2 = bz % bd2; let rb = bz / bd2; let c1 = rb % bd1; let c0 = rb / bd1;');
  L.push(`    let oC = kmeta[${w.c}] + c0 * kmeta[${w.c + 3}] + c1 * kmeta[${w.c + 4}] + c2 * kmeta[${w.c + 5}];`);
  for (const [name, base] of [['oA', w.a], ['oB', w.b]] as const) {
    L.push(`    let ${name} = (kmeta[${base}] + c0 * kmeta[${base + 3}] + c1 * kmeta[${base + 4}] + c2 * kmeta[${base + 5}])${direct ? '' : ` / ${W}u`};`);
  }
  // Split K: bz is the slice (batch sizes 1, batch strides 0: c0 = bz moves no operand).
  if (partial) L.push(`    let kBeg = bz * kmeta[${w.kc}]; let kEnd = min(K, kBeg + kmeta[${w.kc}]);`);
  if (p.group === 1) {
    L.push('    for (var tm = wid.y; tm < tilesM; tm = tm + ng.y) {');
    L.push('      for (var tn = wid.x; tn < tilesN; tn = tn + ng.x) {');
  } else {
    // Bands of `group` tile rows, each walked down its columns: tile t of the band is row t % rows, column t / rows.
    L.push('    let tilesMN = tilesM * tilesN;');
    L.push('    for (var t = wid.y * ng.x + wid.x; t < tilesMN; t = t + ng.x * ng.y) {');
    L.push(`      let band = t / ${p.group}u / tilesN; let first = band * ${p.group}u; let rows = min(tilesM - first, ${p.group}u); let r = t - first * tilesN;`);
    L.push('      let tm = first + r % rows; let tn = r / rows; {');
  }
  L.push(`        let m0 = tm * ${BM}u; let n0 = tn * ${BN}u;`);
  const accs: string[] = [];
  for (let i = 0; i < p.tm; i++) for (let j = 0; j < p.tn; j++) accs.push(`acc${i}_${j}`);
  if (direct) {
    L.push(...directLoop(s, p, D, accs));
  } else {
    L.push(...stagedLoop(s, p, D, accs, { NA, NB, SA, SB, ZA, ZB, words }, partial ? { begin: 'kBeg', end: 'kEnd' } : { begin: '0u', end: 'K' }));
  }
  for (let i = 0; i < p.tm; i++) {
    for (let j = 0; j < p.tn; j++) {
      L.push('        workgroupBarrier();');
      L.push(`        ${D.store('Cs', `sgi * ${MN}u`, `acc${i}_${j}`, `${p.n}u`)}`);
      L.push('        workgroupBarrier();');
      L.push(`        for (var e = lane; e < ${MN}u; e = e + ${p.sg}u) {`);
      L.push(`          let gm = m0 + em * ${p.tm * p.m}u + ${i * p.m}u + e / ${p.n}u; let gn = n0 + en * ${p.tn * p.n}u + ${j * p.n}u + e % ${p.n}u;`);
      L.push('          if (gm < M && gn < N) {');
      if (partial) {
        L.push(`            c[(bz * M + gm) * N + gn] = Cs[es * ${MN}u + e];`);
        L.push('          }');
        L.push('        }');
        continue;
      }
      L.push('            let ic = oC + gm * sCm + gn * sCn;');
      L.push(`            var v = alpha * Cs[es * ${MN}u + e];`);
      const biasAt = `kmeta[${w.bias}] + gn * kmeta[${w.bias + 1}]`;
      if (s.bias) L.push(`            v = v + ${emulate ? loadExpr('f16p', 'bias', biasAt, false) : `f32(bias[${biasAt}])`};`);
      if (s.beta) L.push(`            v = v + beta * ${emulate ? loadExpr('f16p', 'c', 'ic', true) : 'f32(c[ic])'};`);
      for (const x of actStmts(s)) L.push(`            ${x}`);
      L.push(`            ${storeStmt(D.out, 'c', 'ic', 'v')}`);
      L.push('          }');
      L.push('        }');
    }
  }
  L.push('      }');
  L.push('    }');
  L.push('  }');
  L.push('}');
  L.push(...D.helpers());
  return withActPrelude(s, L.join('\n'));
}

/** The K loop of stages 1 and 2: words to registers, registers to the tile buffer, matrices from the tiles. */
function stagedLoop(s: GemmSpec, p: StagedPlan, D: Dialect, accs: readonly string[], t: { NA: number; NB: number; SA: number; SB: number; ZA: number; ZB: number; words: boolean }, kr: { begin: string; end: string }): string[] {
  const { NA, NB, SA, SB, ZA, ZB, words } = t;
  const BK = stagedTileK(p);
  const carry = s.aConv === true && s.aConvCarry === true;
  const aRows = s.aMajor === 'k';
  const bRows = s.bMajor === 'n';
  const L: string[] = [];
  // The word loads of K step k0 into registers pa*, pb* (zero outside the operand).
  const loads = (k0: string): string[] => {
    const out: string[] = [];
    for (let i = 0; i < NA && s.aConv === true; i++) {
      // A conv input through im2col addresses: word (pixel m, k0) is channels c..c+7 of tap (kh, kw),
      // 8 consecutive elements of the channels_last input (C is a multiple of 8), or zero in the padding.
      const gk = `${k0} + wa${i} * ${W}u`;
      out.push(`if (cm${i} < M && ${gk} < ${kr.end}) {`);
      if (carry) {
        // (kh, kw, c) of this word kept in ckh, ckw, cc (set at the tile's first K step, stepped below).
        out.push(`  let ih = chs${i} + i32(ckh${i} * cDh); let iw = cws${i} + i32(ckw${i} * cDw); let cc = cc${i};`);
      } else {
        out.push(`  let cc = (${gk}) % cC; let ct = (${gk}) / cC; let ih = chs${i} + i32((ct / cKW) * cDh); let iw = cws${i} + i32((ct % cKW) * cDw);`);
      }
      out.push(`  if (ih >= 0 && ih < cH && iw >= 0 && iw < cW) { pa${i} = a[oA + (cb${i} + u32(ih) * cXh + u32(iw) * cXw + cc) / ${W}u]; } else { pa${i} = vec4<u32>(); }`);
      out.push(`} else { pa${i} = vec4<u32>(); }`);
      // The next K step's word is BK further along k: carry c into kw, kw into kh (C may be under BK: a loop).
      if (carry) out.push(`cc${i} = cc${i} + ${BK}u; while (cc${i} >= cC) { cc${i} = cc${i} - cC; ckw${i} = ckw${i} + 1u; if (ckw${i} == cKW) { ckw${i} = 0u; ckh${i} = ckh${i} + 1u; } }`);
    }
    for (let i = 0; i < NA && s.aConv !== true; i++) {
      // [m][k]: line = m, word along k; [k][m]: line = k, word along m.
      const [gm, gk] = aRows ? [`m0 + la${i}`, `${k0} + wa${i} * ${W}u`] : [`m0 + wa${i} * ${W}u`, `${k0} + la${i}`];
      const idx = aRows ? `oA + (${gm}) * sA + (${gk}) / ${W}u` : `oA + (${gk}) * sA + (${gm}) / ${W}u`;
      out.push(`if (${gm} < M && ${gk} < ${kr.end}) { pa${i} = a[${idx}]; } else { pa${i} = vec4<u32>(); }`);
    }
    for (let i = 0; i < NB; i++) {
      // [k][n]: line = k, word along n; [n][k]: line = n, word along k.
      const [gk, gn] = bRows ? [`${k0} + lb${i}`, `n0 + wb${i} * ${W}u`] : [`${k0} + wb${i} * ${W}u`, `n0 + lb${i}`];
      const idx = bRows ? `oB + (${gk}) * sB + (${gn}) / ${W}u` : `oB + (${gn}) * sB + (${gk}) / ${W}u`;
      out.push(`if (${gk} < ${kr.end} && ${gn} < N) { pb${i} = b[${idx}]; } else { pb${i} = vec4<u32>(); }`);
    }
    return out;
  };
  // The stores of the registers into the tile buffer at element offsets ao (A) and bo (B): whole
  // words through the word views (every offset is a multiple of 8 halves), or 8 halves each.
  const puts = (ao: string, bo: string): string[] => {
    const out: string[] = [];
    for (let i = 0; i < NA; i++) out.push(words ? `Aw[(${ao}la${i} * ${SA}u + wa${i} * ${W}u) / ${W}u] = pa${i};` : `kiln_put_a(${ao}la${i} * ${SA}u + wa${i} * ${W}u, pa${i});`);
    for (let i = 0; i < NB; i++) out.push(words ? `Bw[(${bo}lb${i} * ${SB}u + wb${i} * ${W}u) / ${W}u] = pb${i};` : `kiln_put_b(${bo}lb${i} * ${SB}u + wb${i} * ${W}u, pb${i});`);
    return out;
  };
  // One K step's multiplies from the tile buffer at element offsets ao (A) and bo (B).
  const multiplies = (ao: string, bo: string): string[] => {
    const out: string[] = [];
    out.push(`          for (var kk = 0u; kk < ${BK}u; kk = kk + ${p.k}u) {`);
    for (let j = 0; j < p.tn; j++) {
      const col = `wn * ${p.tn * p.n}u + ${j * p.n}u`;
      // Right matrix (k rows, n columns): [k][n] row_major at k * SB + n; [n][k] col_major at n * SB + k.
      out.push(bRows ? `            let r${j} = ${D.load('right', 'Bs', `${bo}kk * ${SB}u + ${col}`, false, `${SB}u`)};` : `            let r${j} = ${D.load('right', 'Bs', `${bo}(${col}) * ${SB}u + kk`, true, `${SB}u`)};`);
    }
    for (let i = 0; i < p.tm; i++) {
      const row = `wm * ${p.tm * p.m}u + ${i * p.m}u`;
      // Left matrix (m rows, k columns): [m][k] row_major at m * SA + k; [k][m] col_major at k * SA + m.
      out.push(aRows ? `            let l${i} = ${D.load('left', 'As', `${ao}(${row}) * ${SA}u + kk`, false, `${SA}u`)};` : `            let l${i} = ${D.load('left', 'As', `${ao}kk * ${SA}u + ${row}`, true, `${SA}u`)};`);
      for (let j = 0; j < p.tn; j++) out.push(`            acc${i}_${j} = ${D.mma(`l${i}`, `r${j}`, `acc${i}_${j}`)};`);
    }
    out.push('          }');
    return out;
  };
  // A conv input: each invocation's A lines are output pixels, decomposed once per tile.
  for (let i = 0; i < NA && s.aConv === true; i++) {
    L.push(`        let cm${i} = m0 + la${i}; let cq${i} = cm${i} / cOW; let cb${i} = (cq${i} / cOH) * cXn;`);
    L.push(`        let chs${i} = i32((cq${i} % cOH) * cSh) - cPt; let cws${i} = i32((cm${i} % cOW) * cSw) - cPl;`);
    // With carries: the word's (kh, kw, c) at the first K step, split once per tile.
    if (carry) L.push(`        var cc${i} = (${kr.begin} + wa${i} * ${W}u) % cC; var ckw${i} = ((${kr.begin} + wa${i} * ${W}u) / cC) % cKW; var ckh${i} = ((${kr.begin} + wa${i} * ${W}u) / cC) / cKW;`);
  }
  for (let i = 0; i < NA; i++) L.push(`        var pa${i}: vec4<u32>;`);
  for (let i = 0; i < NB; i++) L.push(`        var pb${i}: vec4<u32>;`);
  for (const x of loads(kr.begin)) L.push(`        ${x}`);
  for (const x of accs) L.push(`        var ${x} = ${D.result}();`);
  if (p.stages === 1) {
    L.push(`        for (var k0 = ${kr.begin}; k0 < ${kr.end}; k0 = k0 + ${BK}u) {`);
    L.push('          workgroupBarrier();');
    for (const x of puts('', '')) L.push(`          ${x}`);
    L.push('          workgroupBarrier();');
    // The next step's words are in flight while this step multiplies.
    L.push(`          let k1 = k0 + ${BK}u;`);
    L.push(`          if (k1 < ${kr.end}) {`);
    for (const x of loads('k1')) L.push(`            ${x}`);
    L.push('          }');
    L.push(...multiplies('', ''));
    L.push('        }');
    return L;
  }
  // Two buffers: step k multiplies from buffer ph while the words of step k + 1 go to buffer 1 - ph;
  // the one barrier per step publishes them and retires buffer ph for step k + 2's words.
  L.push('        workgroupBarrier();');
  for (const x of puts('', '')) L.push(`        ${x}`);
  L.push('        workgroupBarrier();');
  L.push('        var ph = 0u;');
  L.push(`        for (var k0 = ${kr.begin}; k0 < ${kr.end}; k0 = k0 + ${BK}u) {`);
  L.push(`          let k1 = k0 + ${BK}u;`);
  L.push(`          if (k1 < ${kr.end}) {`);
  for (const x of loads('k1')) L.push(`            ${x}`);
  L.push('          }');
  L.push(`          let ao = ph * ${ZA}u; let bo = ph * ${ZB}u;`);
  L.push(...multiplies('ao + ', 'bo + '));
  L.push(`          if (k1 < ${kr.end}) {`);
  L.push(`            let an = ${ZA}u - ao; let bn = ${ZB}u - bo;`);
  for (const x of puts('an + ', 'bn + ')) L.push(`            ${x}`);
  L.push('          }');
  L.push('          workgroupBarrier();');
  L.push('          ph = 1u - ph;');
  L.push('        }');
  return L;
}

/** The K loop of stages 0: each subgroup's matrices straight from the storage buffers, one K step ahead. */
function directLoop(s: GemmSpec, p: StagedPlan, D: Dialect, accs: readonly string[]): string[] {
  const BK = stagedTileK(p);
  const aRows = s.aMajor === 'k';
  const bRows = s.bMajor === 'n';
  const { left, right, result } = D;
  const L: string[] = [];
  // Matrix loads of K step k0 (slice q of ks) into the variables named by `pre` (element offsets).
  const loads = (k0: string, pre: string): string[] => {
    const out: string[] = [];
    for (let q = 0; q < p.ks; q++) {
      const kq = `${k0} + ${q * p.k}u`;
      for (let j = 0; j < p.tn; j++) {
        const col = `n0 + wn * ${p.tn * p.n}u + ${j * p.n}u`;
        // Right (k rows, n columns): B [k][n] row_major at k * sB + n; [n][k] col_major at n * sB + k.
        out.push(bRows ? `${pre}r${q}_${j} = ${D.load('right', 'b', `oB + (${kq}) * sB + ${col}`, false, 'sB')};` : `${pre}r${q}_${j} = ${D.load('right', 'b', `oB + (${col}) * sB + ${kq}`, true, 'sB')};`);
      }
      for (let i = 0; i < p.tm; i++) {
        const row = `m0 + wm * ${p.tm * p.m}u + ${i * p.m}u`;
        // Left (m rows, k columns): A [m][k] row_major at m * sA + k; [k][m] col_major at k * sA + m.
        out.push(aRows ? `${pre}l${q}_${i} = ${D.load('left', 'a', `oA + (${row}) * sA + ${kq}`, false, 'sA')};` : `${pre}l${q}_${i} = ${D.load('left', 'a', `oA + (${kq}) * sA + ${row}`, true, 'sA')};`);
      }
    }
    return out;
  };
  const names: [string, string][] = [];
  for (let q = 0; q < p.ks; q++) {
    for (let j = 0; j < p.tn; j++) names.push([`r${q}_${j}`, right]);
    for (let i = 0; i < p.tm; i++) names.push([`l${q}_${i}`, left]);
  }
  // cur* hold this step's matrices, nxt* the next step's (loaded before this step's multiplies).
  for (const [n, ty] of names) L.push(`        var cur${n} = ${ty}(); var nxt${n} = ${ty}();`);
  for (const x of loads('0u', 'cur')) L.push(`        ${x}`);
  for (const x of accs) L.push(`        var ${x} = ${result}();`);
  L.push(`        for (var k0 = 0u; k0 < K; k0 = k0 + ${BK}u) {`);
  L.push(`          let k1 = k0 + ${BK}u;`);
  L.push('          if (k1 < K) {');
  for (const x of loads('k1', 'nxt')) L.push(`            ${x}`);
  L.push('          }');
  for (let q = 0; q < p.ks; q++) {
    for (let i = 0; i < p.tm; i++) for (let j = 0; j < p.tn; j++) L.push(`          acc${i}_${j} = ${D.mma(`curl${q}_${i}`, `curr${q}_${j}`, `acc${i}_${j}`)};`);
  }
  for (const [n] of names) L.push(`          cur${n} = nxt${n};`);
  L.push('        }');
  return L;
}
