// Host emulation of the CUDA C subset the fused-group renderer writes, for checking generated
// kernels' numbers without a GPU (scripts/cuda-reduce-emu.mjs). Every CUDA thread of a block is a
// fiber on one host thread (a six-register x86-64 context switch), run round robin; blocks run one
// after another. __syncthreads is a block barrier; warp shuffles exchange through a per-block
// buffer between two warp barriers, so every lane of the warp must reach them (the renderer's
// shuffles are warp-uniform). A fiber waiting at a barrier is not resumed until the last one
// arrives. Shared memory: the driver turns `__shared__` arrays into function statics (one block at
// a time makes them the block's) and `extern __shared__` into the global kiln_smem below. The
// prelude's PTX (half conversions, the fast-math approximations) is replaced by host code with the
// same rounding (round to nearest even for the 16-bit floats). x86-64 only (the context switch).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct Dim3 { unsigned x = 1, y = 1, z = 1; };
static Dim3 threadIdx, blockIdx, blockDim, gridDim;

alignas(16) unsigned char kiln_smem[1 << 16];

#include "fiber-switch.h"

struct EmuBarrier;
static void* emu_sched_sp;
static void* emu_sp[1024];
static bool emu_done[1024];
/** The barrier and generation a fiber waits for (null: runnable). */
static const EmuBarrier* emu_waiting[1024];
static unsigned emu_wait_gen[1024];
static unsigned emu_cur;
static const std::function<void()>* emu_body;

inline void emu_yield() { emu_switch(&emu_sp[emu_cur], emu_sched_sp); }

struct EmuBarrier {
  unsigned count = 0, arrived = 0, generation = 0;
  void wait() {
    const unsigned gen = generation;
    if (++arrived == count) {
      arrived = 0;
      generation++;
      return;
    }
    emu_waiting[emu_cur] = this;
    emu_wait_gen[emu_cur] = gen;
    emu_yield();
  }
};
static EmuBarrier emu_block_barrier;
static EmuBarrier emu_warp_barrier[32];
static uint64_t emu_shfl[1024];

inline void __syncthreads() { emu_block_barrier.wait(); }

template <typename T> inline T __shfl_xor_sync(unsigned, T v, int off) {
  static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
  const unsigned t = threadIdx.x, w = t >> 5, lane = t & 31;
  std::memcpy(&emu_shfl[t], &v, sizeof(T));
  emu_warp_barrier[w].wait();
  T r;
  std::memcpy(&r, &emu_shfl[(w << 5) | (lane ^ (unsigned)off)], sizeof(T));
  emu_warp_barrier[w].wait();
  return r;
}

inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
inline float __fdividef(float a, float b) { return a / b; }

// The prelude's PTX helpers, on the host (round to nearest even for the 16-bit floats).
inline float kiln_h2f(unsigned short h) { _Float16 x; std::memcpy(&x, &h, 2); return (float)x; }
inline unsigned short kiln_f2h(float f) { _Float16 x = (_Float16)f; unsigned short h; std::memcpy(&h, &x, 2); return h; }
inline unsigned short kiln_f2bf(float f) {
  unsigned u; std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float kiln_fexp(float x) { return exp2f(x * 1.4426950408889634f); }
inline float kiln_tanh_approx(float x) { return tanhf(x); }
inline float kiln_frcp(float d) { return 1.0f / d; }

/** A device pointer argument: converts to whatever pointer type the kernel parameter has. */
struct AnyPtr {
  void* p;
  template <typename T> operator T*() const { return static_cast<T*>(p); }
};

[[noreturn]] static void emu_trampoline() {
  (*emu_body)();
  emu_done[emu_cur] = true;
  void* dead;
  emu_switch(&dead, emu_sched_sp);
  __builtin_unreachable();
}

/** Runs `body` (one CUDA thread's call of the kernel) over a grid of `grid` blocks of `block` threads. */
inline void emu_launch(unsigned grid, unsigned block, const std::function<void()>& body) {
  static const size_t STACK = 1 << 16;
  static char* stacks = static_cast<char*>(std::aligned_alloc(64, STACK * 1024));
  gridDim.x = grid;
  blockDim.x = block;
  emu_body = &body;
  emu_block_barrier = EmuBarrier{block};
  for (unsigned w = 0; w < 32; w++) emu_warp_barrier[w] = EmuBarrier{32};
  for (unsigned b = 0; b < grid; b++) {
    blockIdx.x = b;
    for (unsigned t = 0; t < block; t++) {
      // A fresh stack that emu_switch "returns" into the trampoline from: the return address, then
      // six zero registers; the slot above keeps the ABI's alignment at the trampoline's entry.
      void** sp = reinterpret_cast<void**>(stacks + STACK * (t + 1));
      *--sp = nullptr;
      *--sp = reinterpret_cast<void*>(&emu_trampoline);
      for (int r = 0; r < 6; r++) *--sp = nullptr;
      emu_sp[t] = sp;
      emu_done[t] = false;
      emu_waiting[t] = nullptr;
    }
    for (unsigned alive = block; alive > 0;) {
      alive = 0;
      bool ran = false;
      for (unsigned t = 0; t < block; t++) {
        if (emu_done[t]) continue;
        alive++;
        // Still waiting: the barrier's generation has not moved on.
        if (emu_waiting[t] && emu_waiting[t]->generation == emu_wait_gen[t]) continue;
        emu_waiting[t] = nullptr;
        emu_cur = t;
        threadIdx.x = t;
        ran = true;
        emu_switch(&emu_sched_sp, emu_sp[t]);
      }
      if (!ran && alive > 0) {
        std::fprintf(stderr, "emu: deadlock in block %u: %u threads wait at barriers that others never reach\n", b, alive);
        std::abort();
      }
    }
  }
}
