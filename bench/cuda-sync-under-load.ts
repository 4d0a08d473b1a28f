/**
 * Issue #17: what a grid barrier costs while the weights stream, outside the decode megakernel.
 * The megakernel's traces (docs/cuda.md, sessions 26-36) show every barrier that follows a burst
 * of weight loads waiting about as long as the burst takes to land (2.5-5.5 us after 96-144 KiB
 * per SM), whether the block polls with a load or with a bulk copy, and weights issued earlier
 * making the phases they overlap slower. A schedule that streams the weights continuously (a
 * bounded number of loads in flight, not a burst per phase) only pays if a barrier under such a
 * stream stays near its idle cost while the stream keeps most of the DRAM bandwidth. This bench
 * measures that trade-off with one kernel shaped like the megakernel (one block per SM, 512
 * threads):
 *   - warp 0 (its lane 0) passes R grid barriers in a row (fence, atomic add, acquire polls), the
 *     megakernel's barrier; block 0 stamps %globaltimer before the first and after the last;
 *   - warps 1..15 stream a 1 GiB buffer (each block its own slice, wrapping; far past L2) with D
 *     16-byte loads in flight per lane (a software pipeline: a load is issued as the one D back is
 *     used), until warp 0 is done; they count their loads.
 * Per D (0: no stream; in flight per SM: 15 x 32 x 16 x D bytes), medians over reps of: the
 * barrier's time (R barriers' span / R) and the stream's bandwidth over that span.
 * Then the same with the stream carried by one thread per block (warp 1's lane 0) as bulk copies
 * (cp.async.bulk, sm_90) of C bytes into a ring of 8 shared-memory slots, at most N copies in
 * flight (it waits on the oldest's mbarrier before issuing the next): whether one producer thread
 * a block can keep the DRAM busy at a bounded depth, as a producer-warp megakernel would need.
 *
 * Then the barrier forms (session 39: the megakernel's fence + acquire polls against a release add,
 * relaxed polls, a flag on its own line) at 0, 2, 4 and 8 loads in flight per lane, two passes.
 *
 *   node dist/bench/cuda-sync-under-load.js [--reps 15] [--rounds 400] [--json out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch } from '../src/runtime/cuda/launch.js';
import { ptrOf, streamOf } from '../src/kernels/cuda/device.js';
import { GPU_POLL_LOADS } from '../src/kernels/cuda/codegen/decode-megakernel-barrier.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { median } from '../src/bench/harness.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const reps = Number(flag('--reps') ?? 15);
const rounds = Number(flag('--rounds') ?? 400);
const jsonOut = flag('--json');

const NT = 512;
const grid = deviceInfo(0).smCount;
/** 16-byte words of the streamed buffer (1 GiB) and of each block's slice. */
const WORDS = 64 * 1024 * 1024;
const SLICE = Math.floor(WORDS / grid / 32) * 32;

/** What both kernels share: sizes, the acquire load, and their parameters. */
const PRELUDE = `
#define NT ${NT}
#define G ${grid}
#define SLICE ${SLICE}LL
${GPU_POLL_LOADS}
`;
const PARAMS = 'const uint4* __restrict__ w, unsigned int* bar, unsigned int rounds, unsigned long long* counts, unsigned int* stamps';
/**
 * How a block passes one barrier (issue #17, session 39): 'fence' (the megakernel's default:
 * __threadfence, atomic add, acquire polls); 'release' (one red.release.gpu add, acquire polls);
 * 'relaxed' (the release add, relaxed polls, one fence.acq_rel.gpu after); 'flag' (an acq_rel
 * atomic add whose last arriver stores the round to a flag on its own 128-byte line with a release
 * store; the others poll the flag, so polls and atomics do not share a line).
 */
type BarrierForm = 'fence' | 'release' | 'relaxed' | 'flag';
const FORM_BODY: Record<BarrierForm, string> = {
  fence: '__threadfence(); atomicAdd(bar, 1u); while (ld_acquire(bar) < r * G) {}',
  release: 'asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(bar) : "memory"); while (ld_acquire(bar) < r * G) {}',
  relaxed: 'asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(bar) : "memory"); while (ld_relaxed(bar) < r * G) {} asm volatile("fence.acq_rel.gpu;" ::: "memory");',
  flag: `unsigned int old; asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(bar) : "memory");
      if (old == r * G - 1) asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(bar + 32), "r"(r) : "memory");
      else while (ld_acquire(bar + 32) < r) {}`,
};
/** Thread 0's R grid barriers in a row (the megakernel's, or another form), timed by block 0; then the stream stops. */
const barriers = (form: BarrierForm): string => `
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (unsigned int r = 1; r <= rounds; r++) {
      ${FORM_BODY[form]}
    }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    done = 1;
    if (blockIdx.x == 0) { stamps[0] = (unsigned int)t0; stamps[1] = (unsigned int)t1; }`;
/** The last block out resets the barrier for the next launch. */
const EXIT = `
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(bar + 1, 1u) == G - 1) { bar[0] = 0u; bar[1] = 0u; bar[32] = 0u; __threadfence(); }
  }`;

/** The kernel with D loads in flight per streaming lane (D = 0: warps 1..15 idle). */
function source(name: string, depth: number, form: BarrierForm = 'fence'): string {
  return `${PRELUDE}
#define D ${depth}
static __device__ __forceinline__ uint4 ldw(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
extern "C" __global__ void __launch_bounds__(NT, 1) ${name}(${PARAMS}) {
  __shared__ volatile int done;
  if (threadIdx.x == 0) done = 0;
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {${barriers(form)}
  }
#if D > 0
  else if (warp > 0) {
    // Lane l of streaming warp j reads words j - 1 + 15 * (32 * i + l)... of the block's slice (a
    // warp's 32 loads are one 512-byte span), wrapping at its end, D loads ahead of their use.
    const uint4* base = w + (long long)blockIdx.x * SLICE;
    long long at = (long long)(warp - 1) * 32 + lane;
    const long long step = 15LL * 32;
    uint4 q[D];
    unsigned int acc = 0;
    unsigned long long n = 0;
#pragma unroll
    for (int i = 0; i < D; i++) { q[i] = ldw(base + at); at += step; if (at >= SLICE) at -= SLICE; }
    while (!done) {
#pragma unroll
      for (int i = 0; i < D; i++) {
        acc ^= q[i].x ^ q[i].w;
        q[i] = ldw(base + at);
        at += step;
        if (at >= SLICE) at -= SLICE;
      }
      n += D;
    }
#pragma unroll
    for (int i = 0; i < D; i++) acc ^= q[i].y;
    if (acc == 0x9e3779b9u) counts[G + blockIdx.x] = 1ULL;
    atomicAdd(&counts[blockIdx.x], n);
  }
#endif${EXIT}
}
`;
}

interface Row {
  depth: number;
  kib_in_flight_per_sm: number;
  barrier_us: number;
  stream_tb_s: number;
}

const weight = kiln.zeros([WORDS * 4], { dtype: 'float32', device: 'cuda' });
const bar = kiln.zeros([64], { dtype: 'int32', device: 'cuda' });
const stamps = kiln.zeros([2], { dtype: 'int32', device: 'cuda' });
const stream = streamOf(bar);
const rows: Row[] = [];
/**
 * Medians over reps of a kernel's barrier time and stream bandwidth (each block's count times
 * `bytesPerCount` over the barriers' span), after one untimed launch.
 */
function measure(k: ReturnType<typeof kernelFromSource>, sharedBytes: number, bytesPerCount: number): { barrier_us: number; stream_tb_s: number } {
  const run = (): { barrier: number; tbs: number } => {
    const counts = kiln.zeros([2 * grid], { dtype: 'int64', device: 'cuda' });
    launch(k, [ptrOf(weight), ptrOf(bar), rounds, ptrOf(counts), ptrOf(stamps)], { grid, block: NT, sharedBytes }, stream);
    const st = stamps.to('cpu').toFlatArray() as number[];
    const span = ((st[1]! - st[0]!) | 0) / 1000; // us (the stamps' low 32 bits; a run lasts far less than 4 s)
    const n = (counts.to('cpu').toFlatArray() as number[]).slice(0, grid).reduce((a, b) => a + b, 0);
    counts.dispose();
    return { barrier: span / rounds, tbs: (n * bytesPerCount) / (span * 1e6) };
  };
  run();
  const xs = Array.from({ length: reps }, run);
  return { barrier_us: +median(xs.map((x) => x.barrier)).toFixed(3), stream_tb_s: +median(xs.map((x) => x.tbs)).toFixed(2) };
}
console.log(JSON.stringify({ device: kiln.getAccelerator('cuda').properties(0).name, grid, threads: NT, reps, rounds }));

for (const depth of [0, 1, 2, 4, 8, 12, 16]) {
  const name = `kiln_sync_load_d${depth}`;
  const k = kernelFromSource(0, source(name, depth), name, ['ptr', 'ptr', 'u32', 'ptr', 'ptr']);
  // Every streaming lane adds its own loads: 16 bytes each.
  const row: Row = { depth, kib_in_flight_per_sm: (15 * 32 * 16 * depth) / 1024, ...measure(k, 0, 16) };
  rows.push(row);
  console.log(JSON.stringify(row));
}


/** The barrier forms side by side at a few stream depths, each pair of forms alternating over two passes (drift shows as a gap between the passes). */
interface FormRow {
  form: BarrierForm;
  depth: number;
  pass: number;
  kib_in_flight_per_sm: number;
  barrier_us: number;
  stream_tb_s: number;
}
const formRows: FormRow[] = [];
const FORMS: BarrierForm[] = ['fence', 'release', 'relaxed', 'flag'];
const formKernels = new Map<string, ReturnType<typeof kernelFromSource>>();
for (const pass of [1, 2]) {
  for (const depth of [0, 2, 4, 8]) {
    for (const form of FORMS) {
      const name = `kiln_sync_form_${form}_d${depth}`;
      if (!formKernels.has(name)) formKernels.set(name, kernelFromSource(0, source(name, depth, form), name, ['ptr', 'ptr', 'u32', 'ptr', 'ptr']));
      const row: FormRow = { form, depth, pass, kib_in_flight_per_sm: (15 * 32 * 16 * depth) / 1024, ...measure(formKernels.get(name)!, 0, 16) };
      formRows.push(row);
      console.log(JSON.stringify(row));
    }
  }
}


/** The bulk-copy stream: one thread a block, copies of C bytes, N in flight, into 8 slots. */
function tmaSource(name: string, copyBytes: number, inFlight: number): string {
  return `${PRELUDE}
#define C ${copyBytes}
#define NF ${inFlight}
#define R 8
static __device__ __forceinline__ unsigned int smem_u32(const void* p) { return (unsigned int)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ void wait_full(unsigned long long* b, unsigned int parity) {
  unsigned int ok = 0;
  while (!ok) asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }" : "=r"(ok) : "r"(smem_u32(b)), "r"(parity) : "memory");
}
extern "C" __global__ void __launch_bounds__(NT, 1) ${name}(${PARAMS}) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) unsigned long long full[R];
  __shared__ volatile int done;
  if (threadIdx.x == 0) {
    done = 0;
    for (int i = 0; i < R; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&full[i])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {${barriers('fence')}
  } else if (threadIdx.x == 32 && NF > 0) {
    const unsigned char* base = reinterpret_cast<const unsigned char*>(w + (long long)blockIdx.x * SLICE);
    const long long bytes = SLICE * 16;
    long long at = 0;
    unsigned long long q = 0;
    while (!done) {
      // The copy NF back must have landed before this one is issued (its slot is free too: R >= NF).
      if (q >= NF) wait_full(&full[(q - NF) % R], (unsigned int)(((q - NF) / R) & 1));
      const unsigned int b = smem_u32(&full[q % R]);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(C) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" :: "r"(smem_u32(ring + (q % R) * C)), "l"(base + at), "r"(C), "r"(b) : "memory");
      at += C;
      if (at + C > bytes) at = 0;
      q++;
    }
    // Drain: every issued copy lands before the block exits.
    for (unsigned long long k = q > NF ? q - NF : 0; k < q; k++) wait_full(&full[k % R], (unsigned int)((k / R) & 1));
    counts[blockIdx.x] = q;
  }${EXIT}
}
`;
}

interface TmaRow {
  copy_kib: number;
  copies_in_flight: number;
  kib_in_flight_per_sm: number;
  barrier_us: number;
  stream_tb_s: number;
}
const tmaRows: TmaRow[] = [];
for (const [copyBytes, inFlight] of [[8192, 1], [8192, 2], [8192, 4], [8192, 8], [16384, 2], [16384, 4], [4096, 8]] as const) {
  const name = `kiln_sync_tma_c${copyBytes}_n${inFlight}`;
  const k = kernelFromSource(0, tmaSource(name, copyBytes, inFlight), name, ['ptr', 'ptr', 'u32', 'ptr', 'ptr'], [], 8 * copyBytes);
  const row: TmaRow = { copy_kib: copyBytes / 1024, copies_in_flight: inFlight, kib_in_flight_per_sm: (copyBytes * inFlight) / 1024, ...measure(k, 8 * copyBytes, copyBytes) };
  tmaRows.push(row);
  console.log(JSON.stringify(row));
}

console.log('\nloads in flight per lane  KiB per SM  barrier us  stream TB/s');
for (const r of rows) console.log(`${String(r.depth).padStart(24)} ${r.kib_in_flight_per_sm.toFixed(1).padStart(11)} ${r.barrier_us.toFixed(3).padStart(11)} ${r.stream_tb_s.toFixed(2).padStart(12)}`);
console.log('\nbulk copies: KiB a copy  in flight  KiB per SM  barrier us  stream TB/s');
for (const r of tmaRows) console.log(`${String(r.copy_kib).padStart(23)} ${String(r.copies_in_flight).padStart(10)} ${r.kib_in_flight_per_sm.toFixed(1).padStart(11)} ${r.barrier_us.toFixed(3).padStart(11)} ${r.stream_tb_s.toFixed(2).padStart(12)}`);
console.log('\nbarrier form  loads in flight per lane  barrier us (pass 1 / 2)  stream TB/s (pass 1 / 2)');
for (const depth of [0, 2, 4, 8]) {
  for (const form of FORMS) {
    const [a, b] = [1, 2].map((pass) => formRows.find((r) => r.form === form && r.depth === depth && r.pass === pass)!);
    console.log(`${form.padEnd(12)} ${String(depth).padStart(24)} ${`${a.barrier_us.toFixed(3)} / ${b.barrier_us.toFixed(3)}`.padStart(25)} ${`${a.stream_tb_s.toFixed(2)} / ${b.stream_tb_s.toFixed(2)}`.padStart(25)}`);
  }
}
if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify({ meta: { bench: 'cuda-sync-under-load', grid, threads: NT, reps, rounds, date: new Date().toISOString() }, results: rows, bulk: tmaRows, forms: formRows }, null, 1));
