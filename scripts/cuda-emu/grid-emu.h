// Host emulation of a persistent CUDA kernel (the decode megakernel's host flavour,
// src/kernels/cuda/codegen/decode-megakernel.ts), for checking its numbers without a GPU
// (test/cuda-megakernel-emu.test.ts). Unlike emu.h, which runs blocks one after another, every
// thread of every block is a live fiber on one host thread, run round robin, because the kernel's
// grid barriers need all blocks at once: a fiber polling the barrier counter yields (ld_acquire in
// the host flavour calls emu_yield), so the others reach it. __syncthreads is a barrier of the
// fiber's block, warp shuffles exchange through a per-warp buffer between two warp barriers, and
// each block has its own shared memory (emu_block_shared). Atomics are plain read-modify-writes:
// fibers switch only at barriers and polls. x86-64 only (the context switch).
// Round robin keeps the blocks nearly in step, which hides a missing wait (a block reading what
// another has not written yet). Defining EMU_LAG (an integer > 1) before including this header
// runs the odd-numbered blocks only every EMU_LAG-th round, so they lag behind the others and
// any such read sees stale data.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)

using std::min;
using std::max;

struct Dim3 { unsigned x = 1, y = 1, z = 1; };
static Dim3 threadIdx, blockIdx, blockDim, gridDim;

struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }

#include "fiber-switch.h"

struct EmuBarrier {
  unsigned count = 0, arrived = 0, generation = 0;
};

struct EmuFiber {
  void* sp = nullptr;
  bool done = false;
  const EmuBarrier* waiting = nullptr;
  unsigned gen = 0;
  unsigned block = 0, thread = 0;
};

static void* emu_sched_sp;
static std::vector<EmuFiber> emu_fibers;
static unsigned emu_cur;
static unsigned emu_block_threads;
static std::vector<EmuBarrier> emu_block_barrier;
static std::vector<EmuBarrier> emu_warp_barrier;
static std::vector<uint64_t> emu_shfl;
static std::vector<unsigned char*> emu_shared;
static const std::function<void()>* emu_body;

inline void emu_yield() { emu_switch(&emu_fibers[emu_cur].sp, emu_sched_sp); }

inline void emu_wait(EmuBarrier& b) {
  const unsigned gen = b.generation;
  if (++b.arrived == b.count) {
    b.arrived = 0;
    b.generation++;
    return;
  }
  emu_fibers[emu_cur].waiting = &b;
  emu_fibers[emu_cur].gen = gen;
  emu_yield();
}

inline void __syncthreads() { emu_wait(emu_block_barrier[blockIdx.x]); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  emu_wait(emu_warp_barrier[blockIdx.x * (emu_block_threads / 32) + (threadIdx.x >> 5)]);
}

template <typename T> inline T __shfl_xor_sync(unsigned, T v, int off) {
  static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
  const unsigned t = threadIdx.x, lane = t & 31;
  const unsigned w = blockIdx.x * (emu_block_threads / 32) + (t >> 5);
  const size_t base = (size_t)blockIdx.x * emu_block_threads;
  std::memcpy(&emu_shfl[base + t], &v, sizeof(T));
  emu_wait(emu_warp_barrier[w]);
  T r;
  std::memcpy(&r, &emu_shfl[base + ((t & ~31u) | (lane ^ (unsigned)off))], sizeof(T));
  emu_wait(emu_warp_barrier[w]);
  return r;
}

template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __ldcg(const T* p) { return *p; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { const unsigned o = *p; *p = o + v; return o; }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v) {
  const unsigned long long o = *p;
  if (o == cmp) *p = v;
  return o;
}
inline void __threadfence() {}
inline void __threadfence_system() {}
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }

/** This fiber's block's shared memory (static struct first, dynamic after it). */
inline unsigned char* emu_block_shared() { return emu_shared[blockIdx.x]; }

/** A device pointer argument: converts to whatever pointer type the kernel parameter has. */
struct AnyPtr {
  void* p;
  template <typename T> operator T*() const { return static_cast<T*>(p); }
};

[[noreturn]] static void emu_grid_trampoline() {
  (*emu_body)();
  emu_fibers[emu_cur].done = true;
  void* dead;
  emu_switch(&dead, emu_sched_sp);
  __builtin_unreachable();
}

/** Runs `body` (one CUDA thread's call of the kernel) over `grid` blocks of `block` threads, all live at once. */
inline void emu_grid_launch(unsigned grid, unsigned block, size_t sharedBytes, const std::function<void()>& body) {
  static const size_t STACK = 1 << 16;
  const size_t n = (size_t)grid * block;
  // Not zeroed: only the top of each stack is touched, so the resident memory stays small.
  char* base = static_cast<char*>(std::aligned_alloc(64, STACK * n));
  gridDim.x = grid;
  blockDim.x = block;
  emu_body = &body;
  emu_block_threads = block;
  emu_fibers.assign(n, EmuFiber{});
  emu_block_barrier.assign(grid, EmuBarrier{block});
  emu_warp_barrier.assign((size_t)grid * (block / 32), EmuBarrier{32});
  emu_shfl.assign(n, 0);
  std::vector<std::vector<unsigned char>> shared(grid, std::vector<unsigned char>(sharedBytes + 16));
  emu_shared.resize(grid);
  for (unsigned b = 0; b < grid; b++) emu_shared[b] = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(shared[b].data()) + 15) & ~uintptr_t(15));
  for (size_t f = 0; f < n; f++) {
    // A fresh stack that emu_grid_switch "returns" into the trampoline from: the return address,
    // then six zero registers; the slot above keeps the ABI's alignment at the trampoline's entry.
    void** sp = reinterpret_cast<void**>(base + STACK * (f + 1));
    *--sp = nullptr;
    *--sp = reinterpret_cast<void*>(&emu_grid_trampoline);
    for (int r = 0; r < 6; r++) *--sp = nullptr;
    emu_fibers[f].sp = sp;
    emu_fibers[f].block = (unsigned)(f / block);
    emu_fibers[f].thread = (unsigned)(f % block);
  }
  struct Free { char* p; ~Free() { std::free(p); } } freeStacks{base};
  for (size_t alive = n, round = 0; alive > 0; round++) {
    alive = 0;
    bool ran = false;
    for (size_t f = 0; f < n; f++) {
      EmuFiber& fb = emu_fibers[f];
      if (fb.done) continue;
      alive++;
      if (fb.waiting && fb.waiting->generation == fb.gen) continue;
#ifdef EMU_LAG
      // A lagging block's turn is skipped; that counts as progress (it runs in a later round).
      if ((fb.block & 1u) && round % EMU_LAG != 0) { ran = true; continue; }
#endif
      fb.waiting = nullptr;
      emu_cur = (unsigned)f;
      threadIdx.x = fb.thread;
      blockIdx.x = fb.block;
      ran = true;
      emu_switch(&emu_sched_sp, fb.sp);
    }
    if (!ran && alive > 0) {
      std::fprintf(stderr, "grid-emu: deadlock: %zu threads wait at barriers that others never reach\n", alive);
      std::abort();
    }
  }
}
