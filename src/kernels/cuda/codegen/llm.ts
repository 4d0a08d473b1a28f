/**
 * CUDA C emitters of the LLM library kernels (RMSNorm with fused residual add, act-and-mul forward
 * and backward, rotary embeddings). Pure string logic (no GPU needed), so `nvcc -cubin` and the
 * unit tests compile them anywhere. Every kernel reads and writes its storage dtype and computes in
 * the dtype's compute type (float for fp32/fp16/bf16, double for float64).
 *
 * RMSNorm: TPR threads own a row (a warp for short rows, several rows a block; else one block a
 * row). Each thread loads its slice of the row with VEC-wide (16-byte) vector loads into registers
 * (at most MAX_ITEMS vectors), the group sums squares through warp shuffles (and shared memory
 * between warps), and the same registers are scaled and stored: one read and one write of the row.
 * Every load of the row (and, with prefetchWeight, of the weights) is issued before any is used,
 * so a row costs one memory round trip, not one per vector (NormSpec.serialLoads: the old order).
 * Rows longer than TPR * VEC * MAX_ITEMS take a loop path that re-reads the row (from L1/L2).
 * With a residual, the sum x + residual is rounded to the dtype, stored as the new residual, and
 * that rounded value is normalised (vLLM's fused_add_rms_norm).
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs } from './ctypes.js';
import type { GeneratedKernel } from './pointwise.js';

/** Bytes of one vector access: the widest load a thread issues (LDG.128). */
export const VEC_BYTES = 16;
/**
 * Row vectors a thread keeps in registers. 8 keeps a 16-byte-vector row of up to
 * 512 * 8 * VEC elements (16384 fp32, 32768 bf16) in registers as 8 16-byte vectors (32
 * registers) a thread; longer rows take the loop path.
 */
export const MAX_ITEMS = 8;
/**
 * Largest block of the block-per-row mode. 512, not 1024: __launch_bounds__(1024) caps a thread at
 * 64 registers, and 8 row vectors (32 registers) plus addressing spilled under it (ptxas -v).
 */
export const NORM_MAX_BLOCK = 512;
/** Block of the warp-per-row mode: 4 rows a block (one warp each). */
export const WARP_MODE_BLOCK = 128;

export type NormMode = 'plain' | 'addInPlace' | 'addOut';

export interface NormSpec {
  dtype: DType;
  mode: NormMode;
  /**
   * 16-byte vector loads (needs H % VEC == 0, aligned rows) or element loads. Either way thread t
   * owns the same elements (VEC-element chunks t, t + TPR, ...), so the sum of squares is added
   * in the same order and results do not depend on alignment (compiled == eager bit for bit).
   */
  vector: boolean;
  /** true: a warp per row (blockDim WARP_MODE_BLOCK); false: a block per row (blockDim = TPR). */
  warpPerRow: boolean;
  /**
   * Row vectors a thread holds in registers (1..MAX_ITEMS), fixed at compile time so that a
   * kernel allocates only the registers it uses (occupancy); 0: the loop path (longer rows).
   */
  items: number;
  /**
   * Register path: load the row's weight vectors together with the row (before the reduction,
   * their latency hidden behind it; 4 registers a vector more live across the barrier) instead of
   * after it. Off when absent.
   */
  prefetchWeight?: boolean;
  /**
   * Block mode: the block size (threads per row) as a compile-time constant, launched with exactly
   * that many threads. A thread's vectors then sit at constant offsets from one row pointer
   * (immediate-offset loads and stores) instead of one 64-bit address each, which the phased
   * loads would otherwise hold in registers all at once. Absent: blockDim.x (any block size).
   */
  tpr?: number;
  /**
   * With tpr: threads an SM must be able to hold (__launch_bounds__' min blocks = this / tpr,
   * which caps registers a thread at 65536 / this). Without it ptxas spent up to 112-124 registers
   * on the phased kernels (every unpacked value live at once), leaving a quarter of the threads
   * and fewer rows in flight. Absent or 0: no minimum.
   */
  minThreadsPerSm?: number;
  /**
   * Register path, for benchmark comparison only: each vector's load and use under one branch
   * (the emission before the phased loads; see generateNorm). Off when absent.
   */
  serialLoads?: boolean;
  /**
   * Plain mode, register path: while a row is reduced and stored, the thread's vectors of its next
   * row (row + grid stride) are already loading, so a thread keeps two rows in flight and the
   * loads overlap the barrier and the stores. Pays with a grid capped near one wave of resident
   * blocks (every block loops over rows); block mode only, ignored for the residual modes. Off
   * when absent.
   */
  pipelineRows?: boolean;
  /**
   * Register path with the row length compiled in (H elements; vector loads, items > 0, a fixed
   * tpr or a warp per row, and the row fitting tpr * items vectors): the run-time H argument is
   * ignored, the loop path is not emitted, and only the last vector slot of a thread keeps a bounds
   * check (none when the row fills every slot), which frees the registers those took (ptxas -v:
   * fp32 plain at 512 threads went from 64 registers with 24 bytes spilled to 56 without spills).
   * Absent: H at run time. Same elements a thread, same order: results equal the generic kernel's.
   */
  hConst?: number;
  /**
   * Streaming cache hints: the row's loads and stores use ld.global.cs / st.global.cs (evict
   * first; each byte of x, residual and out is touched once), the weights keep the default policy
   * (every row reads them). Vector path only. Off when absent.
   */
  streaming?: boolean;
  /**
   * fp16/bf16: the scale phase converts the row's stored halves to float again (through an asm
   * the compiler cannot merge with the sum phase's conversions) instead of keeping the sum
   * phase's floats live across the barrier; the live row is then its packed vectors (4 registers
   * a vector, not 8). ptxas -v, bf16 plain [.., 4096] at 128 threads: 64 registers unbounded; with
   * this, 48 under a 1280-thread bound without spills (before: 172 bytes spilled at 40). Off when
   * absent; no effect for 4-byte and wider dtypes.
   */
  unpackTwice?: boolean;
}

function lit(v: number, ct: string): string {
  const text = Number.isInteger(v) ? `${v}.0` : `${v}`;
  return ct === 'double' ? text : `${text}f`;
}

/** Element e of a vector as the compute type. */
function ld(d: DType, v: string, ct: 'float' | 'double'): string {
  return loadAs(d, v, ct);
}

/** Whether spec s emits the next-row prefetch (NormSpec.pipelineRows). */
export function pipelined(s: NormSpec): boolean {
  return s.pipelineRows === true && s.mode === 'plain' && !s.warpPerRow && s.items > 0 && s.serialLoads !== true;
}

export function normKernelName(s: NormSpec): string {
  return `kiln_llm_rmsnorm_${s.mode}_${s.dtype}_${s.vector ? 'vec' : 'scalar'}_${s.warpPerRow ? 'warp' : 'block'}_i${s.items}${!s.warpPerRow && s.tpr ? `_t${s.tpr}${s.minThreadsPerSm ? `_m${s.minThreadsPerSm}` : ''}` : ''}${s.prefetchWeight ? '_pw' : ''}${s.serialLoads ? '_serial' : ''}${pipelined(s) ? '_pipe' : ''}${hConstOf(s) ? `_h${hConstOf(s)}` : ''}${s.streaming && s.vector ? '_cs' : ''}${unpacksTwice(s) ? '_u2' : ''}`;
}

/** Whether spec s converts a half row twice (NormSpec.unpackTwice). */
export function unpacksTwice(s: NormSpec): boolean {
  return s.unpackTwice === true && (s.dtype === 'float16' || s.dtype === 'bfloat16');
}

/** The compiled-in row length of spec s (NormSpec.hConst), or 0 when H is a run-time argument. */
export function hConstOf(s: NormSpec): number {
  const h = s.hConst ?? 0;
  if (h <= 0 || !s.vector || s.items <= 0 || s.serialLoads === true) return 0;
  const tpr = s.warpPerRow ? 32 : s.tpr;
  if (tpr === undefined || h % normVec(s.dtype) !== 0 || h / normVec(s.dtype) > tpr * s.items) return 0;
  return h;
}

/**
 * Parameters: out, x, res, resOut, w, rows, H, xStride, resStride, outStride, resOutStride, eps.
 * Row strides are in elements; the last dim is dense. plain: res/resOut unused (0).
 */
export const NORM_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64', 'i64', 'f64'];

/** Elements of `dtype` in one 16-byte vector. */
export function normVec(dtype: DType): number {
  return VEC_BYTES / (storageType(dtype) === 'double' ? 8 : storageType(dtype) === 'float' ? 4 : 2);
}

export function generateNorm(s: NormSpec): GeneratedKernel {
  const T = storageType(s.dtype);
  const ct = computeType(s.dtype) as 'float' | 'double';
  const V = normVec(s.dtype);
  const name = normKernelName(s);
  const hasRes = s.mode !== 'plain';
  const items = Math.max(1, s.items);
  // In place, out aliases x and resOut aliases res: no __restrict__ on those.
  const rx = s.mode === 'addInPlace' ? '' : '__restrict__ ';
  const fixedTpr = !s.warpPerRow && s.tpr !== undefined ? s.tpr : null;
  const block = s.warpPerRow ? WARP_MODE_BLOCK : (fixedTpr ?? NORM_MAX_BLOCK);
  const vt = `kiln_vec<${T}, ${V}>`;
  const hc = hConstOf(s);
  // Streaming hints apply to the row's own data (x, residual, out), never to the shared weights.
  const cs = s.streaming === true && s.vector;
  const storeVec = (base: string, j: string, v: string): string[] =>
    s.vector
      ? [cs ? `kiln_stcs(${base} + (long long)${j} * ${V}, ${v});` : `*reinterpret_cast<${vt}*>(${base} + (long long)${j} * ${V}) = ${v};`]
      : [`#pragma unroll`, `for (int e = 0; e < ${V}; e++) { const int c = ${j} * ${V} + e; if (c < H) ${base}[c] = ${v}.v[e]; }`];
  // Vector j of the row at `base` into `into`; element loads pad past the row's end with zeros
  // (they add nothing to the sum and are not stored).
  const loadVec = (base: string, j: string, into: string): string[] =>
    s.vector
      ? [cs && base !== 'w' ? `${into} = kiln_ldcs<${vt}>(${base} + (long long)${j} * ${V});` : `${into} = *reinterpret_cast<const ${vt}*>(${base} + (long long)${j} * ${V});`]
      : [`#pragma unroll`, `for (int e = 0; e < ${V}; e++) { const int c = ${j} * ${V} + e; ${into}.v[e] = c < H ? ${base}[c] : (${T})0; }`];
  // Adds the squares of loaded vector `xv` (with a residual: of xv + rv rounded to the dtype, kept
  // in `into` and stored as the new residual) to ss. `into` is a storage vector: 16 bytes of
  // registers whatever the dtype.
  const combine = (xv: string, rv: string, into: string, j: string): string[] => {
    const lines: string[] = [];
    for (let e = 0; e < V; e++) {
      if (hasRes) lines.push(`${into}.v[${e}] = ${storeAs(s.dtype, `${ld(s.dtype, `${xv}.v[${e}]`, ct)} + ${ld(s.dtype, `${rv}.v[${e}]`, ct)}`, ct)};`);
      lines.push(`{ const ${ct} q = ${ld(s.dtype, `${into}.v[${e}]`, ct)}; ss += q * q; }`);
    }
    if (hasRes) lines.push(...storeVec('ror', j, into));
    return lines;
  };
  // out = from * inv * w, rounded once to the dtype, for vector j (weights already loaded in wv).
  // The row's halves as float in the scale phase: with unpackTwice through kiln_half_again (the
  // same value; an asm volatile widening the compiler cannot merge with the sum phase's).
  const u2 = unpacksTwice(s);
  const again = (v: string): string => (u2 ? ld(s.dtype, `kiln_half_again(${v})`, ct) : ld(s.dtype, v, ct));
  const scaleStore = (from: string, wv: string, j: string): string[] => {
    const lines = [`${vt} ov;`];
    for (let e = 0; e < V; e++) lines.push(`ov.v[${e}] = ${storeAs(s.dtype, `${again(`${from}.v[${e}]`)} * inv * ${ld(s.dtype, `${wv}.v[${e}]`, ct)}`, ct)};`);
    lines.push(...storeVec('orow', j, 'ov'));
    return lines;
  };
  const ind = (lines: string[], n: number): string => lines.map((l) => ' '.repeat(n) + l).join('\n');
  // Register path, in phases: every load of the row is issued before any of them is used. A load
  // and its use under one `if (j < nvec)` made each vector wait for its own load in turn (the
  // branches keep the compiler from hoisting the later loads), which serialised the row's memory
  // latency: one round trip per vector instead of one per row.
  // With H compiled in, slots below `full` always hold a row vector (tid < tpr): no check there.
  const hcTpr = s.warpPerRow ? 32 : (s.tpr ?? 0);
  const full = hc ? Math.floor(hc / V / hcTpr) : 0;
  const guard = !hc ? 'j < nvec' : full >= items ? 'true' : `it < ${full} || j < nvec`;
  const each = (body: string[]): string => `#pragma unroll
      for (int it = 0; it < ${items}; it++) {
        const int j = tid + it * tpr;
        if (${guard}) {
${ind(body, 10)}
        }
      }`;
  const loadWeights = each(loadVec('w', 'j', 'wv[it]'));
  const rowLoads = hasRes ? [...loadVec('xr', 'j', 'xv[it]'), ...loadVec('rr', 'j', 'rv[it]')] : loadVec('xr', 'j', 'v[it]');
  const rowSums = combine(hasRes ? 'xv[it]' : 'v[it]', 'rv[it]', 'v[it]', 'j');
  const pipe = pipelined(s);
  const nextRow = `{
        const long long nrow = row + (long long)gridDim.x * rowsPerBlock;
        if (nrow < rows) {
          const ${T}* xn = x + nrow * xs;
      ${each(loadVec('xn', 'j', 'nv[it]'))}
        }
        have = true;
      }`;
  const thisRow = pipe
    ? `if (have) {
#pragma unroll
        for (int it = 0; it < ${items}; it++) v[it] = nv[it];
      } else {
      ${each(rowLoads)}
      }
      ${nextRow}`
    : each(rowLoads);
  const regLoad = `${hasRes ? `${vt} xv[${items}], rv[${items}];` : ''}
      ${s.serialLoads ? each([...rowLoads, ...rowSums]) : thisRow}
      ${s.prefetchWeight ? loadWeights : ''}
      ${s.serialLoads ? '' : each(rowSums)}`;
  const regStore = s.serialLoads
    ? each([...(s.prefetchWeight ? [] : loadVec('w', 'j', 'wv[it]')), ...scaleStore('v[it]', 'wv[it]', 'j')])
    : `${s.prefetchWeight ? '' : loadWeights}
      ${each(scaleStore('v[it]', 'wv[it]', 'j'))}`;
  const reduce = s.warpPerRow
    ? `  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);`
    : `  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    // Double-buffered by row parity: the next row's writes cannot race this row's reads, so one
    // barrier a row suffices.
    ${ct}* rb = red[parity];
    parity ^= 1;
    if ((threadIdx.x & 31) == 0) rb[threadIdx.x >> 5] = ss;
    __syncthreads();
    ss = 0;
    ${fixedTpr ? '#pragma unroll\n    ' : ''}for (int i = 0; i < ${fixedTpr ? fixedTpr / 32 : '(int)(blockDim.x >> 5)'}; i++) ss += rb[i];`;
  const helpers = cs
    ? `template <typename V> __device__ __forceinline__ V kiln_ldcs(const void* p) { const int4 r = __ldcs(reinterpret_cast<const int4*>(p)); return *reinterpret_cast<const V*>(&r); }
template <typename V> __device__ __forceinline__ void kiln_stcs(void* p, const V& v) { __stcs(reinterpret_cast<int4*>(p), *reinterpret_cast<const int4*>(&v)); }
`
    : '';
  const halfAgain = u2 ? `__device__ __forceinline__ unsigned short kiln_half_again(unsigned short h) { unsigned short r; asm volatile("mov.b16 %0, %1;" : "=h"(r) : "h"(h)); return r; }
` : '';
  const source = `${PRELUDE}${helpers}${halfAgain}
extern "C" __global__ void __launch_bounds__(${block}${fixedTpr && s.minThreadsPerSm ? `, ${Math.max(1, Math.floor(s.minThreadsPerSm / fixedTpr))}` : ''}) ${name}(
    ${T}* ${rx}out, const ${T}* ${rx}x, const ${T}* ${rx}res, ${T}* ${rx}resOut, const ${T}* __restrict__ w,
    long long rows, int ${hc ? 'hArg' : 'H'}, long long xs, long long rs, long long os, long long ros, double epsD) {
  ${hc ? `const int H = ${hc};` : ''}
  const int tpr = ${s.warpPerRow ? '32' : (fixedTpr ?? 'blockDim.x')};
  const int tid = threadIdx.x % tpr;
  const long long rowsPerBlock = blockDim.x / tpr;
  const int nvec = (H + ${V - 1}) / ${V};
  const ${ct} eps = (${ct})epsD;
  const ${ct} invH = ${lit(1, ct)} / (${ct})H;
  const bool inRegs = ${hc ? 'true' : s.items > 0 ? `nvec <= tpr * ${s.items}` : 'false'};
  ${s.warpPerRow ? '' : `__shared__ ${ct} red[2][32];
  int parity = 0;`}
  ${pipe ? `${vt} nv[${items}];
  bool have = false;` : ''}
  for (long long row = (long long)blockIdx.x * rowsPerBlock + threadIdx.x / tpr; row < rows; row += (long long)gridDim.x * rowsPerBlock) {
    const ${T}* xr = x + row * xs;
    ${hasRes ? `const ${T}* rr = res + row * rs; ${T}* ror = resOut + row * ros;` : ''}
    ${T}* orow = out + row * os;
    ${s.items > 0 ? `${vt} v[${items}], wv[${items}];` : ''}
    ${ct} ss = 0;
    if (inRegs) {
      ${s.items > 0 ? regLoad : ''}
    } else {
      for (int j = tid; j < nvec; j += tpr) {
        ${vt} xv${hasRes ? ', rv' : ''}, t;
${ind([...loadVec('xr', 'j', 'xv'), ...(hasRes ? loadVec('rr', 'j', 'rv') : []), ...combine('xv', 'rv', hasRes ? 't' : 'xv', 'j')], 8)}
      }
    }
  ${reduce}
    const ${ct} inv = ${lit(1, ct)} / ${ct === 'double' ? 'sqrt' : 'sqrtf'}(ss * invH + eps);
    if (inRegs) {
      ${s.items > 0 ? regStore : ''}
    } else {
      // Long rows: read the row again (the sum from resOut, which this thread wrote itself).
      for (int j = tid; j < nvec; j += tpr) {
        ${vt} t, wt;
${ind([...loadVec(hasRes ? 'ror' : 'xr', 'j', 't'), ...loadVec('w', 'j', 'wt'), ...scaleStore('t', 'wt', 'j')], 8)}
      }
    }
  }
}
`;
  return { name, source, params: NORM_PARAMS };
}

// ------------------------------------------------------------------------------------------------
// act-and-mul: out[r, i] = act(x[r, i]) * x[r, d + i]; backward dx = [g b act'(a), g act(a)]
// ------------------------------------------------------------------------------------------------

export type GatedAct = 'silu' | 'gelu' | 'geluTanh';

export interface GatedSpec {
  dtype: DType;
  act: GatedAct;
  vec: number;
  backward: boolean;
}

/** Threads of an act-and-mul block: 8 warps, several blocks per SM; grid x covers a row's vectors. */
export const GATED_BLOCK = 256;

export function gatedKernelName(s: GatedSpec): string {
  return `kiln_llm_${s.act}_and_mul${s.backward ? '_bwd' : ''}_${s.dtype}_v${s.vec}`;
}

/** forward: out, x, rows, d, xs, os; backward: dx, g, x, rows, d, gs, xs, dxs. */
export function gatedParams(backward: boolean): ParamType[] {
  return backward ? ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64'] : ['ptr', 'ptr', 'i64', 'i64', 'i64', 'i64'];
}

/** C statements setting `act` (and `dact` for backward) from `a`, in the compute type. */
function actCode(act: GatedAct, ct: 'float' | 'double', grad: boolean): string {
  const f = (n: string): string => (ct === 'double' ? n : `${n}f`);
  const L = (v: number): string => lit(v, ct);
  switch (act) {
    case 'silu':
      return `const ${ct} sg = ${L(1)} / (${L(1)} + ${f('exp')}(-a)); const ${ct} act = a * sg;${grad ? ` const ${ct} dact = sg * (${L(1)} + a * (${L(1)} - sg));` : ''}`;
    case 'gelu':
      return `const ${ct} cdf = ${L(0.5)} * (${L(1)} + ${f('erf')}(a * ${L(Math.SQRT1_2)})); const ${ct} act = a * cdf;${
        grad ? ` const ${ct} dact = cdf + a * ${f('exp')}(${L(-0.5)} * a * a) * ${L(1 / Math.sqrt(2 * Math.PI))};` : ''
      }`;
    case 'geluTanh': {
      const k = L(Math.sqrt(2 / Math.PI));
      return `const ${ct} th = ${f('tanh')}(${k} * (a + ${L(0.044715)} * a * a * a)); const ${ct} act = ${L(0.5)} * a * (${L(1)} + th);${
        grad ? ` const ${ct} dact = ${L(0.5)} * (${L(1)} + th) + ${L(0.5)} * a * (${L(1)} - th * th) * ${k} * (${L(1)} + ${L(3 * 0.044715)} * a * a);` : ''
      }`;
    }
  }
}

export function generateGated(s: GatedSpec): GeneratedKernel {
  const T = storageType(s.dtype);
  const ct = computeType(s.dtype) as 'float' | 'double';
  const V = s.vec;
  const vt = `kiln_vec<${T}, ${V}>`;
  const name = gatedKernelName(s);
  const loop = `for (long long row = blockIdx.y; row < rows; row += gridDim.y)
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < nvec; j += (long long)gridDim.x * blockDim.x)`;
  const body = s.backward
    ? `{
      const ${T}* xr = x + row * xs;
      const ${vt} av = *reinterpret_cast<const ${vt}*>(xr + j * ${V});
      const ${vt} bv = *reinterpret_cast<const ${vt}*>(xr + d + j * ${V});
      const ${vt} gv = *reinterpret_cast<const ${vt}*>(g + row * gs + j * ${V});
      ${vt} da, db;
#pragma unroll
      for (int e = 0; e < ${V}; e++) {
        const ${ct} a = ${ld(s.dtype, 'av.v[e]', ct)};
        const ${ct} b = ${ld(s.dtype, 'bv.v[e]', ct)};
        const ${ct} gg = ${ld(s.dtype, 'gv.v[e]', ct)};
        ${actCode(s.act, ct, true)}
        da.v[e] = ${storeAs(s.dtype, 'gg * b * dact', ct)};
        db.v[e] = ${storeAs(s.dtype, 'gg * act', ct)};
      }
      ${T}* dr = dx + row * dxs;
      *reinterpret_cast<${vt}*>(dr + j * ${V}) = da;
      *reinterpret_cast<${vt}*>(dr + d + j * ${V}) = db;
    }`
    : `{
      const ${T}* xr = x + row * xs;
      const ${vt} av = *reinterpret_cast<const ${vt}*>(xr + j * ${V});
      const ${vt} bv = *reinterpret_cast<const ${vt}*>(xr + d + j * ${V});
      ${vt} ov;
#pragma unroll
      for (int e = 0; e < ${V}; e++) {
        const ${ct} a = ${ld(s.dtype, 'av.v[e]', ct)};
        ${actCode(s.act, ct, false)}
        ov.v[e] = ${storeAs(s.dtype, `act * ${ld(s.dtype, 'bv.v[e]', ct)}`, ct)};
      }
      *reinterpret_cast<${vt}*>(out + row * os + j * ${V}) = ov;
    }`;
  const sig = s.backward
    ? `${T}* __restrict__ dx, const ${T}* __restrict__ g, const ${T}* __restrict__ x, long long rows, long long d, long long gs, long long xs, long long dxs`
    : `${T}* __restrict__ out, const ${T}* __restrict__ x, long long rows, long long d, long long xs, long long os`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${GATED_BLOCK}) ${name}(${sig}) {
  const long long nvec = d / ${V};
  ${loop}
    ${body}
}
`;
  return { name, source, params: gatedParams(s.backward) };
}

// ------------------------------------------------------------------------------------------------
// rotary embedding, in place
// ------------------------------------------------------------------------------------------------

export interface RopeSpec {
  dtype: DType;
  cacheDtype: DType;
  posDtype: 'int32' | 'int64';
  neox: boolean;
  /** Rotary dim / 2 (compile-time: the pair index math divides by it). */
  half: number;
  /** Pairs per thread (neox: VP-wide vectors of each half; gpt-j: 2VP-wide vectors of pairs). */
  vp: number;
}

/** Threads of a rope block (one block per token, looping over heads x pairs). */
export const ROPE_MAX_BLOCK = 256;

export function ropeKernelName(s: RopeSpec): string {
  return `kiln_llm_rope_${s.neox ? 'neox' : 'gptj'}_${s.dtype}_c${s.cacheDtype}_${s.posDtype}_h${s.half}_p${s.vp}`;
}

/** pos, q, k, cache, tokens, qHeads, kHeads, qTokStride, qHeadStride, kTokStride, kHeadStride, cacheStride, maxPos. */
export const ROPE_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i32', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64'];

export function generateRope(s: RopeSpec): GeneratedKernel {
  const T = storageType(s.dtype);
  const C = storageType(s.cacheDtype);
  const P = storageType(s.posDtype);
  const ct = computeType(s.dtype) === 'double' || computeType(s.cacheDtype) === 'double' ? 'double' : 'float';
  const VP = s.vp;
  const H = s.half;
  const name = ropeKernelName(s);
  const groups = H / VP;
  // Per pair k of the thread's VP pairs: element offsets of x1 and x2 within the head.
  const vin = s.neox ? `kiln_vec<${T}, ${VP}>` : `kiln_vec<${T}, ${2 * VP}>`;
  const rot = s.neox
    ? `${vin} a = *reinterpret_cast<const ${vin}*>(hp + e0);
      ${vin} b = *reinterpret_cast<const ${vin}*>(hp + ${H} + e0);
#pragma unroll
      for (int k = 0; k < ${VP}; k++) {
        const ${ct} x1 = ${loadAs(s.dtype, 'a.v[k]', ct)};
        const ${ct} x2 = ${loadAs(s.dtype, 'b.v[k]', ct)};
        const ${ct} c = cs[k], sn = sn_[k];
        a.v[k] = ${storeAs(s.dtype, 'x1 * c - x2 * sn', ct)};
        b.v[k] = ${storeAs(s.dtype, 'x2 * c + x1 * sn', ct)};
      }
      *reinterpret_cast<${vin}*>(hp + e0) = a;
      *reinterpret_cast<${vin}*>(hp + ${H} + e0) = b;`
    : VP === 1
      ? `const ${ct} x1 = ${loadAs(s.dtype, 'hp[2 * e0]', ct)};
      const ${ct} x2 = ${loadAs(s.dtype, 'hp[2 * e0 + 1]', ct)};
      hp[2 * e0] = ${storeAs(s.dtype, 'x1 * cs[0] - x2 * sn_[0]', ct)};
      hp[2 * e0 + 1] = ${storeAs(s.dtype, 'x2 * cs[0] + x1 * sn_[0]', ct)};`
      : `${vin} a = *reinterpret_cast<const ${vin}*>(hp + 2 * e0);
#pragma unroll
      for (int k = 0; k < ${VP}; k++) {
        const ${ct} x1 = ${loadAs(s.dtype, 'a.v[2 * k]', ct)};
        const ${ct} x2 = ${loadAs(s.dtype, 'a.v[2 * k + 1]', ct)};
        const ${ct} c = cs[k], sn = sn_[k];
        a.v[2 * k] = ${storeAs(s.dtype, 'x1 * c - x2 * sn', ct)};
        a.v[2 * k + 1] = ${storeAs(s.dtype, 'x2 * c + x1 * sn', ct)};
      }
      *reinterpret_cast<${vin}*>(hp + 2 * e0) = a;`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${ROPE_MAX_BLOCK}) ${name}(
    const ${P}* __restrict__ pos, ${T}* __restrict__ q, ${T}* __restrict__ kk, const ${C}* __restrict__ cache,
    long long tokens, int qH, int kH, long long qts, long long qhs, long long kts, long long khs, long long ccs, long long maxPos) {
  const int work = (qH + kH) * ${groups};
  for (long long tok = blockIdx.x; tok < tokens; tok += gridDim.x) {
    long long p = (long long)pos[tok];
    // Out-of-range positions (the cpu kernel throws; a device kernel cannot without a sync) give NaN.
    const bool ok = p >= 0 && p < maxPos;
    if (!ok) p = 0;
    const ${C}* crow = cache + p * ccs;
    for (int i = threadIdx.x; i < work; i += blockDim.x) {
      const int h = i / ${groups};
      const int e0 = (i - h * ${groups}) * ${VP};
      ${T}* hp = h < qH ? q + tok * qts + (long long)h * qhs : kk + tok * kts + (long long)(h - qH) * khs;
      ${ct} cs[${VP}], sn_[${VP}];
#pragma unroll
      for (int k = 0; k < ${VP}; k++) {
        cs[k] = ok ? ${loadAs(s.cacheDtype, 'crow[e0 + k]', ct)} : (${ct})KILN_NAN;
        sn_[k] = ok ? ${loadAs(s.cacheDtype, `crow[${H} + e0 + k]`, ct)} : (${ct})KILN_NAN;
      }
      ${rot}
    }
  }
}
`;
  return { name, source, params: ROPE_PARAMS };
}

// ------------------------------------------------------------------------------------------------
// RMSNorm backward: dx by rows, dw by column partials
// ------------------------------------------------------------------------------------------------

/** Threads of the backward row kernel (a block per row) and of the dw column kernel. */
export const NORM_BWD_BLOCK = 256;

export function normBackwardName(dtype: DType): string {
  return `kiln_llm_rmsnorm_bwd_${dtype}`;
}

/** dx, rstd (compute type, [rows]), g, x, w, rows, H, gs, xs, dxs, eps. */
export const NORM_BWD_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64', 'f64'];

/**
 * dx = r (g w) - x r^3 mean(g w x), r = (mean(x^2) + eps)^-1/2, a block per row: one pass sums
 * x^2 and g w x (block reduction of both), a second pass (the row again, from L1/L2) writes dx.
 * r is stored per row for the dw kernel.
 */
export function generateNormBackward(dtype: DType): GeneratedKernel {
  const T = storageType(dtype);
  const ct = computeType(dtype) as 'float' | 'double';
  const name = normBackwardName(dtype);
  const L = (e: string): string => loadAs(dtype, e, ct);
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${NORM_BWD_BLOCK}) ${name}(
    ${T}* __restrict__ dx, ${ct}* __restrict__ rstd, const ${T}* __restrict__ g, const ${T}* __restrict__ x, const ${T}* __restrict__ w,
    long long rows, int H, long long gs, long long xs, long long dxs, double epsD) {
  __shared__ ${ct} red[2][32];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const ${T}* xr = x + row * xs;
    const ${T}* gr = g + row * gs;
    ${ct} ss = 0, dot = 0;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
      const ${ct} xv = ${L('xr[j]')};
      ss += xv * xv;
      dot += ${L('gr[j]')} * ${L('w[j]')} * xv;
    }
    for (int o = 16; o > 0; o >>= 1) { ss += __shfl_xor_sync(0xffffffffu, ss, o); dot += __shfl_xor_sync(0xffffffffu, dot, o); }
    if ((threadIdx.x & 31) == 0) { red[0][threadIdx.x >> 5] = ss; red[1][threadIdx.x >> 5] = dot; }
    __syncthreads();
    ss = 0; dot = 0;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) { ss += red[0][i]; dot += red[1][i]; }
    __syncthreads();
    const ${ct} r = ${lit(1, ct)} / ${ct === 'double' ? 'sqrt' : 'sqrtf'}(ss / (${ct})H + (${ct})epsD);
    const ${ct} m = dot / (${ct})H * r * r * r;
    if (threadIdx.x == 0) rstd[row] = r;
    ${T}* dr = dx + row * dxs;
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
      const ${ct} xv = ${L('xr[j]')};
      dr[j] = ${storeAs(dtype, `${L('gr[j]')} * ${L('w[j]')} * r - xv * m`, ct)};
    }
  }
}
`;
  return { name, source, params: NORM_BWD_PARAMS };
}

export function normDwName(dtype: DType): string {
  return `kiln_llm_rmsnorm_dw_${dtype}`;
}

/** partial ([chunks, H] compute type), g, x, rstd, rows, H, gs, xs. */
export const NORM_DW_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64'];

/** partial[c, j] = sum over rows c, c + chunks, ... of g[r, j] x[r, j] rstd[r] (threads over j: coalesced). */
export function generateNormDw(dtype: DType): GeneratedKernel {
  const T = storageType(dtype);
  const ct = computeType(dtype) as 'float' | 'double';
  const name = normDwName(dtype);
  const L = (e: string): string => loadAs(dtype, e, ct);
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${NORM_BWD_BLOCK}) ${name}(
    ${ct}* __restrict__ partial, const ${T}* __restrict__ g, const ${T}* __restrict__ x, const ${ct}* __restrict__ rstd,
    long long rows, int H, long long gs, long long xs) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= H) return;
  ${ct} acc = 0;
  for (long long r = blockIdx.y; r < rows; r += gridDim.y) acc += ${L('g[r * gs + j]')} * ${L('x[r * xs + j]')} * rstd[r];
  partial[(long long)blockIdx.y * H + j] = acc;
}
`;
  return { name, source, params: NORM_DW_PARAMS };
}
