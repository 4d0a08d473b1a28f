/**
 * CUDA C of the decode megakernel's device helpers (decode-megakernel.ts assembles the kernel):
 * the bfloat16 type and roundings, the weight loads (volatile PTX or __ldg: variant.loads), the
 * cp.async copies and the clock (host C++ stand-ins under variant.host, for the grid emulator),
 * the 8-wide dot product, the device-side error report, the block's shared state (struct Shared,
 * checked against megakernelSharedBytes) and, under sync 'flow', the head counters' tables.
 */
import { megakernelSharedBytes, type DecodeMegakernelDims, type DecodeMegakernelVariant, type megakernelHeadFeeds } from './decode-megakernel-plan.js';

/** The helpers' source, from `typedef unsigned short bf_t` to struct Shared; feeds: megakernelHeadFeeds under sync 'flow', else null. */
export function megakernelDeviceSource(d: DecodeMegakernelDims, variant: DecodeMegakernelVariant, feeds: ReturnType<typeof megakernelHeadFeeds> | null): string {
  const host = variant.host === true;
  // Tables of the 'flow' head counters: constant memory on the GPU, plain arrays in the emulator.
  const table = (type: string, nameC: string, values: number[]): string => `${host ? 'static const' : '__constant__'} ${type} ${nameC}[${values.length}] = {${values.map((x) => `${x}u`).join(', ')}};`;
  return `typedef unsigned short bf_t;
${feeds ? `// Per block, the kv heads its q/k/v rows feed (bit g); per kv head, how many blocks feed it.
${table('unsigned int', 'mk_block_heads', feeds.masks)}
${table('unsigned int', 'mk_head_expect', feeds.expect)}` : ''}
#define MK_NEG_INF __int_as_float(0xff800000)

struct LayerPtrs {
  const bf_t* in_norm; const bf_t* wq; const bf_t* wk; const bf_t* wv; const bf_t* q_norm; const bf_t* k_norm;
  const bf_t* wo; const bf_t* post_norm; const bf_t* wg; const bf_t* wu; const bf_t* wd; bf_t* kc; bf_t* vc;
};

static __device__ __forceinline__ float bf(unsigned int h) { return __uint_as_float(h << 16); }
static __device__ __forceinline__ unsigned short tobf(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
static __device__ __forceinline__ float rbf(float f) { return bf(tobf(f)); }
/** DPL (<= 4) bfloat16 values held as floats, packed two to a word (exact: they are bfloat16 values). */
static __device__ __forceinline__ uint2 pack_row(const float* f) {
  unsigned int w[2] = {0u, 0u};
#pragma unroll
  for (int e = 0; e < DPL; e++) w[e >> 1] |= (unsigned int)tobf(f[e]) << ((e & 1) * 16);
  return make_uint2(w[0], w[1]);
}
static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
${
    variant.loads === 'asm' && !host
      ? `// Volatile: issued where written, before the barrier, not sunk to the use after it.
static __device__ __forceinline__ uint4 ldw(const bf_t* p) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
static __device__ __forceinline__ uint2 ldw2(const bf_t* p) {
  uint2 r;
  asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}`
      : `static __device__ __forceinline__ uint4 ldw(const bf_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
static __device__ __forceinline__ uint2 ldw2(const bf_t* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }`
  }
${
    host
      ? `// Host emulation: copies complete at once; the grid emulator's clock does not advance.
static inline void cp_async16(void* smem, const void* gmem) { std::memcpy(smem, gmem, 16); }
static inline void cp_async_kv(void* smem, const void* gmem) { std::memcpy(smem, gmem, ${d.headDim / 32} * 2); }
static inline void cp_async_commit() {}
static inline void cp_async_wait_all() {}
static inline void cp_async_wait_1() {}
static inline unsigned int mk_now() { return 0u; }`
      : `static __device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned int a = (unsigned int)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(a), "l"(gmem) : "memory");
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
/** A lane's DPL elements of a cache row (4 or 8 bytes: cp.async.ca, the sizes under 16 it takes). */
static __device__ __forceinline__ void cp_async_kv(void* smem, const void* gmem) {
  const unsigned int a = (unsigned int)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], ${d.headDim / 32 * 2};" :: "r"(a), "l"(gmem) : "memory");
}
static __device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
/** Waits for every cp.async group of this thread but the newest. */
static __device__ __forceinline__ void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
static __device__ __forceinline__ unsigned int mk_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return (unsigned int)t;
}`
  }
/** 8 weights (one 16-byte word) times 8 floats of x in shared memory. */
static __device__ __forceinline__ float dot8(uint4 w, const float* x) {
  const float4 a = *reinterpret_cast<const float4*>(x);
  const float4 b = *reinterpret_cast<const float4*>(x + 4);
  float s = bf(w.x & 0xffffu) * a.x;
  s = fmaf(bf(w.x >> 16), a.y, s);
  s = fmaf(bf(w.y & 0xffffu), a.z, s);
  s = fmaf(bf(w.y >> 16), a.w, s);
  s = fmaf(bf(w.z & 0xffffu), b.x, s);
  s = fmaf(bf(w.z >> 16), b.y, s);
  s = fmaf(bf(w.w & 0xffffu), b.z, s);
  s = fmaf(bf(w.w >> 16), b.w, s);
  return s;
}

__device__ __forceinline__ void kiln_report(unsigned long long* claim, volatile long long* report, long long code, long long value, long long size) {
  if (atomicCAS(claim, 0ULL, 1ULL) == 0ULL) { report[1] = value; report[2] = size; __threadfence_system(); report[0] = code; }
}

struct Shared {
  float xs[MAXK];
  float red[NW];
  float qk[GQ + 2][D];
  float wm[NW][GQ];
  float wl[NW][GQ];
  float wacc[NW][GQ][D];
  float gp[GPR][NW];
  float pm[NH][S];
  float pl[NH][S];
  float gp2[GPR][NW];
  int kslot[NW][UKV];
  int dead;
};
// megakernelSharedBytes (the host's sizing and limit checks) must cover the struct.
static_assert(sizeof(Shared) <= ${megakernelSharedBytes(d, variant)}, "megakernelSharedBytes undercounts struct Shared");

`;
}
