/**
 * Programmatic dependent launch (PDL) inside CUDA graphs: what one kernel boundary costs with and
 * without it. Each chain is N dependent launches (every kernel reads what the previous one wrote),
 * captured once into a CUDA graph per variant and replayed many times; the time per replay comes
 * from CUDA events (median), divided by N. Variants (same arithmetic, only the prologue and the
 * launch attribute differ):
 * - plain:          no griddepcontrol at all, cuLaunchKernel (today's Kiln);
 * - wait/normal:    `griddepcontrol.wait` first, launched without the attribute (the prologue's cost);
 * - wait/pdl:       the wait, launched with PROGRAMMATIC_STREAM_SERIALIZATION (implicit trigger at
 *                   each block's exit);
 * - wait+trig/pdl:  wait then `griddepcontrol.launch_dependents` (the next kernel may launch once
 *                   every block of this one has started);
 * - trig+wait/pdl:  the trigger before the wait (launches cascade further ahead);
 * - kiln/pdl:       Kiln's own prologue (runtime/cuda/pdl.ts: trigger first when the grid has at
 *                   most one block per SM, then the wait).
 * - kiln/after-k:   Kiln's prologue with Kiln's default policy: the attribute only on a launch that
 *                   follows a kernel (all the others above get it on every launch).
 * Chains: a 128x1024 bf16 RMS row op (128 blocks), a 4 MiB bf16 pointwise (1024 blocks), a
 * 4 KiB pointwise (1 block: the launch floor), the 4 KiB pointwise with a 4-byte memset before
 * every second kernel (a kernel whose predecessor is not a kernel), and the row op with a
 * cuBLASLt bf16 GEMM [128x1024]@[1024x1024] every 4th node.
 * Every variant's final buffers are compared byte for byte with the plain chain's (a missing wait
 * would show as a race). Last, the host time of one eager launch (no graph) with cuLaunchKernel
 * and with cuLaunchKernelEx + the attribute, since eager Kiln is host-bound.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/cuda-pdl.js [out.json]   (PDL_CHAIN=200, PDL_REPS=101)
 */
import fs from 'node:fs';
import path from 'node:path';
import * as kiln from '../src/index.js';
import { devPtr, type CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { gemm, rowMajorOperand } from '../src/runtime/cuda/cublaslt.js';
import { captureOn, poolStream, type CudaGraphExec } from '../src/runtime/cuda/graph.js';
import { cubinFor } from '../src/runtime/cuda/kernel-cache.js';
import { launch, loadKernel, type CudaKernel, type ParamType } from '../src/runtime/cuda/launch.js';
import { insertPdlPrologue, setPdlEnabled, setPdlPolicy, type PdlPolicy } from '../src/runtime/cuda/pdl.js';
import { driver } from '../src/runtime/cuda/driver.js';
import { CudaEvent, type CudaStream } from '../src/runtime/cuda/stream.js';
import type { DevPtr } from '../src/runtime/cuda/ffi.js';

// 200 nodes: long enough that the graph's own launch (a few us) is under 2% of a replay.
const N = Number(process.env['PDL_CHAIN'] ?? 200);
// Odd, so the median is one measured replay.
const REPS = Number(process.env['PDL_REPS'] ?? 101);
// The GEMM chain puts one cuBLASLt call after every GEMM_EVERY - 1 row ops.
const GEMM_EVERY = 4;

type Mode = 'plain' | 'wait' | 'wait+trig' | 'trig+wait' | 'kiln';
interface Variant {
  label: string;
  mode: Mode;
  pdl: boolean;
  /** Kiln's launch policy while the chain is captured (default 'all'). */
  policy?: PdlPolicy;
}
const VARIANTS: Variant[] = [
  { label: 'plain', mode: 'plain', pdl: false },
  { label: 'wait/normal', mode: 'wait', pdl: false },
  { label: 'wait/pdl', mode: 'wait', pdl: true },
  { label: 'wait+trig/pdl', mode: 'wait+trig', pdl: true },
  { label: 'trig+wait/pdl', mode: 'trig+wait', pdl: true },
  { label: 'kiln/pdl', mode: 'kiln', pdl: true },
  { label: 'kiln/after-k', mode: 'kiln', pdl: true, policy: 'after-kernel' },
];

const WAIT = 'asm volatile("griddepcontrol.wait;" ::: "memory");';
const TRIG = 'asm volatile("griddepcontrol.launch_dependents;" :::);';
// 'kiln' sources are written plain; kernelsFor inserts Kiln's prologue.
const prologue = (m: Mode): string => ({ plain: '', wait: WAIT, 'wait+trig': WAIT + TRIG, 'trig+wait': TRIG + WAIT, kiln: '' })[m];

const BF16 = `
__device__ __forceinline__ float lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ unsigned rne(float f) { unsigned u = __float_as_uint(f); return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; }
__device__ __forceinline__ unsigned pack(float a, float b) { return rne(a) | (rne(b) << 16); }
`;

/** RMS over each 1024-element bf16 row: one block of 128 threads per row, 8 elements per thread. */
const rowSource = (m: Mode): string => `${BF16}
extern "C" __global__ void __launch_bounds__(128) pdl_row(const uint4* __restrict__ x, uint4* __restrict__ y) {
  ${prologue(m)}
  const int t = threadIdx.x;
  const uint4 v = x[blockIdx.x * 128 + t];
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
  float ss = 0.f;
  for (int i = 0; i < 4; i++) ss += lo(w[i]) * lo(w[i]) + hi(w[i]) * hi(w[i]);
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ float part[4];
  if ((t & 31) == 0) part[t >> 5] = ss;
  __syncthreads();
  const float s = rsqrtf((part[0] + part[1] + part[2] + part[3]) * (1.f / 1024.f) + 1e-6f);
  y[blockIdx.x * 128 + t] = make_uint4(pack(lo(w[0]) * s, hi(w[0]) * s), pack(lo(w[1]) * s, hi(w[1]) * s),
                                       pack(lo(w[2]) * s, hi(w[2]) * s), pack(lo(w[3]) * s, hi(w[3]) * s));
}`;

/** y = 0.5 x + 0.25 on n16 16-byte groups of bf16 (256 threads, one group each). */
const pwSource = (m: Mode): string => `${BF16}
extern "C" __global__ void __launch_bounds__(256) pdl_pw(const uint4* __restrict__ x, uint4* __restrict__ y, int n16) {
  ${prologue(m)}
  const int i = blockIdx.x * 256 + threadIdx.x;
  if (i < n16) {
    const uint4 v = x[i];
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    unsigned o[4];
    for (int k = 0; k < 4; k++) o[k] = pack(lo(w[k]) * 0.5f + 0.25f, hi(w[k]) * 0.5f + 0.25f);
    y[i] = make_uint4(o[0], o[1], o[2], o[3]);
  }
}`;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const acc = kiln.getAccelerator('cuda') as CudaAccelerator;
const props = acc.properties(0);
console.log(`device: ${String(props.name)} (${String(props.arch)}), chain ${N}, reps ${REPS}`);
// The variants set the attribute themselves (kernel.pdl); the switch must not veto them.
setPdlEnabled(true);

function randomBf16(n: number, scale: number): Uint8Array {
  const u16 = new Uint16Array(n);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < n; i++) {
    f[0] = (Math.random() * 2 - 1) * scale;
    u16[i] = u[0]! >>> 16;
  }
  return new Uint8Array(u16.buffer);
}

interface Buf {
  t: kiln.Tensor;
  ptr: DevPtr;
  bytes: number;
}
function buffer(elems: number, init?: Uint8Array): Buf {
  const t = kiln.empty([elems], { device: 'cuda', dtype: 'bfloat16' });
  if (init) acc.copyHostToDevice(t.storage.buffer, 0, init);
  return { t, ptr: devPtr(t.storage.buffer), bytes: elems * 2 };
}
function readBytes(b: Buf): Uint8Array {
  const out = new Uint8Array(b.bytes);
  acc.copyDeviceToHost(out, b.t.storage.buffer, 0);
  return out;
}

const ROW_ELEMS = 128 * 1024;
const PW_ELEMS = 2 * 1024 * 1024; // 4 MiB of bf16
const TINY_ELEMS = 2048; // 4 KiB of bf16: one block

interface Chain {
  name: string;
  /** Buffers the chain ping-pongs between (index 0 holds the input). */
  bufs: Buf[];
  init: Uint8Array;
  /** Enqueues the whole chain with this variant's kernel on `stream`. */
  enqueue(k: (src: 'row' | 'pw') => CudaKernel, stream: CudaStream): void;
}

const W = buffer(1024 * 1024, randomBf16(1024 * 1024, 0.05));
const SCRATCH = buffer(8); // what the memset chain clears

/** A chain of N kernels ping-ponging between two buffers of `elems` (the first holds `init`); `step` enqueues one. */
function pingPong(name: string, elems: number, step: (i: number, src: number, dst: number, k: (src: 'row' | 'pw') => CudaKernel, stream: CudaStream) => void): Chain {
  const init = randomBf16(elems, 1);
  const bufs = [buffer(elems, init), buffer(elems)];
  return {
    name,
    bufs,
    init,
    enqueue(k, stream) {
      for (let i = 0; i < N; i++) step(i, bufs[i % 2]!.ptr, bufs[1 - (i % 2)]!.ptr, k, stream);
    },
  };
}

function rowChain(name: string, withGemm: boolean): Chain {
  return pingPong(name, ROW_ELEMS, (i, src, dst, k, stream) => {
    if (withGemm && i % GEMM_EVERY === GEMM_EVERY - 1) {
      gemm(0, stream, {
        dtype: 'bfloat16', m: 128, n: 1024, k: 1024, batch: 1,
        a: rowMajorOperand(src, 128, 1024, 1024, 1, 0)!, b: rowMajorOperand(W.ptr, 1024, 1024, 1024, 1, 0)!,
        d: dst, ldd: 1024, dBatchStride: 0, alpha: 1, beta: 0,
      });
    } else {
      launch(k('row'), [src, dst], { grid: 128, block: 128 }, stream);
    }
  });
}

function pwChain(name: string, elems: number, memsetEvery = 0): Chain {
  const n16 = elems / 8;
  return pingPong(name, elems, (i, src, dst, k, stream) => {
    if (memsetEvery > 0 && i % memsetEvery === 0) {
      driver().cu.cuMemsetD8Async(SCRATCH.ptr, 0, 4, stream.handle);
      stream.lastOpKernel = false; // what Kiln's own memsets do
    }
    launch(k('pw'), [src, dst, n16], { grid: Math.ceil(n16 / 256), block: 256 }, stream);
  });
}

const chains = [rowChain('row 128x1024 bf16', false), pwChain('pointwise 4 MiB bf16', PW_ELEMS), pwChain('pointwise 4 KiB bf16 (1 block)', TINY_ELEMS), pwChain('4 KiB + memset every 2nd', TINY_ELEMS, 2), rowChain(`row + cuBLASLt GEMM every ${GEMM_EVERY}`, true)];

// Loaded directly (not through kernelFromSource, which would add Kiln's own prologue): each
// variant's source and attribute are exactly as described above.
const load = (source: string, name: string, params: ParamType[], pdl: boolean): CudaKernel =>
  loadKernel(0, cubinFor({ source, name, arch: String(props.arch), options: ['--use_fast_math'] }), name, params, 0, pdl);
const kernelsFor = (v: Variant): ((src: 'row' | 'pw') => CudaKernel) => {
  const fix = (src: string): string => (v.mode === 'kiln' ? insertPdlPrologue(src, Number(props.smCount)) : src);
  const row = load(fix(rowSource(v.mode)), 'pdl_row', ['ptr', 'ptr'], v.pdl);
  const pw = load(fix(pwSource(v.mode)), 'pdl_pw', ['ptr', 'ptr', 'i32'], v.pdl);
  return (src) => (src === 'row' ? row : pw);
};

const stream = poolStream(0);
// The GEMM's autotune runs eagerly once (never during a capture), so every graph uses one algorithm.
chains[4]!.enqueue(kernelsFor(VARIANTS[0]!), stream);
stream.synchronize();

interface Cell {
  chain: string;
  variant: string;
  graph: CudaGraphExec;
  times: number[];
  identical?: boolean;
}
const cells: Cell[] = [];
for (const c of chains) {
  let reference: Uint8Array[] | undefined;
  for (const v of VARIANTS) {
    const k = kernelsFor(v);
    setPdlPolicy(v.policy ?? 'all');
    const graph = captureOn(acc, stream, () => c.enqueue(k, stream));
    // Correctness: from the same input, the final buffers must equal the plain chain's bit for bit.
    acc.copyHostToDevice(c.bufs[0]!.t.storage.buffer, 0, c.init, stream);
    graph.launch(stream);
    stream.synchronize();
    const outs = c.bufs.map(readBytes);
    let identical: boolean | undefined;
    if (!reference) reference = outs;
    else identical = outs.every((o, i) => Buffer.compare(o, reference![i]!) === 0);
    cells.push({ chain: c.name, variant: v.label, graph, times: [], identical });
  }
}

const starts = cells.map(() => new CudaEvent(0, true));
const ends = cells.map(() => new CudaEvent(0, true));
for (const c of cells) for (let i = 0; i < 3; i++) c.graph.launch(stream); // warm-up
stream.synchronize();
for (let r = 0; r < REPS; r++) {
  // Variants interleaved within each rep, so clock or thermal drift hits all of them alike.
  cells.forEach((c, i) => {
    starts[i]!.record(stream);
    c.graph.launch(stream);
    ends[i]!.record(stream);
  });
  stream.synchronize();
  cells.forEach((c, i) => c.times.push(starts[i]!.elapsedTime(ends[i]!) * 1000));
}

// Host cost of one launch outside graphs (eager Kiln): cuLaunchKernel vs cuLaunchKernelEx with the
// attribute, the tiny kernel, HOST_OPS launches per run, median of HOST_RUNS runs.
const HOST_OPS = 20_000;
const HOST_RUNS = 5;
const tinyChain = chains[2]!;
setPdlPolicy('all');
const hostLaunch = [VARIANTS[0]!, VARIANTS[3]!].map((v) => {
  const k = kernelsFor(v)('pw');
  const args = [tinyChain.bufs[0]!.ptr, tinyChain.bufs[1]!.ptr, TINY_ELEMS / 8];
  for (let i = 0; i < 500; i++) launch(k, args, { grid: 1, block: 256 }, stream);
  stream.synchronize();
  const runs: number[] = [];
  for (let r = 0; r < HOST_RUNS; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < HOST_OPS; i++) launch(k, args, { grid: 1, block: 256 }, stream);
    const t1 = process.hrtime.bigint();
    stream.synchronize();
    runs.push(Number(t1 - t0) / 1e3 / HOST_OPS);
  }
  const r = { variant: v.label, hostUsPerLaunch: +median(runs).toFixed(3), runs: runs.map((x) => +x.toFixed(3)) };
  console.log(`host time per eager launch, ${v.label.padEnd(15)} ${r.hostUsPerLaunch.toFixed(2)} us (runs ${r.runs.join(', ')})`);
  return r;
});

const rows = cells.map((c) => {
  const us = median(c.times);
  const plain = median(cells.find((p) => p.chain === c.chain && p.variant === 'plain')!.times);
  return {
    chain: c.chain,
    variant: c.variant,
    nodes: c.graph.nodeCount,
    usPerReplay: +us.toFixed(2),
    usPerNode: +(us / N).toFixed(3),
    savedUsPerNode: +((plain - us) / N).toFixed(3),
    minUs: +Math.min(...c.times).toFixed(2),
    identicalToPlain: c.identical ?? null,
  };
});
console.log('chain                                    variant         nodes  us/replay  us/node  saved/node  identical');
for (const r of rows) {
  console.log(
    `${r.chain.padEnd(40)} ${r.variant.padEnd(15)} ${String(r.nodes).padStart(5)} ${r.usPerReplay.toFixed(1).padStart(10)} ${r.usPerNode.toFixed(3).padStart(8)} ${r.savedUsPerNode.toFixed(3).padStart(11)}  ${String(r.identicalToPlain)}`,
  );
}
const out = process.argv[2] ?? path.join('bench', 'results', 'cuda-pdl.json');
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, JSON.stringify({ date: new Date().toISOString(), device: props, chain: N, reps: REPS, gemmEvery: GEMM_EVERY, rows, hostLaunch }, null, 2));
console.log(`wrote ${out}`);
