/**
 * The decode step's GEMVs back to back inside a CUDA graph, with PDL off, PDL on, and PDL on with
 * KILN_GEMV_PREFETCH (issue #17: a GEMV of Qwen3-0.6B takes ~7.8 us for 4-12 MB, a quarter of the
 * HBM bandwidth, because each small kernel pays its launch gap, the HBM latency ramp and a tail;
 * the prefetch lets a GEMV stream its weight into L2 while the kernel before it still runs).
 *
 * A chain is `layers` layers of Qwen3-0.6B's four decode linears at batch 1, each reading the
 * previous one's output: qkv [4096 x 1024], o [1024 x 2048] (on the first 2048 columns of qkv),
 * gate/up gated [2 x 3072 x 1024] (silu * mul in the epilogue), down [1024 x 3072]; every layer
 * has its own weight copies (28 layers: 0.87 GB), so W comes from HBM as in a decode step.
 * Chains:
 *   - gemv:      the four GEMVs alone (each GEMV's predecessor is a GEMV);
 *   - gemv+tiny: a one-block copy kernel before qkv, o and gate/up (as the decode step's RMSNorm,
 *                attention and norm kernels sit there; a one-block grid triggers early under PDL);
 *   - norm:      the add + RMSNorm prologue GEMVs for qkv and gate/up (KILN_ADD_RMSNORM_LINEAR).
 * Variants: off (no PDL), pdl (KILN_PDL=1), pdl+prefetch (KILN_PDL=1 KILN_GEMV_PREFETCH=1), its
 * two parts apart (pdl+pf-only: the L2 prefetch without the GEMV's early trigger; pdl+trig-only: the
 * trigger without the prefetch), prefetch (KILN_GEMV_PREFETCH=always, PDL off: no overlap). Each chain and
 * variant is captured once into a CUDA graph and replayed; variants interleaved within each rep;
 * the median replay time, per layer and per GEMV, and the weight bytes over it (GB/s). Each
 * variant's output must equal the off variant's bit for bit. Every wait for the device polls an
 * event with a bound (--timeout-ms), and a progress line is printed (synchronously) per step, so
 * a stuck kernel ends the bench with its label instead of hanging the device call.
 *
 *   node dist/bench/cuda-gemv-chain.js [--layers 28] [--reps 41] [--chains gemv,gemv+tiny,norm]
 *       [--variants off,pdl,pdl+prefetch,pdl+pf-only,pdl+trig-only,prefetch] [--timeout-ms 10000] [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { ptrOf } from '../src/kernels/cuda/device.js';
import { fillUniformStd_ } from '../src/models/init.js';
import { runGemv, runGemvGated, runGemvNorm, setGemvPrefetchParts, type GemvNormProblem, type GemvProblem } from '../src/kernels/cuda/gemv.js';
import { setOption } from '../src/runtime/config.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { captureOn, poolStream, type CudaGraphExec } from '../src/runtime/cuda/graph.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch, launchStats } from '../src/runtime/cuda/launch.js';
import { pdlEnabled, setPdlEnabled } from '../src/runtime/cuda/pdl.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { CudaEvent, type CudaStream } from '../src/runtime/cuda/stream.js';
import { getAccelerator } from '../src/runtime/registry.js';
import type { Tensor } from '../src/tensor/tensor.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const layers = Number(flag('--layers') ?? 28);
const reps = Number(flag('--reps') ?? 41);
const chainNames = (flag('--chains') ?? 'gemv,gemv+tiny,norm').split(',');
const variantNames = (flag('--variants') ?? 'off,pdl,pdl+prefetch,pdl+pf-only,pdl+trig-only,prefetch').split(',');
const timeoutMs = Number(flag('--timeout-ms') ?? 10_000);
const jsonPath = flag('--json');

/** A line on stdout now (synchronous: a later hang cannot swallow it). */
const say = (s: string): void => void fs.writeSync(1, `${s}\n`);

interface Variant {
  pdl: boolean;
  prefetch: '0' | '1' | 'always';
  parts?: 'prefetch' | 'trigger';
}
const VARIANTS: Record<string, Variant> = {
  off: { pdl: false, prefetch: '0' },
  pdl: { pdl: true, prefetch: '0' },
  'pdl+prefetch': { pdl: true, prefetch: '1' },
  prefetch: { pdl: false, prefetch: 'always' },
  // The two parts of KILN_GEMV_PREFETCH apart ('cuda.gemv.prefetchParts'): which one gains?
  'pdl+pf-only': { pdl: true, prefetch: '1', parts: 'prefetch' },
  'pdl+trig-only': { pdl: true, prefetch: '1', parts: 'trigger' },
};
for (const v of variantNames) if (!VARIANTS[v]) throw new Error(`--variants: unknown '${v}' (known: ${Object.keys(VARIANTS).join(', ')})`);
for (const c of chainNames) if (!['gemv', 'gemv+tiny', 'norm'].includes(c)) throw new Error(`--chains: unknown '${c}' (known: gemv, gemv+tiny, norm)`);

const acc = getAccelerator('cuda') as unknown as CudaAccelerator;
const info = deviceInfo(0);
say(`device: ${info.name} (${info.arch}, ${info.smCount} SMs), ${layers} layers, ${reps} reps, timeout ${timeoutMs} ms per wait`);

/** Polls `e` until done; past the bound throws naming `label` (never blocks in the driver). */
function waitFor(e: CudaEvent, label: string): void {
  const deadline = performance.now() + timeoutMs;
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (let spins = 0; !e.query(); spins++) {
    if (performance.now() > deadline) throw new Error(`${label}: the device did not finish within ${timeoutMs} ms`);
    if (spins > 1000) Atomics.wait(nap, 0, 0, 0.2);
  }
}
function syncStream(stream: CudaStream, label: string): void {
  const e = new CudaEvent(0, false);
  e.record(stream);
  waitFor(e, label);
}

const H = 1024;
const QKV = 4096;
const ATTN = 2048;
const INTER = 3072;
// Uniform weights drawn on the device (models/init.ts: cuda draws the words itself); a host randn of
// the chain's 435M values would take tens of seconds of the device call.
const gen = new kiln.Generator(17);
const bf16 = (shape: number[], std: number): Tensor => kiln.keep(fillUniformStd_(kiln.empty(shape, { dtype: 'bfloat16', device: 'cuda' }), std, gen));
const empty = (n: number): Tensor => kiln.keep(kiln.empty([1, n], { dtype: 'bfloat16', device: 'cuda' }));

interface Layer {
  qkv: Tensor;
  o: Tensor;
  gu: Tensor;
  down: Tensor;
  g1: Tensor;
  g2: Tensor;
}
say('drawing weights on the device');
const weights: Layer[] = Array.from({ length: layers }, () => ({
  qkv: bf16([QKV, H], 0.03),
  o: bf16([H, ATTN], 0.022),
  gu: bf16([2 * INTER, H], 0.03),
  down: bf16([H, INTER], 0.018),
  g1: bf16([H], 0.1),
  g2: bf16([H], 0.1),
}));
const layerBytes = 2 * (QKV * H + H * ATTN + 2 * INTER * H + H * INTER);
syncStream(acc.defaultStream(0), 'drawing the weights');
say(`weights: ${((layers * layerBytes) / 2 ** 30).toFixed(2)} GiB`);
const x0 = bf16([1, H], 1);
const bufX = empty(H);
const bufT = empty(H);
const bufQkv = empty(QKV);
const bufO = empty(H);
const bufA = empty(INTER);
const bufH = empty(H);

/** One-block copy of H bf16 (a stand-in for the decode step's small kernels between the GEMVs). */
const TINY = `extern "C" __global__ void __launch_bounds__(128) kiln_bench_tiny(const uint4* __restrict__ x, uint4* __restrict__ y) {
  y[threadIdx.x] = x[threadIdx.x];
}`;

const gemv = (x: Tensor, ldx: number, w: Tensor, out: Tensor, n: number, k: number): GemvProblem => ({ m: 1, n, k, x: ptrOf(x), ldx, w: ptrOf(w), ldw: k, out: ptrOf(out), ldo: n });
const norm = (p: GemvProblem, res: Tensor, gamma: Tensor, hout: Tensor): GemvNormProblem => ({ ...p, res: ptrOf(res), ldr: H, gamma: ptrOf(gamma), eps: 1e-6, hout: ptrOf(hout), ldh: H });

/** Enqueues one chain on `stream`: x0 -> layers -> bufX. */
function enqueue(chain: string, stream: CudaStream): void {
  // Kernels are looked up at enqueue time, so the variant's options (PDL, prefetch) pick the sources.
  const tiny = kernelFromSource(0, TINY, 'kiln_bench_tiny', ['ptr', 'ptr']);
  const small = (from: Tensor, to: Tensor): void => launch(tiny, [ptrOf(from), ptrOf(to)], { grid: 1, block: 128 }, stream);
  let x = x0;
  for (const w of weights) {
    let xin = x;
    if (chain === 'gemv+tiny') {
      small(x, bufT);
      xin = bufT;
    }
    if (chain === 'norm') runGemvNorm(0, stream, norm(gemv(xin, H, w.qkv, bufQkv, QKV, H), x0, w.g1, bufH), false, false);
    else runGemv(0, stream, gemv(xin, H, w.qkv, bufQkv, QKV, H));
    if (chain === 'gemv+tiny') small(bufQkv, bufT); // the attention's place (reads qkv, writes what o reads)
    runGemv(0, stream, gemv(bufQkv, QKV, w.o, bufO, H, ATTN));
    if (chain === 'gemv+tiny') small(bufO, bufT);
    const xo = chain === 'gemv+tiny' ? bufT : bufO;
    if (chain === 'norm') runGemvNorm(0, stream, norm(gemv(xo, H, w.gu, bufA, INTER, H), x0, w.g2, bufH), true, false);
    else runGemvGated(0, stream, gemv(xo, H, w.gu, bufA, INTER, H), false);
    runGemv(0, stream, gemv(bufA, INTER, w.down, bufX, H, INTER));
    x = bufX;
  }
}

function withVariant<T>(v: Variant, fn: () => T): T {
  setPdlEnabled(v.pdl);
  setOption('KILN_GEMV_PREFETCH', v.prefetch);
  setGemvPrefetchParts(v.parts);
  try {
    return fn();
  } finally {
    setPdlEnabled(undefined);
    setOption('KILN_GEMV_PREFETCH', undefined);
    setGemvPrefetchParts(undefined);
  }
}

interface Cell {
  chain: string;
  variant: string;
  graph: CudaGraphExec;
  nodes: number;
  pdlLaunches: number;
  times: number[];
  identical?: boolean;
}
const stream = poolStream(0);
const cells: Cell[] = [];
const readOut = (): Uint8Array => {
  const out = new Uint8Array(H * 2);
  acc.copyDeviceToHost(out, bufX.storage.buffer, 0);
  return out;
};
for (const chain of chainNames) {
  let reference: Uint8Array | undefined;
  for (const vn of variantNames) {
    const v = VARIANTS[vn]!;
    const label = `${chain} / ${vn}`;
    withVariant(v, () => {
      // Eagerly once first: every kernel compiled and loaded before the capture.
      enqueue(chain, stream);
      syncStream(stream, `${label} (eager warm-up)`);
      const before = launchStats.pdl;
      const graph = captureOn(acc, stream, () => enqueue(chain, stream));
      const pdlLaunches = launchStats.pdl - before;
      graph.launch(stream);
      syncStream(stream, `${label} (first replay)`);
      const out = readOut();
      let identical: boolean | undefined;
      if (!reference) reference = out;
      else identical = Buffer.compare(out, reference) === 0;
      cells.push({ chain, variant: vn, graph, nodes: graph.nodeCount, pdlLaunches, times: [], identical });
      say(`captured ${label}: ${graph.nodeCount} nodes, ${pdlLaunches} PDL launches (PDL ${pdlEnabled(0) ? 'on' : 'off'})${identical === undefined ? '' : `, output ${identical ? 'bit-identical' : 'DIFFERS'} from ${variantNames[0]}`}`);
    });
  }
}

const starts = cells.map(() => new CudaEvent(0, true));
const ends = cells.map(() => new CudaEvent(0, true));
for (const c of cells) for (let i = 0; i < 3; i++) c.graph.launch(stream); // warm-up
syncStream(stream, 'warm-up replays');
for (let r = 0; r < reps; r++) {
  // Variants interleaved within each rep, so clock or thermal drift hits all alike.
  cells.forEach((c, i) => {
    starts[i]!.record(stream);
    c.graph.launch(stream);
    ends[i]!.record(stream);
  });
  waitFor(ends[ends.length - 1]!, `replay rep ${r}`);
  cells.forEach((c, i) => c.times.push(starts[i]!.elapsedTime(ends[i]!) * 1000));
  if (r % 10 === 0) say(`rep ${r + 1}/${reps}`);
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const rows = cells.map((c) => {
  const us = median(c.times);
  return { chain: c.chain, variant: c.variant, nodes: c.nodes, pdlLaunches: c.pdlLaunches, us, usPerLayer: us / layers, usPerGemv: us / (4 * layers), gbps: (layerBytes * layers) / (us * 1e-6) / 1e9, identical: c.identical };
});
const pad = (s: string, n: number): string => s.padEnd(n);
say(`${pad('chain', 11)}${pad('variant', 14)}${pad('nodes', 7)}${pad('pdl', 6)}${pad('us', 10)}${pad('us/layer', 10)}${pad('us/gemv', 9)}${pad('GB/s', 7)}bits`);
for (const r of rows) {
  say(`${pad(r.chain, 11)}${pad(r.variant, 14)}${pad(String(r.nodes), 7)}${pad(String(r.pdlLaunches), 6)}${pad(r.us.toFixed(1), 10)}${pad(r.usPerLayer.toFixed(2), 10)}${pad(r.usPerGemv.toFixed(2), 9)}${pad(r.gbps.toFixed(0), 7)}${r.identical === undefined ? 'ref' : r.identical ? 'same' : 'DIFFER'}`);
}
if (jsonPath) {
  fs.writeFileSync(jsonPath, JSON.stringify({ bench: 'cuda-gemv-chain', host: os.hostname(), device: info.name, sms: info.smCount, date: new Date().toISOString(), layers, reps, layerBytes, rows }, null, 2));
  say(`wrote ${jsonPath}`);
}
// Exit explicitly: nothing left open (a worker, a handle) may keep the device call waiting.
process.exit(rows.some((r) => r.identical === false) ? 1 : 0);
