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
 *   multiplies and stored to workgroup memory after them (one tile buffer, register prefetch), so
 *   global latency overlaps the multiplies.
 * - Each subgroup owns TM x TN result matrices (default 4 x 4 of 16 x 16: a 64 x 64 block); per K
 *   slice it loads TN right matrices once and then one left matrix at a time (TM + TN loads for
 *   TM x TN multiplies). Four subgroups make a 128 x 128 workgroup tile, K steps of 32 (of 16
 *   where the device has only 16 KiB of workgroup memory).
 * - Tiles keep their operand's layout in workgroup memory (row-major A as [m][k], transposed A as
 *   [k][m], and so on), so a word is stored as 8 consecutive float16 and matrices are loaded
 *   row_major or col_major to match; rows are padded by 8 elements against bank conflicts.
 *
 * A word is either wholly inside the operand or wholly outside (zero): the host (linalg.ts:
 * stagedEligible) uses this kernel only when each operand is contiguous along one of its two
 * matrix dims, that dim's extent is a multiple of 8, and its offset, other stride and batch strides
 * are multiples of 8; anything else runs on the first kernel. The epilogue is the first kernel's
 * (each accumulator through the subgroup's f32 scratch; alpha, bias, beta, float16 rounding).
 */
import { GEMM_META, type GemmSpec } from './gemm-codegen.js';
import type { SubgroupMatrixPlan } from './gemm-subgroup-matrix.js';
import { storagePrelude, storeStmt } from './storage.js';

/** float16 elements per 16-byte word. */
const W = 8;
/** Padding (elements) of each workgroup-memory tile row. */
const PAD = 8;

export const stagedTileM = (p: SubgroupMatrixPlan): number => p.sgm * p.tm * p.m;
export const stagedTileN = (p: SubgroupMatrixPlan): number => p.sgn * p.tn * p.n;
const tileK = (p: SubgroupMatrixPlan): number => p.ks * p.k;
const threads = (p: SubgroupMatrixPlan): number => p.sgm * p.sgn * p.sg;

/** Bytes of workgroup memory the staged kernel declares (the padded tiles and the epilogue scratch). */
export function stagedWorkgroupBytes(p: SubgroupMatrixPlan): number {
  const BM = stagedTileM(p);
  const BN = stagedTileN(p);
  const BK = tileK(p);
  // Either layout of a tile pads its rows by PAD: take the larger.
  const a = Math.max(BM * (BK + PAD), BK * (BM + PAD));
  const b = Math.max(BK * (BN + PAD), BN * (BK + PAD));
  return 2 * (a + b) + 4 * p.sgm * p.sgn * p.m * p.n;
}

/**
 * The staged plan for a matrix shape (from the first kernel's plan: its m, n, k and subgroup size),
 * largest first, or null when none fits: every invocation must load whole words, an equal count.
 */
export function planStaged(base: SubgroupMatrixPlan, limits: { maxInvocations: number; maxWorkgroupBytes: number }): SubgroupMatrixPlan | null {
  // K steps of 32 where the workgroup memory allows, else of one matrix K (16 KiB holds 128 x 128 tiles at K 16).
  const deep = Math.max(1, Math.floor(32 / base.k));
  for (const [tm, tn, ks] of [[4, 4, deep], [4, 4, 1], [4, 2, deep], [4, 2, 1], [2, 2, deep], [2, 2, 1]] as const) {
    const p: SubgroupMatrixPlan = { ...base, sgm: 2, sgn: 2, tm, tn, ks };
    const T = threads(p);
    if (T > limits.maxInvocations || stagedWorkgroupBytes(p) > limits.maxWorkgroupBytes) continue;
    if (((stagedTileM(p) * tileK(p)) / W) % T !== 0 || ((tileK(p) * stagedTileN(p)) / W) % T !== 0) continue;
    return p;
  }
  return null;
}

export function stagedKey(s: GemmSpec, p: SubgroupMatrixPlan): string {
  return `smstaged${p.m}x${p.n}x${p.k}.sg${p.sg}.${p.sgm}x${p.sgn}.${p.tm}x${p.tn}.${p.ks},${s.aMajor}${s.bMajor},${s.bias ? 'bias' : ''},${s.beta ? 'beta' : ''}`;
}

/** WGSL of the staged subgroup matrix GEMM for `s` (float16 through shader-f16) on plan `p`. */
export function generateStagedGemm(s: GemmSpec, p: SubgroupMatrixPlan): string {
  if (s.a !== 'f16' || s.b !== 'f16' || s.c !== 'f16') throw new Error(`the subgroup matrix GEMM takes float16 through shader-f16, got ${s.a} x ${s.b} -> ${s.c}`);
  const BM = stagedTileM(p);
  const BN = stagedTileN(p);
  const BK = tileK(p);
  const T = threads(p);
  const MN = p.m * p.n;
  const w = GEMM_META;
  // Tile layouts: A as [m][k] (row-major A) or [k][m]; B as [k][n] (row-major B) or [n][k].
  const aRows = s.aMajor === 'k';
  const bRows = s.bMajor === 'n';
  const SA = aRows ? BK + PAD : BM + PAD;
  const SB = bRows ? BN + PAD : BK + PAD;
  const aWordsPerLine = (aRows ? BK : BM) / W;
  const bWordsPerLine = (bRows ? BN : BK) / W;
  const NA = (BM * BK) / W / T;
  const NB = (BK * BN) / W / T;
  const left = `subgroup_matrix_left<f16, ${p.k}, ${p.m}>`;
  const right = `subgroup_matrix_right<f16, ${p.n}, ${p.k}>`;
  const result = `subgroup_matrix_result<f32, ${p.n}, ${p.m}>`;
  const L: string[] = ['enable f16;', 'enable subgroups;', 'enable chromium_experimental_subgroup_matrix;'];
  L.push('@group(0) @binding(0) var<storage, read_write> c: array<f16>;');
  L.push('@group(0) @binding(1) var<storage, read> a: array<vec4<u32>>;');
  L.push('@group(0) @binding(2) var<storage, read> b: array<vec4<u32>>;');
  if (s.bias) L.push('@group(0) @binding(3) var<storage, read> bias: array<f16>;');
  L.push(`@group(0) @binding(${s.bias ? 4 : 3}) var<storage, read> kmeta: array<u32>;`);
  L.push(storagePrelude(['f16']));
  L.push(`var<workgroup> As: array<f16, ${(aRows ? BM : BK) * SA}>;`);
  L.push(`var<workgroup> Bs: array<f16, ${(bRows ? BK : BN) * SB}>;`);
  L.push(`var<workgroup> Cs: array<f32, ${p.sgm * p.sgn * MN}>;`);
  // A word's 8 float16 to 8 consecutive elements of a tile.
  for (const [name, arr] of [['kiln_put_a', 'As'], ['kiln_put_b', 'Bs']] as const) {
    L.push(`fn ${name}(at: u32, v: vec4<u32>) {`);
    L.push('  let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y); let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);');
    L.push(`  ${arr}[at] = h0.x; ${arr}[at + 1u] = h0.y; ${arr}[at + 2u] = h1.x; ${arr}[at + 3u] = h1.y;`);
    L.push(`  ${arr}[at + 4u] = h2.x; ${arr}[at + 5u] = h2.y; ${arr}[at + 6u] = h3.x; ${arr}[at + 7u] = h3.y;`);
    L.push('}');
  }
  L.push(`@compute @workgroup_size(${T})`);
  L.push('fn main(@builtin(local_invocation_index) tid: u32, @builtin(subgroup_id) sgi: u32, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) ng: vec3u) {');
  L.push(`  let M = kmeta[${w.M}]; let N = kmeta[${w.N}]; let K = kmeta[${w.K}];`);
  L.push(`  let batch = kmeta[${w.batch}]; let tilesN = kmeta[${w.tilesN}]; let tilesM = kmeta[${w.tilesM}];`);
  L.push(`  let bd1 = kmeta[${w.batchSizes + 1}]; let bd2 = kmeta[${w.batchSizes + 2}];`);
  L.push(`  let sCm = kmeta[${w.c + 1}]; let sCn = kmeta[${w.c + 2}];`);
  // The operands' non-contiguous strides, in words (the host checked they are multiples of 8).
  L.push(`  let sA = kmeta[${w.a + (aRows ? 1 : 2)}] / ${W}u; let sB = kmeta[${w.b + (bRows ? 1 : 2)}] / ${W}u;`);
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
    L.push(`    let ${name} = (kmeta[${base}] + c0 * kmeta[${base + 3}] + c1 * kmeta[${base + 4}] + c2 * kmeta[${base + 5}]) / ${W}u;`);
  }
  L.push('    for (var tm = wid.y; tm < tilesM; tm = tm + ng.y) {');
  L.push('      for (var tn = wid.x; tn < tilesN; tn = tn + ng.x) {');
  L.push(`        let m0 = tm * ${BM}u; let n0 = tn * ${BN}u;`);
  // The word loads of K step k0 into registers pa*, pb* (zero outside the operand).
  const loads = (k0: string): string[] => {
    const out: string[] = [];
    for (let i = 0; i < NA; i++) {
      // [m][k]: line = m, word along k; [k][m]: line = k, word along m.
      const [gm, gk] = aRows ? [`m0 + la${i}`, `${k0} + wa${i} * ${W}u`] : [`m0 + wa${i} * ${W}u`, `${k0} + la${i}`];
      const idx = aRows ? `oA + (${gm}) * sA + (${gk}) / ${W}u` : `oA + (${gk}) * sA + (${gm}) / ${W}u`;
      out.push(`if (${gm} < M && ${gk} < K) { pa${i} = a[${idx}]; } else { pa${i} = vec4<u32>(); }`);
    }
    for (let i = 0; i < NB; i++) {
      // [k][n]: line = k, word along n; [n][k]: line = n, word along k.
      const [gk, gn] = bRows ? [`${k0} + lb${i}`, `n0 + wb${i} * ${W}u`] : [`${k0} + wb${i} * ${W}u`, `n0 + lb${i}`];
      const idx = bRows ? `oB + (${gk}) * sB + (${gn}) / ${W}u` : `oB + (${gn}) * sB + (${gk}) / ${W}u`;
      out.push(`if (${gk} < K && ${gn} < N) { pb${i} = b[${idx}]; } else { pb${i} = vec4<u32>(); }`);
    }
    return out;
  };
  for (let i = 0; i < NA; i++) L.push(`        var pa${i}: vec4<u32>;`);
  for (let i = 0; i < NB; i++) L.push(`        var pb${i}: vec4<u32>;`);
  for (const x of loads('0u')) L.push(`        ${x}`);
  const accs: string[] = [];
  for (let i = 0; i < p.tm; i++) for (let j = 0; j < p.tn; j++) accs.push(`acc${i}_${j}`);
  for (const x of accs) L.push(`        var ${x} = ${result}();`);
  L.push(`        for (var k0 = 0u; k0 < K; k0 = k0 + ${BK}u) {`);
  L.push('          workgroupBarrier();');
  for (let i = 0; i < NA; i++) L.push(`          kiln_put_a(la${i} * ${SA}u + wa${i} * ${W}u, pa${i});`);
  for (let i = 0; i < NB; i++) L.push(`          kiln_put_b(lb${i} * ${SB}u + wb${i} * ${W}u, pb${i});`);
  L.push('          workgroupBarrier();');
  // The next step's words are in flight while this step multiplies.
  L.push(`          let k1 = k0 + ${BK}u;`);
  L.push('          if (k1 < K) {');
  for (const x of loads('k1')) L.push(`            ${x}`);
  L.push('          }');
  L.push(`          for (var kk = 0u; kk < ${BK}u; kk = kk + ${p.k}u) {`);
  for (let j = 0; j < p.tn; j++) {
    const col = `wn * ${p.tn * p.n}u + ${j * p.n}u`;
    // Right matrix (k rows, n columns): [k][n] row_major at k * SB + n; [n][k] col_major at n * SB + k.
    L.push(bRows ? `            let r${j} = subgroupMatrixLoad<${right}, row_major>(&Bs, kk * ${SB}u + ${col}, ${SB}u);` : `            let r${j} = subgroupMatrixLoad<${right}, col_major>(&Bs, (${col}) * ${SB}u + kk, ${SB}u);`);
  }
  for (let i = 0; i < p.tm; i++) {
    const row = `wm * ${p.tm * p.m}u + ${i * p.m}u`;
    // Left matrix (m rows, k columns): [m][k] row_major at m * SA + k; [k][m] col_major at k * SA + m.
    L.push(aRows ? `            let l${i} = subgroupMatrixLoad<${left}, row_major>(&As, (${row}) * ${SA}u + kk, ${SA}u);` : `            let l${i} = subgroupMatrixLoad<${left}, col_major>(&As, kk * ${SA}u + ${row}, ${SA}u);`);
    for (let j = 0; j < p.tn; j++) L.push(`            acc${i}_${j} = subgroupMatrixMultiplyAccumulate(l${i}, r${j}, acc${i}_${j});`);
  }
  L.push('          }');
  L.push('        }');
  for (let i = 0; i < p.tm; i++) {
    for (let j = 0; j < p.tn; j++) {
      L.push('        workgroupBarrier();');
      L.push(`        subgroupMatrixStore<row_major>(&Cs, sgi * ${MN}u, acc${i}_${j}, ${p.n}u);`);
      L.push('        workgroupBarrier();');
      L.push(`        for (var e = lane; e < ${MN}u; e = e + ${p.sg}u) {`);
      L.push(`          let gm = m0 + em * ${p.tm * p.m}u + ${i * p.m}u + e / ${p.n}u; let gn = n0 + en * ${p.tn * p.n}u + ${j * p.n}u + e % ${p.n}u;`);
      L.push('          if (gm < M && gn < N) {');
      L.push('            let ic = oC + gm * sCm + gn * sCn;');
      L.push(`            var v = alpha * Cs[es * ${MN}u + e];`);
      if (s.bias) L.push(`            v = v + f32(bias[kmeta[${w.bias}] + gn * kmeta[${w.bias + 1}]]);`);
      if (s.beta) L.push('            v = v + beta * f32(c[ic]);');
      L.push(`            ${storeStmt('f16', 'c', 'ic', 'v')}`);
      L.push('          }');
      L.push('        }');
    }
  }
  L.push('      }');
  L.push('    }');
  L.push('  }');
  L.push('}');
  return L.join('\n');
}
