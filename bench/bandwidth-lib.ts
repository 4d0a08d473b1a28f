/**
 * The native streaming kernels of the bandwidth benchmarks (bench/cpu-bandwidth.ts, and the bound
 * that bench/decode.ts puts next to cpu decode rates): a float32 read-sum and STREAM's copy / scale /
 * add / triad, built by Kiln's toolchain with its flags (-O3 -march=native -fopenmp), OpenMP threads.
 */
import fs from 'node:fs';
import os from 'node:os';
import { buildSharedObjectSync, hugePageArrayBuffer, loadLibrary, probeToolchain } from '../src/kernels/cpu/native/index.js';

export const BANDWIDTH_C_SOURCE = String.raw`
#include <stdint.h>
#include <omp.h>
typedef float v16 __attribute__((vector_size(64), aligned(4)));
/* Sum of x[0..n): 4 independent 64-byte accumulators keep enough loads in flight. */
double bw_read(const float *x, int64_t n, int32_t nt) {
  double total = 0;
  #pragma omp parallel num_threads(nt) reduction(+:total)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    int64_t lo = (n / 64) * t / T * 64, hi = (n / 64) * (t + 1) / T * 64;
    v16 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    for (int64_t i = lo; i < hi; i += 64) {
      s0 += *(const v16 *)(x + i); s1 += *(const v16 *)(x + i + 16);
      s2 += *(const v16 *)(x + i + 32); s3 += *(const v16 *)(x + i + 48);
    }
    v16 s = s0 + s1 + s2 + s3;
    for (int j = 0; j < 16; j++) total += s[j];
  }
  return total;
}
void bw_copy(float *c, const float *a, int64_t n, int32_t nt) {
  #pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) c[i] = a[i];
}
void bw_scale(float *b, const float *c, int64_t n, int32_t nt) {
  #pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) b[i] = 3.0f * c[i];
}
void bw_add(float *c, const float *a, const float *b, int64_t n, int32_t nt) {
  #pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) c[i] = a[i] + b[i];
}
void bw_triad(float *a, const float *b, const float *c, int64_t n, int32_t nt) {
  #pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
}
`;

export interface BandwidthKernels {
  read(x: Float32Array, n: number, threads: number): number;
  copy(c: Float32Array, a: Float32Array, n: number, threads: number): void;
  scale(b: Float32Array, c: Float32Array, n: number, threads: number): void;
  add(c: Float32Array, a: Float32Array, b: Float32Array, n: number, threads: number): void;
  triad(a: Float32Array, b: Float32Array, c: Float32Array, n: number, threads: number): void;
}

/** The kernels, or a string saying why there are none (no C toolchain). */
export function bandwidthKernels(): BandwidthKernels | string {
  const probe = probeToolchain();
  if (!probe.ok) return probe.reason;
  const lib = loadLibrary(buildSharedObjectSync('kiln_bw', BANDWIDTH_C_SOURCE, probe.toolchain));
  const read = lib.func('double bw_read(void *x, int64_t n, int32_t nt)');
  const copy = lib.func('void bw_copy(void *c, void *a, int64_t n, int32_t nt)');
  const scale = lib.func('void bw_scale(void *b, void *c, int64_t n, int32_t nt)');
  const add = lib.func('void bw_add(void *c, void *a, void *b, int64_t n, int32_t nt)');
  const triad = lib.func('void bw_triad(void *a, void *b, void *c, int64_t n, int32_t nt)');
  return {
    read: (x, n, t) => read(x, n, t) as number,
    copy: (c, a, n, t) => void copy(c, a, n, t),
    scale: (b, c, n, t) => void scale(b, c, n, t),
    add: (c, a, b, n, t) => void add(c, a, b, n, t),
    triad: (a, b, c, n, t) => void triad(a, b, c, n, t),
  };
}

/** The largest cache's size in bytes from Linux's sysfs (cpu0's highest level), or 0 where unknown. */
export function lastLevelCacheBytes(): number {
  let best = 0;
  let level = 0;
  for (let i = 0; i < 8; i++) {
    const dir = `/sys/devices/system/cpu/cpu0/cache/index${i}`;
    try {
      const lv = Number(fs.readFileSync(`${dir}/level`, 'utf8').trim());
      const m = /^(\d+)([KMG]?)/.exec(fs.readFileSync(`${dir}/size`, 'utf8').trim());
      if (!m) continue;
      const bytes = Number(m[1]) * ({ K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[m[2] as 'K' | 'M' | 'G'] ?? 1);
      if (lv > level || (lv === level && bytes > best)) [level, best] = [lv, bytes];
    } catch {
      break;
    }
  }
  return best;
}

/**
 * The probe buffer (MiB) for a DRAM read rate: at least 256 MiB and four times the last-level
 * cache, at most 4 GiB. A decode step streams its weights (1.19 GB for Qwen3-0.6B in bfloat16) in
 * a cycle larger than any cache, so each step reads them from DRAM; a probe that fits the cache
 * reads part of it from there. Session 19 found the H200 host's 16-core VM reports a 300 MiB L3:
 * its 256 MiB probe read 54-130 GB/s from call to call, an inflated, unsteady bound.
 */
export function dramProbeMiB(): number {
  const llc = lastLevelCacheBytes() / (1024 * 1024);
  return Math.min(4096, Math.max(256, Math.ceil((4 * llc) / 64) * 64));
}

/**
 * The probe's buffers of n floats, made once per size and kept: a bench calls the probe every
 * round, and a huge-page mapping is freed only when the garbage collector gets to it, which it
 * does not hurry for memory V8 does not count.
 */
const probeCache = new Map<number, Float32Array[]>();
function probeBuffers(n: number): Float32Array[] {
  let bufs = probeCache.get(n);
  if (!bufs) {
    const huge = hugePageArrayBuffer(4 * n);
    bufs = [new Float32Array(n).fill(1), ...(typeof huge === 'string' ? [] : [new Float32Array(huge).fill(1)])];
    probeCache.set(n, bufs);
  }
  return bufs;
}

/**
 * The median read rate (GB/s) over `reps` passes of a `mib` MiB buffer (default dramProbeMiB()),
 * the best of 1 thread and all cores and of two buffers (interleaved): an ArrayBuffer (4 KiB pages
 * from malloc) and, where the platform has them, a huge-page mapping (kernels/cpu/native/
 * huge-pages.ts, where Qwen3 weights live on the cpu), so the bound is the faster memory's. Null
 * without a toolchain: the in-window bandwidth a decode rate is compared with on a machine whose
 * load changes minute to minute.
 */
export function readBandwidth(mib = dramProbeMiB(), reps = 5): { gbS: number; threads: number; hugePages: boolean } | null {
  const k = bandwidthKernels();
  if (typeof k === 'string') return null;
  const n = (mib * 1024 * 1024) / 4;
  const buffers = probeBuffers(n);
  const counts = [...new Set([1, os.availableParallelism()])];
  const cases = buffers.flatMap((x, b) => counts.map((t) => ({ x, t, huge: b === 1, secs: [] as number[] })));
  for (const c of cases) k.read(c.x, n, c.t);
  for (let r = 0; r < reps; r++) {
    for (const c of cases) {
      const t0 = performance.now();
      k.read(c.x, n, c.t);
      c.secs.push((performance.now() - t0) / 1000);
    }
  }
  const med = (xs: number[]): number => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)]!;
  const rates = cases.map((c) => (4 * n) / med(c.secs) / 1e9);
  const best = rates.indexOf(Math.max(...rates));
  return { gbS: Number(rates[best]!.toFixed(2)), threads: cases[best]!.t, hugePages: cases[best]!.huge };
}
