/**
 * Device time of the kernels of a Qwen3-0.6B batch-1 decode step on webgpu, one at a time (issue
 * #20), without the per-dispatch stamp overhead of webgpu-decode-profile.ts (there, a stamp before
 * every dispatch ends the compute pass and adds 20-30 us to each): `reps` calls of one op are
 * queued back to back between two device events (one batch: the bridge flushes at 256 commands or
 * a call), so the time per call is the kernel plus the GPU's own gap between dependent dispatches.
 * Rows: a tiny pointwise op (that floor), each projection's GEMV (and the weight bytes over the
 * time, GB/s), the eager one-row rmsNorm and the compiled residual add + RMSNorm ([1, 1024]: the
 * fused reduce kernel kiln.compile renders for a decode step's 57 norms, checked to be one
 * dispatch), each in the strided-loop form (one element per loop step, the renderer before issue
 * #20's fixes), KILN_WEBGPU_REDUCE_UNROLL 4 and the register-resident form (KILN_WEBGPU_REDUCE_REGISTERS,
 * the default), in the same process; "chained" rows feed each call's
 * output to the next (a step's norms are dependent: latency, not throughput);
 * llm.qkNormRotaryCache at Qwen3-0.6B's shapes (q 16 x 128, k and v 8 x 128, one token, one dispatch;
 * KILN_WEBGPU_ROTARY_REGISTERS 0 and 1),
 * the embedding gather of one token, the greedy argmax over the vocabulary, paged decode attention
 * at a 300-token context (--context) in a table of --capacity tokens (default 40960: Qwen3's 40960
 * positions; the engine's tables are min(that, its cache's blocks) wide) over a cache of
 * --cache-blocks blocks (default: the table's width; set it apart to tell the table's width from
 * the cache buffer's size), in the lanes form (256 / 512 / 1024 invocations) and, with it off, for
 * each of KILN_WEBGPU_PAGED_UNROLL 0/1 x KILN_WEBGPU_PAGED_VECV 0/1.
 * llm.addRmsNormLinear (the GEMV with the add + RMSNorm in its prologue) for qkv, the gated gate/up
 * and the LM head, each fused (weight prefetch on and off) and as the separate compiled add + RMSNorm
 * and GEMV it replaces.
 * `--only` picks rows by substring (pointwise, gemv, gemv big-buffer, rmsNorm, addRmsNorm (which
 * includes addRmsNormLinear), addRmsNormLinear, qkNormRotaryCache, embedding, argmax, pagedAttention).
 *
 *   node dist/bench/webgpu-decode-kernels.js [--dtype float16] [--reps 50] [--json out.json]
 *   node dist/bench/webgpu-decode-kernels.js --only pagedAttention --capacity 40960 --cache-blocks 40
 *   KILN_WEBGPU_SPLIT_ARG=0 node dist/bench/webgpu-decode-kernels.js --only argmax   (one workgroup, for comparison)
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import * as kiln from '../src/index.js';
import type { DType } from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { setOption } from '../src/runtime/config.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';

const { values: a } = parseArgs({ options: { dtype: { type: 'string', default: 'float16' }, reps: { type: 'string', default: '50' }, only: { type: 'string', default: '' }, context: { type: 'string', default: '300' }, capacity: { type: 'string', default: '40960' }, 'cache-blocks': { type: 'string', default: '' }, json: { type: 'string' } } });
const dtype = a.dtype as DType;
const reps = Number(a.reps);
const dev = 'webgpu';
const bytes = dtype === 'float32' ? 4 : 2;

/** Median device microseconds per call of `f` (reps calls between two events; 5 trials). */
function time(f: () => Tensor): number {
  kiln.noGrad(() => kiln.scope(() => void f()));
  kiln.synchronize(dev);
  const trials: number[] = [];
  for (let t = 0; t < 5; t++) {
    kiln.noGrad(() =>
      kiln.scope(() => {
        const e0 = new kiln.Event(dev, { enableTiming: true }).record();
        for (let i = 0; i < reps; i++) f();
        const e1 = new kiln.Event(dev, { enableTiming: true }).record();
        kiln.synchronize(dev);
        trials.push((1000 * e0.elapsedTime(e1)) / reps);
      }),
    );
  }
  return trials.sort((x, y) => x - y)[2]!;
}

const rows: { kernel: string; us: number; gbps?: number }[] = [];
/** --only: the rows whose name contains it (the others are neither set up nor run). */
const want = (name: string): boolean => a.only === '' || name.includes(a.only);
const report = (kernel: string, us: number, moved?: number): void => {
  const gbps = moved === undefined ? undefined : moved / us / 1e3;
  rows.push({ kernel, us: Number(us.toFixed(2)), ...(gbps === undefined ? {} : { gbps: Number(gbps.toFixed(0)) }) });
  console.log(`${kernel.padEnd(72)} ${us.toFixed(2).padStart(9)} us${gbps === undefined ? '' : `  ${gbps.toFixed(0).padStart(6)} GB/s`}`);
};

kiln.manualSeed(0);
const small = kiln.randn([1024], { device: dev }).to(dtype);
if (want('pointwise')) report('pointwise add [1024] (dispatch floor)', time(() => kiln.add(small, small)));

for (const [name, n, k] of [['qkv 4096x1024', 4096, 1024], ['o 1024x2048', 1024, 2048], ['gate_up 6144x1024', 6144, 1024], ['down 1024x3072', 1024, 3072], ['lm_head 151936x1024', 151936, 1024]] as const) {
  if (!want(`gemv ${name}`)) continue;
  const w = kiln.randn([n, k], { device: dev }).to(dtype);
  const x = kiln.randn([1, k], { device: dev }).to(dtype);
  report(`gemv ${name}`, time(() => kiln.linear(x, w)), n * k * bytes);
  w.dispose();
  x.dispose();
}

// Is a large buffer itself slow (the LM head's 311 MB weight; paged attention's caches at capacity
// 40960)? The qkv GEMV's weight as the first 4096 rows of a 151936-row buffer (same bytes read as
// the 'gemv qkv' row, from a 311 MB buffer), and the LM head as 4 GEMVs over 4 separate buffers of
// 37984 rows (78 MB each): if the first is slower than 'gemv qkv' or the second faster than
// 'gemv lm_head', the buffer's size costs, not the kernel.
if (want('gemv big-buffer')) {
  const big = kiln.randn([151936, 1024], { device: dev }).to(dtype);
  const x = kiln.randn([1, 1024], { device: dev }).to(dtype);
  const w = big.narrow(0, 0, 4096);
  report('gemv big-buffer qkv 4096x1024 (rows of a 151936-row buffer)', time(() => kiln.linear(x, w)), 4096 * 1024 * bytes);
  big.dispose();
  const parts = Array.from({ length: 4 }, () => kiln.randn([37984, 1024], { device: dev }).to(dtype));
  report('gemv big-buffer lm_head as 4 x 37984x1024 buffers', time(() => kiln.cat(parts.map((p) => kiln.linear(x, p)), 1)), 151936 * 1024 * bytes);
  for (const p of parts) p.dispose();
}

const acc = kiln.getAccelerator(dev) as WebgpuAccelerator;
/** Dispatches one call of f queues (after a warm call). */
function dispatchesOf(f: () => unknown): number {
  kiln.noGrad(() => kiln.scope(() => void f()));
  const d0 = acc.dispatchCount;
  kiln.noGrad(() => kiln.scope(() => void f()));
  return acc.dispatchCount - d0;
}

/** Median device microseconds per call of a chain: each call's input is the last call's output (reps dependent calls). */
function timeChain(first: Tensor, f: (x: Tensor) => Tensor): number {
  kiln.noGrad(() => kiln.scope(() => void f(first)));
  kiln.synchronize(dev);
  const trials: number[] = [];
  for (let t = 0; t < 5; t++) {
    kiln.noGrad(() =>
      kiln.scope(() => {
        let x = first;
        const e0 = new kiln.Event(dev, { enableTiming: true }).record();
        for (let i = 0; i < reps; i++) x = f(x);
        const e1 = new kiln.Event(dev, { enableTiming: true }).record();
        kiln.synchronize(dev);
        trials.push((1000 * e0.elapsedTime(e1)) / reps);
      }),
    );
  }
  return trials.sort((x, y) => x - y)[2]!;
}

/**
 * Rows under each form of the 'workgroup' reductions (issue #20): the strided loop (one element
 * per step, the renderer before the issue), KILN_WEBGPU_REDUCE_UNROLL 4, and the register-resident
 * row (KILN_WEBGPU_REDUCE_REGISTERS 8, the default).
 */
const FORMS = [
  { label: 'loop', unroll: 1, registers: 0 },
  { label: 'unroll 4', unroll: 4, registers: 0 },
  { label: 'registers', unroll: 1, registers: 8 },
] as const;
function underForm(f: (typeof FORMS)[number], fn: () => void): void {
  setOption('KILN_WEBGPU_REDUCE_UNROLL', f.unroll);
  setOption('KILN_WEBGPU_REDUCE_REGISTERS', f.registers);
  try {
    fn();
  } finally {
    setOption('KILN_WEBGPU_REDUCE_UNROLL', undefined);
    setOption('KILN_WEBGPU_REDUCE_REGISTERS', undefined);
  }
}

const h = kiln.randn([1, 1024], { device: dev }).to(dtype);
const g = kiln.randn([1024], { device: dev }).to(dtype);
if (want('rmsNorm')) {
  for (const form of FORMS) {
    underForm(form, () => {
      report(`rmsNorm [1, 1024] (${form.label})`, time(() => kiln.llm.rmsNorm(h, g, 1e-6)));
      report(`rmsNorm [1, 1024] chained (${form.label})`, timeChain(h, (x) => kiln.llm.rmsNorm(x, g, 1e-6)));
    });
  }
}

// The compiled residual add + RMSNorm of a decode step ([1, 1024], weight, eps 1e-6): kiln.compile
// fuses it into one reduce kernel (add+mul+mean+add+rsqrt+mul+mul), stores the sum and the norm.
if (want('addRmsNorm')) {
  const res = kiln.randn([1, 1024], { device: dev }).to(dtype);
  for (const form of FORMS) {
    underForm(form, () => {
      // A fresh function per setting: the option is part of the compiled program's kernel keys.
      const f = kiln.compile((x: Tensor, r: Tensor, w: Tensor) => {
        const s = kiln.add(x, r);
        return [kiln.nn.functional.rmsNorm(s, [1024], w, 1e-6), s] as const;
      });
      const call = (x: Tensor): Tensor => (f(x, res, g) as readonly Tensor[])[0]!;
      const n = dispatchesOf(() => call(h));
      report(`compiled addRmsNorm [1, 1024] (${form.label}, ${n} dispatch${n === 1 ? '' : 'es'})`, time(() => call(h)));
      report(`compiled addRmsNorm [1, 1024] chained (${form.label})`, timeChain(h, call));
    });
  }
}

// llm.addRmsNormLinear (the norm-prologue GEMV, KILN_ADD_RMSNORM_LINEAR's op) at Qwen3-0.6B's
// shapes, one row: the residual add + RMSNorm into qkv (N 4096) and into the gated gate/up (2 x 3072),
// and the final norm into the LM head, with and without the weight prefetch (KILN_WEBGPU_GEMV_NORM_PREFETCH);
// each next to the separate pair it replaces (the compiled
// add + RMSNorm kernel, then the GEMV / gated GEMV it feeds: two dependent dispatches).
if (want('addRmsNormLinear')) {
  const res = kiln.randn([1, 1024], { device: dev }).to(dtype);
  const norm = kiln.compile((x: Tensor, r: Tensor, w: Tensor) => {
    const s = kiln.add(x, r);
    return [kiln.nn.functional.rmsNorm(s, [1024], w, 1e-6), s] as const;
  });
  const normed = (x: Tensor): Tensor => (norm(x, res, g) as readonly Tensor[])[0]!;
  for (const [name, n, gated] of [['qkv 4096x1024', 4096, false], ['gate_up 6144x1024 gated', 6144, true], ['lm_head 151936x1024', 151936, false]] as const) {
    const w = kiln.randn([n, 1024], { device: dev }).to(dtype);
    const fused = (): Tensor => kiln.llm.addRmsNormLinear(h, res, g, 1e-6, w, null, gated).out;
    for (const pf of [true, false]) {
      setOption('KILN_WEBGPU_GEMV_NORM_PREFETCH', pf);
      try {
        const nf = dispatchesOf(fused);
        report(`addRmsNormLinear ${name} fused (prefetch ${pf ? 1 : 0}, ${nf} dispatch${nf === 1 ? '' : 'es'})`, time(fused), n * 1024 * bytes);
      } finally {
        setOption('KILN_WEBGPU_GEMV_NORM_PREFETCH', undefined);
      }
    }
    const separate = (): Tensor => (gated ? kiln.llm.linearSiluAndMul(normed(h), w) : kiln.linear(normed(h), w));
    const ns = dispatchesOf(separate);
    report(`addRmsNormLinear ${name} separate (${ns} dispatches)`, time(separate), n * 1024 * bytes);
    w.dispose();
  }
}

// llm.qkNormRotaryCache at Qwen3-0.6B's decode shapes: q [1, 16, 128], k, v [1, 8, 128] (views of
// one qkv row), per-head RMSNorm + rotary of q and k, k and v written to the cache at one slot.
if (want('qkNormRotaryCache')) {
  const D = 128;
  const qkv = kiln.randn([1, 32 * D], { device: dev }).to(dtype);
  const q = qkv.narrow(-1, 0, 16 * D).view([1, 16, D]);
  const k = qkv.narrow(-1, 16 * D, 8 * D).view([1, 8, D]);
  const v = qkv.narrow(-1, 24 * D, 8 * D).view([1, 8, D]);
  const qw = kiln.randn([D], { device: dev }).to(dtype);
  const kw = kiln.randn([D], { device: dev }).to(dtype);
  const cos = kiln.randn([1, 1, D], { device: dev }).to(dtype);
  const sin = kiln.randn([1, 1, D], { device: dev }).to(dtype);
  const kc = kiln.randn([64, 16, 8, D], { device: dev }).to(dtype);
  const vc = kiln.randn([64, 16, 8, D], { device: dev }).to(dtype);
  const slots = kiln.tensor([300], { dtype: 'int32', device: dev });
  const call = (): Tensor => kiln.llm.qkNormRotaryCache(q, k, v, qw, kw, 1e-6, cos, sin, true, kc, vc, slots).q;
  // The loop form and the register-resident one (KILN_WEBGPU_ROTARY_REGISTERS, the default).
  for (const registers of [false, true]) {
    setOption('KILN_WEBGPU_ROTARY_REGISTERS', registers);
    try {
      const n = dispatchesOf(call);
      report(`qkNormRotaryCache q 16x128 kv 8x128 (${registers ? 'registers' : 'loop'}, ${n} dispatch${n === 1 ? '' : 'es'})`, time(call));
    } finally {
      setOption('KILN_WEBGPU_ROTARY_REGISTERS', undefined);
    }
  }
}

// The embedding gather of one token id from Qwen3-0.6B's [151936, 1024] table.
if (want('embedding')) {
  const table = kiln.randn([151936, 1024], { device: dev }).to(dtype);
  const ids = kiln.tensor([[12345]], { dtype: 'int32', device: dev });
  report('embedding [1, 1] of [151936, 1024]', time(() => kiln.nn.functional.embedding(ids, table)));
  table.dispose();
}

const logits = want('argmax') ? kiln.randn([1, 151936], { device: dev }).to(dtype) : small;
if (want('argmax')) report(`argmax [1, 151936] (split ${process.env.KILN_WEBGPU_SPLIT_ARG ?? '1'})`, time(() => kiln.argmax(logits, 1)), 151936 * bytes);

// Paged decode attention: 16 query heads over 8 kv heads of 128, blocks of 16, a 300-token context.
const bs = 16;
const capacity = Number(a.capacity);
const maxBlocks = Math.ceil(capacity / bs);
const ctx = Number(a.context);
const cacheBlocks = a['cache-blocks'] === '' ? maxBlocks : Number(a['cache-blocks']);
if (want('pagedAttention')) pagedRow();
function pagedRow(): void {
  const need = Math.ceil(ctx / bs);
  if (cacheBlocks < need) throw new Error(`--cache-blocks ${cacheBlocks}: a ${ctx}-token context needs ${need} blocks`);
  const kc = kiln.randn([cacheBlocks, bs, 8, 128], { device: dev }).to(dtype);
  const vc = kiln.randn([cacheBlocks, bs, 8, 128], { device: dev }).to(dtype);
  const q = kiln.randn([1, 16, 128], { device: dev }).to(dtype);
  // The table's entries past the cache point at its blocks again (never read past the context).
  const tables = kiln.tensor([Array.from({ length: maxBlocks }, (_, i) => i % cacheBlocks)], { dtype: 'int32', device: dev });
  const lens = kiln.tensor([ctx], { dtype: 'int32', device: dev });
  // The lanes form (KILN_WEBGPU_PAGED_LANES, the default up to 4096 tokens of capacity) by workgroup size.
  for (const [wg, hg] of [[256, 0], [512, 0], [1024, 0], [256, 1], [512, 1]] as const) {
    setOption('KILN_WEBGPU_PAGED_LANES', 1 << 20);
    setOption('KILN_WEBGPU_PAGED_LANES_WG', wg);
    setOption('KILN_WEBGPU_PAGED_LANES_HG', hg);
    try {
      const us = time(() => kiln.llm.pagedAttention(q, kc, vc, tables, lens, 1 / Math.sqrt(128)));
      report(`pagedAttention ctx ${ctx} (capacity ${capacity}, cache ${cacheBlocks * bs}, lanes ${wg}${hg ? `, ${hg} head a workgroup` : ''})`, us, 2 * ctx * 8 * 128 * bytes);
    } finally {
      setOption('KILN_WEBGPU_PAGED_LANES', undefined);
      setOption('KILN_WEBGPU_PAGED_LANES_WG', undefined);
      setOption('KILN_WEBGPU_PAGED_LANES_HG', undefined);
    }
  }
  for (const unroll of [false, true]) {
    for (const vecV of [false, true]) {
      setOption('KILN_WEBGPU_PAGED_LANES', 0);
      setOption('KILN_WEBGPU_PAGED_UNROLL', unroll);
      setOption('KILN_WEBGPU_PAGED_VECV', vecV);
      try {
        const us = time(() => kiln.llm.pagedAttention(q, kc, vc, tables, lens, 1 / Math.sqrt(128)));
        report(`pagedAttention ctx ${ctx} (capacity ${capacity}, cache ${cacheBlocks * bs}, unroll ${unroll ? 1 : 0}, vecv ${vecV ? 1 : 0})`, us, 2 * ctx * 8 * 128 * bytes);
      } finally {
        setOption('KILN_WEBGPU_PAGED_LANES', undefined);
        setOption('KILN_WEBGPU_PAGED_UNROLL', undefined);
        setOption('KILN_WEBGPU_PAGED_VECV', undefined);
      }
    }
  }
}

if (a.json) fs.writeFileSync(a.json, JSON.stringify({ dtype, reps, rows }, null, 2));
process.exit(0);
