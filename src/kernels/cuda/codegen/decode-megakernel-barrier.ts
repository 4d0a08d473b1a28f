/**
 * CUDA C of the decode megakernel's grid barrier (decode-megakernel.ts assembles the kernel): the
 * arrival (variant.arrive: a fence and an atomic add, one red.release add, or an acq_rel add whose
 * last arriver raises a flag on a line of its own), the poll (variant.poll: acquire loads, or
 * relaxed loads and one fence), the 'flow' counters' arrival, and the wait with its trace stamp.
 * The choice among forms is made by the MK_ARRIVE / MK_POLL_RELAXED macros of the kernel's
 * prelude; only the host emulation (variant.host) changes the text, with plain C++ stand-ins.
 */

/** The polls' loads on the GPU (acquire and relaxed, gpu scope); bench/cuda-sync-under-load.ts times barriers built on them. */
export const GPU_POLL_LOADS = `static __device__ __forceinline__ unsigned int ld_acquire(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
static __device__ __forceinline__ unsigned int ld_relaxed(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}`;

/** The barrier's source, host: the grid emulator's C++ (no PTX). */
export function megakernelBarrierSource(host: boolean): string {
  return `/**
 * Grid barrier number k (1-based) of this launch, in two halves so the next phase's weight loads
 * are issued between them: arrival (the block's writes made visible, then counted) and the wait.
 * The fence comes before those loads are issued: a fence also waits for the thread's loads in
 * flight (measured: with the loads before it, the barrier took as long as the block's whole
 * prefetch, up to 2.7 us after the o projection).
 */
${
    host
      ? `static inline void red_release_add(unsigned int* p, unsigned int v) { __threadfence(); atomicAdd(p, v); }
static inline unsigned int atom_acq_rel_add(unsigned int* p, unsigned int v) { return atomicAdd(p, v); }
static inline void st_release(unsigned int* p, unsigned int v) { *reinterpret_cast<volatile unsigned int*>(p) = v; }`
      : `static __device__ __forceinline__ void red_release_add(unsigned int* p, unsigned int v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
static __device__ __forceinline__ unsigned int atom_acq_rel_add(unsigned int* p, unsigned int v) {
  unsigned int old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
static __device__ __forceinline__ void st_release(unsigned int* p, unsigned int v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}`
  }
static __device__ __forceinline__ unsigned int grid_arrive(unsigned int* bar, unsigned int k, unsigned int* trace, bool fence = true) {
  __syncthreads();
#if MK_TRACE
  if (threadIdx.x == 0) trace[((long long)k * G + blockIdx.x) * 2] = mk_now();
#endif
  unsigned int old = 0u;
  if (threadIdx.x == 0) {
    // No fence where the block has written nothing since its last one (the caller says).
#if MK_ARRIVE == 2
    // The count's value before this add is used only in grid_wait, after the weights' loads are issued.
    old = atom_acq_rel_add(bar, 1u);
#elif MK_ARRIVE == 1
    if (fence) red_release_add(bar, 1u);
    else atomicAdd(bar, 1u);
#else
    if (fence) __threadfence();
    atomicAdd(bar, 1u);
#endif
  }
  return old;
}
${
    host
      ? `// Host emulation: a poll lets the other fibers run (they are what the barrier waits for).
static inline unsigned int ld_acquire(const unsigned int* p) {
  emu_yield();
  return *reinterpret_cast<const volatile unsigned int*>(p);
}
static inline unsigned int ld_relaxed(const unsigned int* p) { return ld_acquire(p); }
static inline void fence_acq_rel() { __threadfence(); }`
      : `${GPU_POLL_LOADS}
static __device__ __forceinline__ void fence_acq_rel() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }`
  }
/** Thread 0 polls the counter until it reaches target (a block that never comes: reported, and the wait given up); the caller's __syncthreads releases the block. */
static __device__ __forceinline__ void poll_until(const unsigned int* counter, unsigned int target, Shared& sh, unsigned long long* claim, long long* report, long long code, unsigned int k) {
  if (threadIdx.x == 0 && !sh.dead) {
    unsigned int polls = 0;
#if MK_POLL_RELAXED
    while (ld_relaxed(counter) < target) {
#else
    while (ld_acquire(counter) < target) {
#endif
      if (++polls > (1u << 24)) { kiln_report(claim, report, code, (long long)k, (long long)G); sh.dead = 1; break; }
    }
#if MK_POLL_RELAXED
    fence_acq_rel();
#endif
  }
}
/** sync 'flow': the block's writes made visible, then counted on each counter of the mask (bit i: counters[i * SLINE]). */
static __device__ __forceinline__ void flag_arrive(unsigned int* counters, unsigned int mask) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    for (int i = 0; i < 32; i++)
      if ((mask >> i) & 1u) atomicAdd(counters + i * SLINE, 1u);
  }
}
static __device__ __forceinline__ void grid_wait(unsigned int* bar, unsigned int k, unsigned int old, Shared& sh, unsigned long long* claim, long long* report, long long code, unsigned int* trace) {
#if MK_ARRIVE == 2
  // The block that completed the count raises the flag (word 32); the others wait for it.
  if (threadIdx.x == 0 && old == k * G - 1u) st_release(bar + 32, k);
  else poll_until(bar + 32, k, sh, claim, report, code, k);
#else
  (void)old;
  poll_until(bar, k * G, sh, claim, report, code, k);
#endif
#if MK_TRACE
  if (threadIdx.x == 0) trace[((long long)k * G + blockIdx.x) * 2 + 1] = mk_now();
#endif
  __syncthreads();
}

`;
}
