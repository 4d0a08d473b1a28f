/**
 * Scan kernels (cumsum, cumprod) over the last axis of a contiguous [rows, R] problem (rows-run.ts
 * permutes and copies other layouts into that form). The fused-group renderer has no scan, so these
 * stay hand-written; every reduction and row kernel is rendered (reduction.ts, softmax-norm.ts).
 *
 * A group of TPR threads (a warp up to a whole block) owns a row and walks it in tiles of TPR
 * elements: an inclusive scan across the group (warp shuffles, then the warp totals through shared
 * memory), plus the carry of the previous tiles. Accumulation is float for fp32/fp16/bf16, double
 * for float64, long long for integers and bool (PyTorch's int64 result).
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs, type CType } from './ctypes.js';
import type { GeneratedKernel } from './pointwise.js';

export type ScanKind = 'cumsum' | 'cumprod';

export interface ScanSpec {
  kind: ScanKind;
  inDtype: DType;
  outDtype: DType;
  /** Threads per row: 32, 64, 128 or 256. */
  tpr: number;
}

// Every scan kernel runs 256-thread blocks (8 warps); rows per block = 256 / TPR.
export const SCAN_BLOCK = 256;

/** Accumulator type: integers and bool in long long, float64 in double, others in float. */
export function scanAccType(d: DType): CType {
  const ct = computeType(d);
  return ct === 'int' ? 'long long' : ct;
}

/** Threads per row: the smallest power of two from a warp up to a block that covers R. */
export function threadsPerRow(R: number): number {
  return R <= 32 ? 32 : R <= 64 ? 64 : R <= 128 ? 128 : 256;
}

export function scanKernelName(s: ScanSpec): string {
  return `kiln_scan_${s.kind}_${s.inDtype}_${s.outDtype}_${s.tpr}`;
}

/** Parameters of every scan kernel: in, out, rows, R. */
export const SCAN_PARAMS: ParamType[] = ['ptr', 'ptr', 'i64', 'i64'];

export function generateScan(s: ScanSpec): GeneratedKernel {
  if (![32, 64, 128, 256].includes(s.tpr)) throw new Error(`scan codegen: threads per row must be 32, 64, 128 or 256, got ${s.tpr}`);
  const ti = storageType(s.inDtype);
  const to = storageType(s.outDtype);
  const at = scanAccType(s.inDtype);
  const ld = (e: string): string => loadAs(s.inDtype, e, at);
  const st = (e: string): string => storeAs(s.outDtype, e, at);
  const name = scanKernelName(s);
  const gpb = SCAN_BLOCK / s.tpr;
  const id = s.kind === 'cumsum' ? '0' : '1';
  const op = s.kind === 'cumsum' ? '+' : '*';
  const body: string[] = [];
  // The tile loop runs to R (the same for every row) so every thread reaches each __syncthreads.
  body.push(`    ${at} carry = ${id};`);
  body.push(`    for (long long b0 = 0; b0 < R; b0 += ${s.tpr}) {`);
  body.push(`      const long long j = b0 + t;`);
  body.push(`      ${at} v = (active && j < R) ? ${ld('x[j]')} : (${at})${id};`);
  body.push('#pragma unroll');
  body.push(`      for (int o = 1; o < ${Math.min(32, s.tpr)}; o <<= 1) { const ${at} u = __shfl_up_sync(0xffffffffu, v, o); if ((t & 31) >= o) v = v ${op} u; }`);
  if (s.tpr > 32) {
    body.push('      __syncthreads();');
    body.push('      if ((threadIdx.x & 31) == 31) smem[threadIdx.x >> 5] = v;');
    body.push('      __syncthreads();');
    body.push(`      { const int wig = t >> 5; const int g0 = (threadIdx.x >> 5) - wig; ${at} pre = ${id}; for (int w = 0; w < wig; w++) pre = pre ${op} smem[g0 + w]; v = v ${op} pre; }`);
  }
  body.push(`      v = v ${op} carry;`);
  body.push(`      if (active && j < R) y[j] = ${st('v')};`);
  body.push('      __syncthreads();');
  body.push(`      if (t == ${s.tpr - 1}) tile[g] = v;`);
  body.push('      __syncthreads();');
  body.push('      carry = tile[g];');
  body.push('    }');
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${SCAN_BLOCK}) ${name}(const ${ti}* __restrict__ in, ${to}* __restrict__ out, long long rows, long long R) {
  __shared__ ${at} smem[${SCAN_BLOCK / 32}];
  __shared__ ${at} tile[${gpb}];
  const int g = threadIdx.x / ${s.tpr};
  const int t = threadIdx.x % ${s.tpr};
  for (long long base = (long long)blockIdx.x * ${gpb}; base < rows; base += (long long)gridDim.x * ${gpb}) {
    const long long row = base + g;
    const bool active = row < rows;
    const ${ti}* __restrict__ x = in + (active ? row : 0) * R;
    ${to}* __restrict__ y = out + (active ? row : 0) * R;
${body.join('\n')}
  }
}
`;
  return { name, source, params: SCAN_PARAMS };
}
