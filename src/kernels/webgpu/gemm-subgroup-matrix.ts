/**
 * The float16 webgpu GEMM on subgroup matrices (Dawn's experimental `chromium-experimental-subgroup-
 * matrix` feature, WGSL `enable chromium_experimental_subgroup_matrix;`): C = alpha * (A @ B)
 * [+ bias] [+ beta * C] with the metadata of gemm-codegen.ts (GEMM_META: the same sizes, strides,
 * batch dims and epilogue words), so linalg.ts's runGemm picks either kernel for one call.
 *
 * Tiles come from the adapter's subgroup matrix configurations (its `subgroupMatrixConfigs`): the
 * largest shape M x N x K with float16 operands and a float32 result (products accumulated in f32,
 * as the tiled kernel does). A workgroup is SGM x SGN subgroups of the adapter's subgroup size; a
 * subgroup owns TM x TN result matrices, so a workgroup computes a (SGM TM M) x (SGN TN N) tile of C,
 * stepping K by KS * K through two float16 tiles in workgroup memory that every invocation fills
 * (any strides, bounds checked and zero padded, so no matrix load ever leaves its tile). Each step
 * loads TM left and TN right matrices per K slice from workgroup memory (row major) and multiplies
 * them into the accumulators. The epilogue stores one accumulator at a time to the subgroup's f32
 * scratch in workgroup memory, from which its invocations apply alpha, bias and beta and round to
 * float16 with bounds checks.
 *
 * Assumptions, checked by `planSubgroupMatrix` (which returns why not when they fail): the device
 * has shader-f16, subgroups and the feature, the adapter reports a fixed subgroup size (min = max,
 * as on NVIDIA and Apple: the workgroup is exactly SGM x SGN subgroups, found by subgroup_id), Dawn's
 * rule that the workgroup's x size is a multiple of the largest subgroup size, and the workgroup
 * memory fits the device's limit.
 */
import type { AdapterReport, SubgroupMatrixConfig } from '../../runtime/webgpu/protocol.js';
import { GEMM_META, actKey, actStmts, withActPrelude, type GemmSpec } from './gemm-codegen.js';
import { storagePrelude, storeStmt } from './storage.js';

/** Launch geometry of one subgroup matrix GEMM kernel. */
export interface SubgroupMatrixPlan {
  /** The matrix shape (left M x K, right K x N, result M x N). */
  readonly m: number;
  readonly n: number;
  readonly k: number;
  /** Invocations per subgroup. */
  readonly sg: number;
  /** Subgroups along M and N. */
  readonly sgm: number;
  readonly sgn: number;
  /** Result matrices per subgroup along M and N. */
  readonly tm: number;
  readonly tn: number;
  /** K slices per workgroup-memory step. */
  readonly ks: number;
}

export const smTileM = (p: SubgroupMatrixPlan): number => p.sgm * p.tm * p.m;
export const smTileN = (p: SubgroupMatrixPlan): number => p.sgn * p.tn * p.n;
const tileK = (p: SubgroupMatrixPlan): number => p.ks * p.k;
const threads = (p: SubgroupMatrixPlan): number => p.sgm * p.sgn * p.sg;

/** Bytes of workgroup memory the kernel of `p` declares. */
export function smWorkgroupBytes(p: SubgroupMatrixPlan): number {
  return 2 * tileK(p) * (smTileM(p) + smTileN(p)) + 4 * p.sgm * p.sgn * p.m * p.n;
}

/** The float16 x float16 -> float32 configuration with the most work per multiply, or null. */
export function pickConfig(configs: readonly SubgroupMatrixConfig[]): SubgroupMatrixConfig | null {
  let best: SubgroupMatrixConfig | null = null;
  const score = (c: SubgroupMatrixConfig): number => c.M * c.N * c.K * 4 - Math.abs(c.M - c.N);
  for (const c of configs) {
    if (c.componentType !== 'f16' || c.resultComponentType !== 'f32') continue;
    if (best === null || score(c) > score(best)) best = c;
  }
  return best;
}

/** The plan for this adapter, or why there is none. */
export function planSubgroupMatrix(a: Pick<AdapterReport, 'features' | 'limits' | 'subgroupMinSize' | 'subgroupMaxSize' | 'subgroupMatrixConfigs'>): SubgroupMatrixPlan | { reason: string } {
  if (!a.features.includes('chromium-experimental-subgroup-matrix')) return { reason: 'the device has no chromium-experimental-subgroup-matrix' };
  if (!a.features.includes('shader-f16')) return { reason: 'the device has no shader-f16' };
  if (!a.features.includes('subgroups')) return { reason: 'the device has no subgroups' };
  const c = pickConfig(a.subgroupMatrixConfigs ?? []);
  if (c === null) return { reason: `no float16 x float16 -> float32 subgroup matrix configuration (adapter lists ${JSON.stringify(a.subgroupMatrixConfigs ?? [])})` };
  const sg = a.subgroupMaxSize ?? 0;
  if (sg <= 0 || a.subgroupMinSize !== sg) return { reason: `the subgroup size is not fixed (min ${a.subgroupMinSize ?? '?'}, max ${a.subgroupMaxSize ?? '?'})` };
  const maxInv = a.limits.maxComputeInvocationsPerWorkgroup ?? 256;
  const maxX = a.limits.maxComputeWorkgroupSizeX ?? 256;
  const maxMem = a.limits.maxComputeWorkgroupStorageSize ?? 16384;
  // Largest first: 2 x 2 subgroups of 2 x 4 matrices, shrinking until it fits the device.
  for (const [sgm, sgn] of [[2, 2], [2, 1], [1, 1]] as const) {
    if (sgm * sgn * sg > Math.min(maxInv, maxX)) continue;
    for (const [tm, tn] of [[2, 4], [2, 2], [1, 2], [1, 1]] as const) {
      const p: SubgroupMatrixPlan = { m: c.M, n: c.N, k: c.K, sg, sgm, sgn, tm, tn, ks: Math.max(1, Math.floor(32 / c.K)) };
      if (smWorkgroupBytes(p) <= maxMem) return p;
    }
  }
  return { reason: `no subgroup matrix tile fits the device's limits (subgroup size ${sg}, ${maxInv} invocations, ${maxMem} bytes of workgroup memory)` };
}

export function smKey(s: GemmSpec, p: SubgroupMatrixPlan): string {
  return `sm${p.m}x${p.n}x${p.k}.sg${p.sg}.${p.sgm}x${p.sgn}.${p.tm}x${p.tn}.${p.ks},${s.aMajor}${s.bMajor},${s.bias ? 'bias' : ''},${s.beta ? 'beta' : ''}${actKey(s)}`;
}

/** WGSL of the subgroup matrix GEMM for `s` (operands and output float16 through shader-f16) on plan `p`. */
export function generateSubgroupMatrixGemm(s: GemmSpec, p: SubgroupMatrixPlan): string {
  if (s.a !== 'f16' || s.b !== 'f16' || s.c !== 'f16') throw new Error(`the subgroup matrix GEMM takes float16 through shader-f16, got ${s.a} x ${s.b} -> ${s.c}`);
  const BM = smTileM(p);
  const BN = smTileN(p);
  const BK = tileK(p);
  const T = threads(p);
  const MN = p.m * p.n;
  const w = GEMM_META;
  const left = `subgroup_matrix_left<f16, ${p.k}, ${p.m}>`;
  const right = `subgroup_matrix_right<f16, ${p.n}, ${p.k}>`;
  const result = `subgroup_matrix_result<f32, ${p.n}, ${p.m}>`;
  const L: string[] = ['enable f16;', 'enable subgroups;', 'enable chromium_experimental_subgroup_matrix;'];
  L.push('@group(0) @binding(0) var<storage, read_write> c: array<f16>;');
  L.push('@group(0) @binding(1) var<storage, read> a: array<f16>;');
  L.push('@group(0) @binding(2) var<storage, read> b: array<f16>;');
  if (s.bias) L.push('@group(0) @binding(3) var<storage, read> bias: array<f16>;');
  L.push(`@group(0) @binding(${s.bias ? 4 : 3}) var<storage, read> kmeta: array<u32>;`);
  L.push(storagePrelude(['f16']));
  L.push(`var<workgroup> As: array<f16, ${BM * BK}>;`);
  L.push(`var<workgroup> Bs: array<f16, ${BK * BN}>;`);
  L.push(`var<workgroup> Cs: array<f32, ${p.sgm * p.sgn * MN}>;`);
  L.push(`@compute @workgroup_size(${T})`);
  L.push('fn main(@builtin(local_invocation_index) tid: u32, @builtin(subgroup_id) sgi: u32, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) ng: vec3u) {');
  L.push(`  let M = kmeta[${w.M}]; let N = kmeta[${w.N}]; let K = kmeta[${w.K}];`);
  L.push(`  let batch = kmeta[${w.batch}]; let tilesN = kmeta[${w.tilesN}]; let tilesM = kmeta[${w.tilesM}];`);
  L.push(`  let bd1 = kmeta[${w.batchSizes + 1}]; let bd2 = kmeta[${w.batchSizes + 2}];`);
  L.push(`  let sCm = kmeta[${w.c + 1}]; let sCn = kmeta[${w.c + 2}];`);
  L.push(`  let sAm = kmeta[${w.a + 1}]; let sAk = kmeta[${w.a + 2}];`);
  L.push(`  let sBk = kmeta[${w.b + 1}]; let sBn = kmeta[${w.b + 2}];`);
  L.push(`  let alpha = bitcast<f32>(kmeta[${w.alpha}]);`);
  if (s.beta) L.push(`  let beta = bitcast<f32>(kmeta[${w.beta}]);`);
  // The matrix builtins need offsets uniform over the subgroup: subgroup_id gives them. The epilogue
  // reads scratch region es (written by subgroup es) with invocations es * SG .. es * SG + SG - 1.
  L.push(`  let wm = sgi / ${p.sgn}u; let wn = sgi % ${p.sgn}u;`);
  L.push(`  let es = tid / ${p.sg}u; let lane = tid % ${p.sg}u; let em = es / ${p.sgn}u; let en = es % ${p.sgn}u;`);
  L.push('  for (var bz = wid.z; bz < batch; bz = bz + ng.z) {');
  L.push('    let c2 = bz % bd2; let rb = bz / bd2; let c1 = rb % bd1; let c0 = rb / bd1;');
  for (const [name, base] of [['oC', w.c], ['oA', w.a], ['oB', w.b]] as const) {
    L.push(`    let ${name} = kmeta[${base}] + c0 * kmeta[${base + 3}] + c1 * kmeta[${base + 4}] + c2 * kmeta[${base + 5}];`);
  }
  L.push('    for (var tm = wid.y; tm < tilesM; tm = tm + ng.y) {');
  L.push('      for (var tn = wid.x; tn < tilesN; tn = tn + ng.x) {');
  L.push(`        let m0 = tm * ${BM}u; let n0 = tn * ${BN}u;`);
  const accs: string[] = [];
  for (let i = 0; i < p.tm; i++) for (let j = 0; j < p.tn; j++) accs.push(`acc${i}_${j}`);
  for (const x of accs) L.push(`        var ${x} = ${result}();`);
  L.push(`        for (var k0 = 0u; k0 < K; k0 = k0 + ${BK}u) {`);
  L.push('          workgroupBarrier();');
  // A tile [BM, BK] row major; the operand's contiguous dim walks fastest.
  L.push(`          for (var e = tid; e < ${BM * BK}u; e = e + ${T}u) {`);
  L.push(s.aMajor === 'k' ? `            let am = e / ${BK}u; let ak = e % ${BK}u;` : `            let am = e % ${BM}u; let ak = e / ${BM}u;`);
  L.push('            let gm = m0 + am; let gk = k0 + ak;');
  L.push('            var v = f16(0.0);');
  L.push('            if (gm < M && gk < K) { v = a[oA + gm * sAm + gk * sAk]; }');
  L.push(`            As[am * ${BK}u + ak] = v;`);
  L.push('          }');
  // B tile [BK, BN] row major.
  L.push(`          for (var e = tid; e < ${BK * BN}u; e = e + ${T}u) {`);
  L.push(s.bMajor === 'n' ? `            let bn = e % ${BN}u; let bk = e / ${BN}u;` : `            let bn = e / ${BK}u; let bk = e % ${BK}u;`);
  L.push('            let hn = n0 + bn; let hk = k0 + bk;');
  L.push('            var v = f16(0.0);');
  L.push('            if (hn < N && hk < K) { v = b[oB + hk * sBk + hn * sBn]; }');
  L.push(`            Bs[bk * ${BN}u + bn] = v;`);
  L.push('          }');
  L.push('          workgroupBarrier();');
  L.push(`          for (var kk = 0u; kk < ${BK}u; kk = kk + ${p.k}u) {`);
  for (let i = 0; i < p.tm; i++) {
    L.push(`            let l${i} = subgroupMatrixLoad<${left}, row_major>(&As, (wm * ${p.tm * p.m}u + ${i * p.m}u) * ${BK}u + kk, ${BK}u);`);
  }
  for (let j = 0; j < p.tn; j++) {
    L.push(`            let r${j} = subgroupMatrixLoad<${right}, row_major>(&Bs, kk * ${BN}u + wn * ${p.tn * p.n}u + ${j * p.n}u, ${BN}u);`);
  }
  for (let i = 0; i < p.tm; i++) for (let j = 0; j < p.tn; j++) L.push(`            acc${i}_${j} = subgroupMatrixMultiplyAccumulate(l${i}, r${j}, acc${i}_${j});`);
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
      for (const x of actStmts(s)) L.push(`            ${x}`);
      L.push(`            ${storeStmt('f16', 'c', 'ic', 'v')}`);
      L.push('          }');
      L.push('        }');
    }
  }
  L.push('      }');
  L.push('    }');
  L.push('  }');
  L.push('}');
  return withActPrelude(s, L.join('\n'));
}
