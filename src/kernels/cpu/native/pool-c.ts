/**
 * C source of a small work-sharing thread pool for the native GEMM (gemm-c.ts), in place of an
 * OpenMP parallel region.
 *
 * Why not OpenMP: a parallel region ends in a barrier that every team thread must reach, so the
 * caller waits until the kernel has scheduled each worker, even a worker that finds no work left.
 * On a shared or oversubscribed machine (and right after another runtime's spinning threads, as
 * onnxruntime's in the same process) that wait is milliseconds per region. Here the caller and
 * the workers claim items from one atomic counter; the caller runs every item itself when no
 * worker shows up, and at the end it waits only for workers that joined the job, for the item
 * they are running (work sharing with a graceful fallback to one thread, as onnxruntime's pool).
 *
 * Protocol (one job at a time per shared object; a second concurrent caller runs serially):
 * - publish: job pointer and ++seq under the mutex, then broadcast (sleeping workers wake);
 * - worker: sees seq change (spinning up to POOL_SPIN_NS after the last job closed, then on the
 *   condition variable), increments `active`, re-reads seq (seq_cst both): unchanged means the job is still
 *   open and stays alive until `active` drops, changed means it backs out without touching it;
 * - close: the caller bumps seq (late workers back out), then waits for `active` to reach 0.
 * Workers are started on first use, up to the largest thread count asked (at most POOL_MAX).
 *
 * One pool per process: every object that includes this source (the base GEMM, each compiled GEMM
 * variant, the ops library) first looks up \`kiln_pool_run_shared\`, exported by a tiny object that
 * pool.ts loads with RTLD_GLOBAL, and runs its jobs there; with a pool per object, a compiled
 * block's three GEMM variants and attention each woke their own sleeping worker. Without the
 * shared object (it failed to build or load) each object uses its own copy of the pool.
 *
 * The source is guarded (KILN_POOL_C_SOURCE), so an object composed of several sources that each
 * include it (the cpu decode step, decode-step-c.ts) defines the pool once.
 */

export const POOL_C_SOURCE = String.raw`
#ifndef KILN_POOL_C_SOURCE
#define KILN_POOL_C_SOURCE 1
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <sched.h>
#include <dlfcn.h>

#define POOL_MAX 64
/* How long a worker spins for the next job before sleeping: long enough to catch the next GEMM of
   the same forward pass or the next call (host code in between), short enough not to hold a core
   for long (onnxruntime's workers spin for milliseconds). Measured on 64 x 512 x 512 calls 100 us
   apart, 2 threads: median 0.255 ms with 250 us vs 0.29-0.31 ms with 60 us (the worker had gone
   to sleep and a wake-up costs tens of microseconds in a VM). Loaded machines run one thread
   (threads.ts), so no worker spins there. */
#define POOL_SPIN_NS 250000
/* The longest a worker keeps spinning for an open job's close (a few of mlp-2048x4096's ~1.5 ms
   items); then the POOL_SPIN_NS window applies as after a close. */
#define POOL_OPEN_SPIN_NS 5000000

typedef struct pool_job {
  void (*fn)(void *ctx, int64_t item);
  void *ctx;
  int64_t nitems;
  int32_t max_workers;
  int64_t published_ns;
  int32_t caller_cpu;
  _Atomic int64_t next;
} pool_job;

/* Keeping a worker off the caller's CPU. After an idle gap the caller's broadcast often wakes the
   worker on the caller's own CPU (wake-affine placement), and since it then spins between jobs it
   stays runnable there: caller and worker time-slice one core for whole blocks of calls, 2-3x
   slower than one thread (measured by helper cpuconv on this 2-vCPU VM with sched_getcpu: 109-135
   of 264 worker items on the caller's CPU in a slow block, 0 once the worker had moved; conv-stack
   compiled 1.35x -> 1.10x onnxruntime). A worker that joins a job on the caller's CPU therefore
   narrows its affinity to its original CPUs minus that one, so the scheduler moves it at once; a
   later job re-pins it if the caller has moved onto its CPU. No effect when one CPU is allowed.
   Linux only; the glibc entry points are bound by asm label, since this source is compiled
   without _GNU_SOURCE (and must not clash with a declaration where it is defined). */
#ifdef __linux__
extern int kiln_sched_getcpu(void) __asm__("sched_getcpu");
extern int kiln_sched_getaffinity(int pid, unsigned long n, void *mask) __asm__("sched_getaffinity");
extern int kiln_sched_setaffinity(int pid, unsigned long n, const void *mask) __asm__("sched_setaffinity");
static inline int pool_cpu(void) { return kiln_sched_getcpu(); }
static void pool_leave_cpu(int cpu) {
  static _Thread_local uint64_t allowed[16];
  static _Thread_local int have = 0;
  if (cpu < 0 || cpu >= 1024) return;
  if (!have) {
    if (kiln_sched_getaffinity(0, sizeof allowed, allowed) != 0) return;
    have = 1;
  }
  uint64_t set[16];
  int n = 0;
  for (int q = 0; q < 16; q++) {
    set[q] = allowed[q];
    if (q == cpu / 64) set[q] &= ~((uint64_t)1 << (cpu % 64));
    n += __builtin_popcountll(set[q]);
  }
  if (n > 0) kiln_sched_setaffinity(0, sizeof set, set);
}
#else
static inline int pool_cpu(void) { return -1; }
static void pool_leave_cpu(int cpu) { (void)cpu; }
#endif

/* Counters (kiln_pool_stats): jobs run on the pool, items run by the caller / by workers, workers
   that joined a job, the summed publish-to-join latency, and how often a worker went to sleep.
   Relaxed atomics, a few per job: what the items cost dwarfs them (jobs are >= ~1 MFLOP). */
enum { PS_JOBS, PS_ITEMS_CALLER, PS_ITEMS_WORKERS, PS_JOINS, PS_JOIN_NS, PS_SLEEPS, PS_PF_BYTES, PS_N };
static _Atomic int64_t pool_stats[PS_N];
static inline void pool_count(int q, int64_t v) { atomic_fetch_add_explicit(&pool_stats[q], v, memory_order_relaxed); }

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static pool_job *_Atomic pool_cur = 0;
static _Atomic uint64_t pool_seq = 0;
static _Atomic int32_t pool_active = 0;
static _Atomic int32_t pool_busy = 0;
static int32_t pool_nworkers = 0;

static inline void pool_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static inline int64_t pool_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Runs items until none is left; returns how many this thread ran. */
static int64_t pool_drain(pool_job *j) {
  int64_t done = 0;
  for (;;) {
    int64_t it = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (it >= j->nitems) return done;
    j->fn(j->ctx, it);
    done++;
  }
}

/* Weight prefetch by idle workers (KILN_CPU_WEIGHT_PREFETCH_MB; pf_*). A decode step streams its
   weights from DRAM in the same order every step, with gaps between the GEMVs (the host code that
   issues the next op, the small ops, each call's start and tail) in which DRAM sits idle. The GEMV
   entries note each weight as they start on it (pf_note, on the caller's thread); the first
   repeat of the first weight closes the cycle, after which workers waiting for the next job
   prefetch the weights that come next, up to pf_lookahead bytes past the one being read, so the
   next GEMVs find them in the caches (a large last-level cache holds them) instead of DRAM.
   Prefetch instructions never fault, so a table that outlives its weights (a model freed after a
   step) touches nothing: that is why they are prefetches, not loads. A weight out of order
   starts the learning again from it; lookahead 0 turns it all off. */
#define PF_MAX 1024
#define PF_CHUNK 16384
static const char *pf_p[PF_MAX];
static int64_t pf_b[PF_MAX], pf_start[PF_MAX];
static int32_t pf_n = 0, pf_pos = 0;
static int64_t pf_total = 0, pf_base = 0;
static _Atomic int32_t pf_frozen = 0, pf_lock = 0;
static _Atomic int64_t pf_lookahead = 0, pf_front = 0, pf_next = 0;

static void pf_reset_to(const void *p, int64_t bytes) {
  atomic_store_explicit(&pf_frozen, 0, memory_order_release);
  pf_n = 0;
  if (p && bytes > 0) { pf_p[0] = (const char *)p; pf_b[0] = bytes; pf_n = 1; }
}

static void pf_note_local(const void *p, int64_t bytes) {
  int32_t unlocked = 0;
  if (!atomic_compare_exchange_strong(&pf_lock, &unlocked, 1)) return; /* a concurrent caller: skip */
  if (atomic_load_explicit(&pf_lookahead, memory_order_relaxed) <= 0) {
    if (pf_n) pf_reset_to(0, 0);
  } else if (!atomic_load_explicit(&pf_frozen, memory_order_relaxed)) {
    if (pf_n > 0 && (const char *)p == pf_p[0] && bytes == pf_b[0]) {
      int64_t at = 0;
      for (int32_t i = 0; i < pf_n; i++) { pf_start[i] = at; at += pf_b[i]; }
      pf_total = at;
      pf_base = at; /* this note is weight 0 of the second cycle */
      pf_pos = 0;
      atomic_store(&pf_front, pf_base + pf_b[0]);
      atomic_store(&pf_next, pf_base + pf_b[0]);
      atomic_store_explicit(&pf_frozen, 1, memory_order_release);
    } else if (pf_n < PF_MAX && bytes > 0) {
      pf_p[pf_n] = (const char *)p; pf_b[pf_n] = bytes; pf_n++;
    } else {
      pf_reset_to(p, bytes);
    }
  } else {
    int32_t i = pf_pos + 1 == pf_n ? 0 : pf_pos + 1;
    if ((const char *)p != pf_p[i] || bytes != pf_b[i]) {
      pf_reset_to(p, bytes);
    } else {
      if (i == 0) pf_base += pf_total;
      pf_pos = i;
      atomic_store(&pf_front, pf_base + pf_start[i] + pf_b[i]);
    }
  }
  atomic_store(&pf_lock, 0);
}

/* Prefetches len bytes of the cycle from virtual position pos (wrapping at its end). */
static void pf_touch(int64_t pos, int64_t len) {
  const int32_t n = pf_n;
  const int64_t total = pf_total;
  if (n <= 0 || n > PF_MAX || total <= 0) return;
  int64_t off = pos % total;
  while (len > 0) {
    int32_t lo = 0, hi = n - 1; /* the entry holding off: the last start <= off */
    while (lo < hi) { int32_t mid = (lo + hi + 1) / 2; if (pf_start[mid] <= off) lo = mid; else hi = mid - 1; }
    int64_t in = off - pf_start[lo], take = pf_b[lo] - in;
    if (take <= 0) return; /* a table changing under us: stop */
    if (take > len) take = len;
    const char *a = pf_p[lo] + in;
    for (int64_t q = 0; q < take; q += 64) __builtin_prefetch(a + q, 0, 1);
    len -= take;
    off += take;
    if (off >= total) off = 0;
  }
}

/* One chunk of prefetch work for a waiting worker; returns whether it did (or skipped ahead). */
static int pf_step(void) {
  if (!atomic_load_explicit(&pf_frozen, memory_order_acquire)) return 0;
  const int64_t la = atomic_load_explicit(&pf_lookahead, memory_order_relaxed);
  if (la <= 0) return 0;
  const int64_t front = atomic_load(&pf_front);
  int64_t nx = atomic_load(&pf_next);
  if (nx < front) { atomic_compare_exchange_strong(&pf_next, &nx, front); return 1; }
  if (nx >= front + la) return 0;
  if (!atomic_compare_exchange_strong(&pf_next, &nx, nx + PF_CHUNK)) return 1;
  pf_touch(nx, PF_CHUNK);
  pool_count(PS_PF_BYTES, PF_CHUNK);
  return 1;
}

/* [n, frozen, total, pos, front, next, lookahead] (tests). */
static void pf_state_local(int64_t *out) {
  out[0] = pf_n; out[1] = atomic_load(&pf_frozen); out[2] = pf_total; out[3] = pf_pos;
  out[4] = atomic_load(&pf_front); out[5] = atomic_load(&pf_next); out[6] = atomic_load(&pf_lookahead);
}

static void *pool_worker(void *arg) {
  int32_t id = (int32_t)(intptr_t)arg;
  uint64_t seen = atomic_load(&pool_seq);
  for (;;) {
    uint64_t s = atomic_load(&pool_seq);
    if (s == seen) {
      int64_t start = pool_now_ns(), until = start + POOL_SPIN_NS;
      int n = 0;
      while ((s = atomic_load(&pool_seq)) == seen) {
        if (!pf_step()) pool_relax();
        if ((++n & 63) == 0) {
          int64_t t = pool_now_ns();
          /* While a job is open (this worker ran out of items, the caller or another worker is
             finishing one) the spin window restarts, up to POOL_OPEN_SPIN_NS: the caller's next
             job follows its close. Timing out here meant a futex wake (and on a 2-vCPU VM, 20-40
             us before the worker ran) for the next job of the same forward whenever the last item
             ran longer than the window: measured on mlp-2048x4096 (items of ~1.5 ms), 33 sleeps
             in 40 jobs. The cap and the yields keep a caller that waits for a core (preempted,
             or a real-time thread of the same priority behind this one) from being starved by it. */
          if (atomic_load_explicit(&pool_cur, memory_order_relaxed) && t - start < POOL_OPEN_SPIN_NS) until = t + POOL_SPIN_NS;
          else if (t > until) break;
          if ((n & 1023) == 0) sched_yield();
        }
      }
      if (s == seen) {
        pool_count(PS_SLEEPS, 1);
        pthread_mutex_lock(&pool_mu);
        while ((s = atomic_load(&pool_seq)) == seen) pthread_cond_wait(&pool_cv, &pool_mu);
        pthread_mutex_unlock(&pool_mu);
      }
    }
    seen = s;
    atomic_fetch_add(&pool_active, 1);
    if (atomic_load(&pool_seq) == s) {
      pool_job *j = atomic_load(&pool_cur);
      if (j && id < j->max_workers) {
        int cpu = pool_cpu();
        if (cpu >= 0 && cpu == j->caller_cpu) pool_leave_cpu(cpu);
        /* A join counts when the worker ran an item (it may arrive as the job closes). */
        int64_t late = pool_now_ns() - j->published_ns, done = pool_drain(j);
        if (done > 0) {
          pool_count(PS_JOINS, 1);
          pool_count(PS_JOIN_NS, late);
          pool_count(PS_ITEMS_WORKERS, done);
        }
      }
    }
    atomic_fetch_sub(&pool_active, 1);
  }
  return 0;
}

/* Runs fn(ctx, 0 .. nitems) on the calling thread and up to nthreads - 1 pool workers. */
static void pool_run_local(void (*fn)(void *, int64_t), void *ctx, int64_t nitems, int32_t nthreads) {
  if (nthreads > POOL_MAX) nthreads = POOL_MAX;
  int32_t expect = 0;
  if (nthreads <= 1 || nitems <= 1 || !atomic_compare_exchange_strong(&pool_busy, &expect, 1)) {
    for (int64_t it = 0; it < nitems; it++) fn(ctx, it);
    return;
  }
  while (pool_nworkers < nthreads - 1) {
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, pool_worker, (void *)(intptr_t)pool_nworkers);
    pthread_attr_destroy(&at);
    if (rc != 0) break;
    pool_nworkers++;
  }
  pool_job j;
  j.fn = fn; j.ctx = ctx; j.nitems = nitems; j.max_workers = nthreads - 1;
  atomic_init(&j.next, 0);
  j.published_ns = pool_now_ns();
  j.caller_cpu = pool_cpu();
  pthread_mutex_lock(&pool_mu);
  atomic_store(&pool_cur, &j);
  atomic_fetch_add(&pool_seq, 1);
  pthread_cond_broadcast(&pool_cv);
  pthread_mutex_unlock(&pool_mu);
  pool_count(PS_JOBS, 1);
  pool_count(PS_ITEMS_CALLER, pool_drain(&j));
  atomic_fetch_add(&pool_seq, 1);
  atomic_store(&pool_cur, (pool_job *)0);
  int n = 0;
  while (atomic_load(&pool_active) != 0) {
    pool_relax();
    if ((++n & 1023) == 0) sched_yield();
  }
  atomic_store(&pool_busy, 0);
}

#ifndef KILN_POOL_OBJECT
typedef void (*pool_run_fn)(void (*)(void *, int64_t), void *, int64_t, int32_t);
static pool_run_fn pool_shared = 0;
static void (*pool_pf_note_shared)(const void *, int64_t) = 0;
static void (*pool_pf_config_shared)(int64_t) = 0;
static void (*pool_pf_state_shared)(int64_t *) = 0;
static _Atomic int pool_looked = 0;

/* The process-wide pool when its object is loaded (RTLD_DEFAULT is the null handle on glibc). */
static void pool_lookup(void) {
  if (atomic_load(&pool_looked)) return;
#ifdef RTLD_DEFAULT
  void *h = RTLD_DEFAULT;
#else
  void *h = (void *)0;
#endif
  pool_shared = (pool_run_fn)dlsym(h, "kiln_pool_run_shared");
  pool_pf_note_shared = (void (*)(const void *, int64_t))dlsym(h, "kiln_pool_pf_note_shared");
  pool_pf_config_shared = (void (*)(int64_t))dlsym(h, "kiln_pool_pf_config_shared");
  pool_pf_state_shared = (void (*)(int64_t *))dlsym(h, "kiln_pool_pf_state_shared");
  atomic_store(&pool_looked, 1);
}

static void pool_run(void (*fn)(void *, int64_t), void *ctx, int64_t nitems, int32_t nthreads) {
  if (nthreads <= 1 || nitems <= 1) {
    for (int64_t it = 0; it < nitems; it++) fn(ctx, it);
    return;
  }
  pool_lookup();
  if (pool_shared) pool_shared(fn, ctx, nitems, nthreads);
  else pool_run_local(fn, ctx, nitems, nthreads);
}

/* The weight-prefetch entries (pf_*), on the pool this object's jobs run on. */
static void pool_pf_note(const void *p, int64_t bytes) {
  pool_lookup();
  if (pool_shared && pool_pf_note_shared) pool_pf_note_shared(p, bytes);
  else if (!pool_shared) pf_note_local(p, bytes);
}
/* Sets the prefetch lookahead in bytes (0: off) of the pool this object runs its jobs on. */
void kiln_pool_pf_config(int64_t lookahead) {
  pool_lookup();
  if (pool_shared && pool_pf_config_shared) pool_pf_config_shared(lookahead);
  else if (!pool_shared) atomic_store(&pf_lookahead, lookahead);
}
/* Copies [n, frozen, total, pos, front, next, lookahead] of that pool's prefetch state into out. */
void kiln_pool_pf_state(int64_t *out) {
  pool_lookup();
  if (pool_shared && pool_pf_state_shared) pool_pf_state_shared(out);
  else pf_state_local(out);
}

/* Whether this object runs its jobs on the process-wide pool (for tests and kiln info). */
int32_t kiln_pool_is_shared(void) {
  pool_lookup();
  return pool_shared != 0;
}
#endif
#endif /* KILN_POOL_C_SOURCE */
`;

/** The process-wide pool object (pool.ts loads it with RTLD_GLOBAL): exports only the run entry. */
export const POOL_SHARED_SOURCE = String.raw`
#include <stdint.h>
#include <stdlib.h>
#define KILN_POOL_OBJECT 1
${POOL_C_SOURCE}
void kiln_pool_run_shared(void (*fn)(void *, int64_t), void *ctx, int64_t nitems, int32_t nthreads) {
  pool_run_local(fn, ctx, nitems, nthreads);
}
void kiln_pool_pf_note_shared(const void *p, int64_t bytes) { pf_note_local(p, bytes); }
void kiln_pool_pf_config_shared(int64_t lookahead) { atomic_store(&pf_lookahead, lookahead); }
void kiln_pool_pf_state_shared(int64_t *out) { pf_state_local(out); }
/* Copies the counters (PS_N int64) into out. */
void kiln_pool_stats(int64_t *out) {
  for (int q = 0; q < PS_N; q++) out[q] = atomic_load_explicit(&pool_stats[q], memory_order_relaxed);
}
`;
