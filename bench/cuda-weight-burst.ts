/**
 * Issue #17: how fast one burst of weight loads reaches the SMs, outside the decode megakernel.
 * The megakernel's traces (docs/cuda.md, session 27) show a phase's weights arriving at ~1.6 TB/s on
 * an H100 whether per-lane loads or TMA bulk copies carry them, about half of the DRAM bandwidth.
 * This bench asks why, with one kernel shaped like a megakernel phase: one block per SM, 512
 * threads, every thread issuing W 16-byte loads (ld.global.nc, volatile so none is sunk) before
 * using any, then summing them; each block stamps %globaltimer at its start and once its sum is
 * done. The burst's time is the last block's end minus the first block's start (median of reps).
 *
 * Layouts of a block's share of the weight (S bytes = grid x 512 x W x 16):
 *   runs:        block b reads one contiguous run of S / grid bytes (the megakernel's: a round's
 *                rows are consecutive), thread t its words t, t + 512, ...;
 *   interleaved: word i of thread t of block b is at (i x grid + b) x 512 + t: at every step the
 *                grid reads one contiguous S / W span.
 * Each layout is timed cold (L2 flushed by a 256 MB read before each rep) and hot (the same burst
 * again right after, its bytes in L2 when S fits), for W = 4, 8, 12 (32, 64, 96 KiB a block:
 * the megakernel's o, q/k/v and gate/up shares). If hot bursts are much faster than cold ones,
 * DRAM (or the way the burst meets it) is the bound, not the SM's load path.
 *
 *   node dist/bench/cuda-weight-burst.js [--reps 30] [--json out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch } from '../src/runtime/cuda/launch.js';
import { ptrOf, streamOf } from '../src/kernels/cuda/device.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { median } from '../src/bench/harness.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const reps = Number(flag('--reps') ?? 30);
const jsonOut = flag('--json');

const NT = 512;
const grid = deviceInfo(0).smCount;

/** The burst kernel for W words a thread in one layout. */
function source(name: string, words: number, interleaved: boolean): string {
  const at = interleaved ? `((long long)(i * G + blockIdx.x) * NT + threadIdx.x)` : `((long long)blockIdx.x * (W * NT) + (long long)i * NT + threadIdx.x)`;
  return `
#define W ${words}
#define NT ${NT}
#define G ${grid}
extern "C" __global__ void __launch_bounds__(NT, 1) ${name}(const uint4* __restrict__ w, float* out, unsigned int* stamps) {
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  uint4 r[W];
#pragma unroll
  for (int i = 0; i < W; i++) {
    const uint4* p = w + ${at};
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r[i].x), "=r"(r[i].y), "=r"(r[i].z), "=r"(r[i].w) : "l"(p));
  }
  unsigned int s = 0;
#pragma unroll
  for (int i = 0; i < W; i++) s += r[i].x ^ r[i].y ^ r[i].z ^ r[i].w;
  __shared__ unsigned int red;
  if (threadIdx.x == 0) red = 0;
  __syncthreads();
  atomicXor(&red, s);
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    out[blockIdx.x] = (float)red;
    // The low 32 bits (ns): a burst lasts microseconds, so differences mod 2^32 are exact.
    stamps[2 * blockIdx.x] = (unsigned int)t0;
    stamps[2 * blockIdx.x + 1] = (unsigned int)t1;
  }
}
`;
}

/** Reads 256 MB so that nothing of the weight stays in L2. */
const FLUSH = `extern "C" __global__ void kiln_burst_flush(const uint4* __restrict__ p, long long n, float* out) {
  unsigned int s = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) { const uint4 v = __ldcg(p + i); s += v.x; }
  if (s == 0x12345678u) out[0] = 1.0f;
}`;

interface Row {
  layout: string;
  words: number;
  kib_per_block: number;
  mb: number;
  cache: 'cold' | 'hot';
  burst_us: number;
  tb_s: number;
  block_median_us: number;
}

const flushBuf = kiln.empty([64 * 1024 * 1024], { dtype: 'float32', device: 'cuda' });
const out = kiln.empty([grid], { dtype: 'float32', device: 'cuda' });
const stamps = kiln.zeros([grid * 2], { dtype: 'int32', device: 'cuda' });
const stream = streamOf(out);
const flush = kernelFromSource(0, FLUSH, 'kiln_burst_flush', ['ptr', 'i64', 'ptr']);
const rows: Row[] = [];
console.log(JSON.stringify({ device: kiln.getAccelerator('cuda').properties(0).name, grid, threads: NT, reps }));

for (const words of [4, 8, 12]) {
  const bytes = grid * NT * words * 16;
  const weight = kiln.randn([bytes / 4], { dtype: 'float32', device: 'cuda' });
  for (const interleaved of [false, true]) {
    const name = `kiln_burst_${interleaved ? 'il' : 'runs'}_w${words}`;
    const k = kernelFromSource(0, source(name, words, interleaved), name, ['ptr', 'ptr', 'ptr']);
    const run = (): { burst: number; blockMedian: number } => {
      launch(k, [ptrOf(weight), ptrOf(out), ptrOf(stamps)], { grid, block: NT }, stream);
      const raw = stamps.to('cpu').toFlatArray() as number[];
      // Times relative to block 0's start, as signed 32-bit differences (wrap-safe).
      const st = raw.map((x) => (x - raw[0]!) | 0);
      const t0 = Math.min(...st.filter((_, i) => i % 2 === 0));
      const t1 = Math.max(...st.filter((_, i) => i % 2 === 1));
      const per = Array.from({ length: grid }, (_, b) => st[2 * b + 1]! - st[2 * b]!);
      return { burst: (t1 - t0) / 1000, blockMedian: median(per) / 1000 };
    };
    run(); // load the module, warm the clocks
    const cold: { burst: number; blockMedian: number }[] = [];
    const hot: { burst: number; blockMedian: number }[] = [];
    for (let r = 0; r < reps; r++) {
      launch(flush, [ptrOf(flushBuf), (64 * 1024 * 1024) / 4, ptrOf(out)], { grid: grid * 4, block: 256 }, stream);
      cold.push(run());
      hot.push(run());
    }
    for (const [cache, xs] of [['cold', cold], ['hot', hot]] as const) {
      const burst = median(xs.map((x) => x.burst));
      const row: Row = {
        layout: interleaved ? 'interleaved' : 'runs', words, kib_per_block: (NT * words * 16) / 1024, mb: +(bytes / 1e6).toFixed(2), cache,
        burst_us: +burst.toFixed(2), tb_s: +(bytes / burst / 1e6).toFixed(2), block_median_us: +median(xs.map((x) => x.blockMedian)).toFixed(2),
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
  }
  weight.dispose();
}

console.log('\nlayout       KiB/block   MB   cache  burst us  TB/s  block median us');
for (const r of rows) console.log(`${r.layout.padEnd(12)} ${String(r.kib_per_block).padStart(9)} ${r.mb.toFixed(1).padStart(5)} ${r.cache.padEnd(5)} ${r.burst_us.toFixed(2).padStart(9)} ${r.tb_s.toFixed(2).padStart(5)} ${r.block_median_us.toFixed(2).padStart(16)}`);
if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify({ meta: { bench: 'cuda-weight-burst', grid, threads: NT, reps, date: new Date().toISOString() }, results: rows }, null, 1));
