#!/usr/bin/env node
// Dev check without a GPU for the cuda llm.pagedAttention kernels (src/kernels/cuda/codegen/
// paged-attention.ts: v2, and paged-attention-v1.ts with --v1): runs their CUDA C on the host
// (scripts/cuda-emu/emu.h: a fiber per CUDA thread) and compares with a float64 loop over the same
// dtype-rounded inputs.
//
// Blocks of a launch are interleaved, as on a GPU: up to `resident` blocks are live at once (the
// others wait for a slot, in a shuffled order), the scheduler picks a random live block for each
// round, and atomics, __ldcg, fences and __nanosleep are preemption points (another block may run
// between a block's memory operations). Each block has its own shared memory, barriers and shuffle
// buffer. Each case runs with resident = 1 (blocks one at a time: a block that waits for a later
// one can never finish) and resident = 4, every length list twice, with the same split scratch
// (partials) and the same module counters from launch to launch, as a replayed CUDA graph reuses
// them. So the split protocol is modelled as the GPU runs it:
//   - a block that waits for another block (a spin on a flag or counter) shows as a hang: no block
//     of the launch finishes for EMU_HANG_ROUNDS scheduler rounds (the run fails, naming the
//     launch), and a process alarm (--timeout-s) catches a spin the scheduler never regains control
//     from; `--selftest` (also run by default) checks that a spin-wait kernel is reported so;
//   - after every launch the split counters must be back at zero;
//   - every thread of a block must have fenced its partials before the block's counter increment
//     (the order the GPU needs: write, fence, barrier, count);
//   - K/V loads (__ldg) must stay inside the caches (a garbage table entry used as a block id fails
//     here even where its numbers would look plausible).
// Cases: batch 1 and ragged batches, contexts crossing block and chunk boundaries, lengths below
// one block, more splits than chunks and one to many chunks per split, GQA ratios 1-16, head dims
// 7-256, the vector layouts (16/8/4-byte and scalar loads, padded rows), float32, float16,
// bfloat16 and float64, int32/int64 tables and lengths, table entries past a sequence's blocks that
// are not block ids (negative, past the cache, the int range's ends, the cuda test's pattern) or are
// valid ids that must not be used (0), lengths that change between launches (graph replays), a
// strided query, and the device-side errors (a bad block id inside the length, a length past the
// table; the H200's `index 209 ... of size 162` of the cuda test's graph case, reproduced).
//   npm run build && node scripts/cuda-paged-emu.mjs [--filter substring] [--v1] [--v3 | --only-v3] [--v3-div] [--v3-copy] [--nvcc] [--keep]
//     [--timeout-s 900] [--no-selftest]
// --nvcc also compiles with `nvcc -arch=sm_90 -cubin` every variant the emulated cases use and every
// variant test/cuda-paged-attention.test.ts, bench/cuda-paged-attention.ts and the Qwen3 decode
// bench generate (v2 and v1, the v1 reduce kernels, with and without the PDL prologue), printing
// registers/spills of the v2 ones. Numbers only: the H200 runs test/cuda-paged-attention.test.ts.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const imp = (p) => import(pathToFileURL(path.join(root, 'dist', p)).href);
const P = await imp('src/kernels/cuda/codegen/paged-attention.js');
const P1 = await imp('src/kernels/cuda/codegen/paged-attention-v1.js');
const P3 = await imp('src/kernels/cuda/codegen/paged-attention-v3.js');
const { PRELUDE } = await imp('src/kernels/cuda/codegen/ctypes.js');
const { REPORT_INDEX_C } = await imp('src/runtime/cuda/device-errors.js');
const { insertPdlPrologue } = await imp('src/runtime/cuda/pdl.js');
const { encoder, decoder, storageArray } = await imp('src/tensor/typed.js');
const { itemSize } = await imp('src/tensor/dtype.js');

const argv = process.argv.slice(2);
const opt = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const filter = opt('--filter') ?? '';
const withV1 = argv.includes('--v1');
// --v3: also v3 (paged-attention-v3.ts); --only-v3: v3 alone. --splits N: v3's pinned split count
// (KILN_CUDA_PAGED_SPLITS), so few-split cases run several chunks per split through its pipeline.
const withV3 = argv.includes('--v3') || argv.includes('--only-v3');
const onlyV3 = argv.includes('--only-v3');
const v3Div = argv.includes('--v3-div');
// v3's chunk loop as the launcher's default (KILN_CUDA_PAGED_PIPE=pingpong); --v3-copy: the copy form.
const v3Pp = !argv.includes('--v3-copy');
const pinnedSplits = Number(opt('--splits') ?? 0);
const nvcc = argv.includes('--nvcc');
const keep = argv.includes('--keep');
const selftest = !argv.includes('--no-selftest');
const timeoutS = Number(opt('--timeout-s') ?? 900);

let seed = 20261203;
const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;

/**
 * A case: geometry, lengths, and how the launch is planned. sms: the SM count the split rule
 * sees (small values give few splits, so each split loops over several chunks). `lens`: what the
 * tables are built for (each row's blocks; raised to the replays' lengths that expect no error); `replays`: the length lists launched one after another
 * over the same tables, scratch and counters (default [lens]), each an array or { lens, error }.
 * `garbage`: what the entries past a row's blocks hold: 'emu' (-5, 10^6 + j), 'test' (the cuda
 * test's: -3, NB + 5 + j with NB = blocks used + 2), 'extreme' (the int range's ends, -1, NB), 'zero'
 * (block 0: a valid id that must not be read).
 */
const C = (name, o) => ({ name, dtype: 'bfloat16', B: 1, Hkv: 8, G: 2, D: 128, BS: 16, M: null, lens: [129], sms: 132, align: 16, tableDtype: 'int32', lenDtype: 'int32', scale: 0.0883883, garbage: 'emu', ...o });
const QW = { Hkv: 8, G: 2, D: 128, BS: 16 };
const cases = [
  C('bf16 qwen3 b1 len129 (one chunk per split)', {}),
  C('bf16 qwen3 b1 len384', { lens: [384] }),
  C('bf16 qwen3 b1 len2048 (64 splits)', { lens: [2048] }),
  C('bf16 qwen3 b1 len1 and a long table (64 splits, 1 chunk)', { lens: [1], M: 64 }),
  C('bf16 qwen3 b1 len15 (below one block), int range garbage', { lens: [15], M: 40, garbage: 'extreme' }),
  C('bf16 qwen3 b1 len32 (exactly one chunk: direct write)', { lens: [32] }),
  C('bf16 qwen3 b1 len33 (two chunks)', { lens: [33] }),
  C('bf16 qwen3 b1 len500, 4 splits (4 chunks per split)', { Hkv: 1, sms: 1, lens: [500] }),
  C('bf16 qwen3 b1 len300, one split (direct, 10 chunks)', { Hkv: 8, sms: 1, lens: [300] }),
  C('bf16 b3 ragged with 0, int64 tables and lengths, int range garbage', { B: 3, Hkv: 2, lens: [0, 1, 150], tableDtype: 'int64', lenDtype: 'int64', garbage: 'extreme' }),
  C('bf16 b8 len 256 ragged', { B: 8, Hkv: 4, lens: [256, 255, 17, 16, 15, 64, 200, 129] }),
  C('bf16 b4 garbage = block 0 (valid id, must not be read)', { B: 4, Hkv: 2, lens: [1, 17, 40, 100], M: 20, garbage: 'zero' }),
  C('bf16 qwen3 b1 replays over one table: lengths 1-4100 (same scratch and counters)', {
    ...QW,
    M: 260,
    lens: [4100],
    replays: [[4100], [1], [15], [16], [17], [33], [129], [0], [2049], [4100], [31]],
    garbage: 'test',
  }),
  C('bf16 the cuda test graph case, tables for the replayed lengths', {
    ...QW,
    B: 2,
    M: 160,
    lens: [2500, 2049],
    replays: [[2500, 40], [1, 33], [0, 1], [2048, 2049], [129, 17], [2500, 40]],
    garbage: 'test',
  }),
  C("bf16 the H200 graph run: length 2049 over a row built for 40 tokens ('index 209 ... of size 162')", {
    ...QW,
    B: 2,
    M: 160,
    lens: [2500, 40],
    replays: [[2500, 40], { lens: [2048, 2049], error: 'block' }, [129, 17], [2500, 40]],
    garbage: 'test',
  }),
  C('bf16 b8 ragged replays, more splits than chunks', { B: 8, Hkv: 2, M: 40, lens: [0, 1, 16, 31, 33, 128, 257, 512], replays: [[0, 1, 16, 31, 33, 128, 257, 512], [512, 0, 1, 1, 2, 3, 600, 17], [0, 0, 0, 0, 0, 0, 0, 0]], garbage: 'test' }),
  C('f32 qwen3 b1 len129', { dtype: 'float32' }),
  C('f32 b2 len 77/200 G4', { dtype: 'float32', B: 2, Hkv: 2, G: 4, lens: [77, 200] }),
  C('f16 qwen3 b1 len 384', { dtype: 'float16', lens: [384] }),
  C('f16 b2 G8 D64', { dtype: 'float16', B: 2, Hkv: 2, G: 8, D: 64, lens: [90, 33] }),
  C('f64 b2 G1 D128', { dtype: 'float64', B: 2, Hkv: 2, G: 1, lens: [70, 129], scale: 0.1 }),
  C('f64 b1 G4 D40 BS5', { dtype: 'float64', Hkv: 2, G: 4, D: 40, BS: 5, lens: [61] }),
  C('bf16 G1 D128', { G: 1, Hkv: 4, lens: [150] }),
  C('bf16 G4 D128', { G: 4, Hkv: 2, lens: [150] }),
  C('bf16 G8 D128 (8-byte loads)', { G: 8, Hkv: 1, lens: [150] }),
  C('bf16 G16 D128', { G: 16, Hkv: 1, lens: [100] }),
  C('bf16 G2 D64', { D: 64, Hkv: 2, lens: [150] }),
  C('bf16 G2 D80 (padded 16-byte rows)', { D: 80, Hkv: 2, lens: [99] }),
  C('bf16 G2 D96', { D: 96, Hkv: 2, lens: [99] }),
  C('bf16 G2 D256', { D: 256, Hkv: 2, lens: [99] }),
  C('bf16 G2 D7 (scalar, odd)', { D: 7, Hkv: 2, lens: [70, 3], B: 2 }),
  C('f32 G3 D40 BS8', { dtype: 'float32', D: 40, G: 3, Hkv: 2, BS: 8, lens: [57] }),
  C('bf16 G3 D80 BS5 ragged replays', { D: 80, G: 3, Hkv: 2, BS: 5, B: 2, lens: [599, 45], M: 120, replays: [[599, 45], [4, 5], [6, 599]] }),
  C('bf16 D128 align 4 (4-byte loads)', { align: 4, Hkv: 2, lens: [140] }),
  C('bf16 D128 align 2 (scalar loads)', { align: 2, Hkv: 2, lens: [140] }),
  C('f32 D128 align 8', { dtype: 'float32', align: 8, Hkv: 2, lens: [140] }),
  C('bf16 BS1', { BS: 1, Hkv: 2, lens: [45] }),
  C('bf16 BS3 len 100', { BS: 3, Hkv: 2, lens: [100] }),
  C('bf16 strided query', { Hkv: 2, lens: [77], qStride: 3 }),
  // v3's pipeline: one split over many chunks (the batch-64 plan), several, and mixed lengths.
  C('bf16 b64 lengths 128..384 mixed, one split per pair (pipelined chunks, batch-64 plan)', { B: 64, Hkv: 2, sms: 32, lens: Array.from({ length: 64 }, (_, i) => 128 + ((i * 97) % 257)) }),
  C('bf16 b7 G1 lengths 1, 15, 16, 17, 1000, 1100, 384 (3 splits)', { B: 7, Hkv: 1, G: 1, sms: 5, lens: [1, 15, 16, 17, 1000, 1100, 384] }),
  C('f16 b7 G2 lengths 1, 15, 16, 17, 1000, 1100, 384 (one split)', { dtype: 'float16', B: 7, Hkv: 2, sms: 3, lens: [1, 15, 16, 17, 1000, 1100, 384] }),
  C('f32 b3 G2 lengths 129, 383, 1025 (2 splits)', { dtype: 'float32', B: 3, Hkv: 2, sms: 3, lens: [129, 383, 1025] }),
  C('error: bad block id inside the length', { Hkv: 2, lens: [40], badBlock: 1, replays: [{ lens: [40], error: 'block' }] }),
  C('error: length past the table', { Hkv: 2, lens: [40], M: 2, replays: [{ lens: [40], error: 'len' }] }),
].filter((c) => c.name.includes(filter));

const esize = (d) => itemSize(d);
const ctOf = (d) => (d === 'float64' ? 'double' : 'float');

/** Typed bytes of `vals` in `dtype`, and the values as stored (decoded back). */
function encode(vals, dtype) {
  const enc = encoder(dtype);
  const dec = decoder(dtype);
  const bytes = new Uint8Array(Math.max(1, vals.length) * esize(dtype));
  const arr = storageArray(dtype, bytes.buffer, 0, vals.length);
  const back = new Array(vals.length);
  for (let i = 0; i < vals.length; i++) {
    arr[i] = enc(vals[i]);
    back[i] = dec(arr[i]);
  }
  return { bytes, back };
}

const kernels = new Map(); // name -> { emu source, cuda source, name }
const runs = [];
const inputs = [];
let inBytes = 0;
const addInput = (bytes) => {
  // 16-byte aligned inputs (the caches' vector loads; `align` cases offset the cache pointers).
  const pad = (16 - (inBytes % 16)) % 16;
  if (pad) {
    inputs.push(new Uint8Array(pad));
    inBytes += pad;
  }
  const off = inBytes;
  inputs.push(bytes);
  inBytes += bytes.length;
  return off;
};
const strip = (src) => {
  let s = src;
  if (s.startsWith(PRELUDE)) s = s.slice(PRELUDE.length);
  if (s.startsWith(REPORT_INDEX_C)) s = s.slice(REPORT_INDEX_C.length);
  return s;
};
/**
 * `__shared__ T a[X], b[Y][Z];` becomes references into the running block's own shared arena
 * (emu_shared), so interleaved blocks never see each other's shared memory. Ids count per kernel
 * (each kernel is in a namespace of its own; a block runs one kernel): fewer than 64.
 */
const perBlockShared = (body) => {
  let sharedIds = 0;
  return body.replace(/__shared__\s+([A-Za-z_][\w ]*?)\s+((?:\w+(?:\[[^\]]+\])+\s*,?\s*)+);/g, (_, type, decls) =>
    decls
      .split(/,\s*(?=\w+\[)/)
      .map((d) => {
        const m = /^(\w+)((?:\[[^\]]+\])+)\s*$/.exec(d.trim());
        if (!m) throw new Error(`cuda-paged-emu: cannot read the shared declaration '${d}'`);
        const id = sharedIds++;
        if (id >= 64) throw new Error('cuda-paged-emu: more than 64 shared arrays in one kernel');
        return `typedef ${type} emu_sh_t${id}${m[2]}; emu_sh_t${id}& ${m[1]} = *reinterpret_cast<emu_sh_t${id}*>(emu_shared(${id}, sizeof(emu_sh_t${id})));`;
      })
      .join(' '),
  );
};
const addKernel = (k) => {
  if (kernels.has(k.name)) return;
  const body = strip(k.source);
  const defines = [...body.matchAll(/^#define (\w+)/gm)].map((m) => m[1]);
  const emu = `namespace ns_${k.name} {\n${perBlockShared(body)}\n}\n${defines.map((d) => `#undef ${d}`).join('\n')}\n`;
  kernels.set(k.name, { emu, cuda: k.source, name: k.name });
};

/** The table rows of case `c` (garbage past each row's blocks) and the cache's block count. */
function buildTables(c, M) {
  const { B, BS } = c;
  const cap = M * BS;
  const used = c.lens.map((l) => Math.ceil(Math.min(Math.max(l, 0), cap) / BS));
  const NB = c.garbage === 'test' ? used.reduce((a, u) => a + u, 0) + 2 : B * M + 3;
  const perm = Array.from({ length: NB }, (_, i) => i);
  for (let i = NB - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [perm[i], perm[j]] = [perm[j], perm[i]];
  }
  const big = c.tableDtype === 'int64';
  const extreme = big ? [-(2 ** 40), 2 ** 40, -1, NB, -(2 ** 31), 2 ** 31 - 1] : [-(2 ** 31), 2 ** 31 - 1, -1, NB];
  const tables = [];
  const garbage = [];
  let next = 0;
  for (let b = 0; b < B; b++) {
    garbage.push([]);
    for (let j = 0; j < M; j++) {
      if (j < used[b]) {
        tables.push(perm[next++]);
        continue;
      }
      const g = c.garbage === 'test' ? (j % 2 ? -3 : NB + 5 + j) : c.garbage === 'extreme' ? extreme[j % extreme.length] : c.garbage === 'zero' ? 0 : j % 2 ? -5 : 1_000_000 + j;
      tables.push(g);
      garbage[b].push(g);
    }
  }
  if (c.badBlock !== undefined) tables[c.badBlock] = NB + 7;
  return { tables, NB, garbage };
}

/** float64 attention over the stored values; tokens whose block id is outside the cache are skipped (the kernels' behaviour after reporting). */
function reference(c, M, NB, tables, lens, qv, kv, vv, qsb, qsh) {
  const { B, Hkv, G, D, BS } = c;
  const H = Hkv * G;
  const cap = M * BS;
  const want = [];
  for (let b = 0; b < B; b++) {
    const L = lens[b] > cap || lens[b] < 0 ? 0 : lens[b];
    for (let h = 0; h < H; h++) {
      const kh = Math.floor(h / G);
      const s = [];
      const rows = [];
      for (let t = 0; t < L; t++) {
        const blk = tables[b * M + Math.floor(t / BS)];
        if (blk < 0 || blk >= NB) continue;
        const base = ((blk * BS + (t % BS)) * Hkv + kh) * D;
        let dot = 0;
        for (let d = 0; d < D; d++) dot += qv.back[b * qsb + h * qsh + d] * kv.back[base + d];
        s.push(dot * c.scale);
        rows.push(base);
      }
      const mx = Math.max(...s);
      const w = s.map((x) => Math.exp(x - mx));
      const z = w.reduce((a, x) => a + x, 0);
      for (let d = 0; d < D; d++) {
        let o = 0;
        for (let t = 0; t < w.length; t++) o += w[t] * vv.back[rows[t] + d];
        want.push(w.length ? o / z : 0);
      }
    }
  }
  return want;
}

const cpp = [];
const scratchDecls = [];
for (const [ci, c] of cases.entries()) {
  // The tables cover each row's longest length of the replays that expect no error (a length past
  // a row's blocks is an error the kernels must report: those replays say so).
  c.lens = c.lens.map((l, b) => Math.max(l, ...(c.replays ?? []).filter((r) => Array.isArray(r) || !r.error).map((r) => (Array.isArray(r) ? r : r.lens)[b])));
  const { B, Hkv, G, D, BS } = c;
  const H = Hkv * G;
  const maxLen = Math.max(1, ...c.lens);
  const M = c.M ?? Math.ceil(maxLen / BS) + 1;
  const cap = M * BS;
  const { tables, NB, garbage } = buildTables(c, M);
  const qStride = c.qStride ?? 1;
  const qv = encode(Array.from({ length: B * H * D * qStride }, () => rnd() * 2 - 1), c.dtype);
  const kv = encode(Array.from({ length: NB * BS * Hkv * D }, () => rnd() * 2 - 1), c.dtype);
  const vv = encode(Array.from({ length: NB * BS * Hkv * D }, () => rnd() * 2 - 1), c.dtype);
  const tb = encode(tables, c.tableDtype);
  const qsb = H * D * qStride;
  const qsh = D * qStride;
  // `align` < 16: the caches start `align` bytes past a 16-byte boundary, so a vector load wider
  // than the layout allows would be misaligned here too.
  const shift = c.align < 16 ? c.align : 0;
  const shifted = (bytes) => {
    const o = new Uint8Array(shift + bytes.length);
    o.set(bytes, shift);
    return o;
  };
  const offs = { q: addInput(qv.bytes), k: addInput(shifted(kv.bytes)) + shift, v: addInput(shifted(vv.bytes)) + shift, t: addInput(tb.bytes) };
  const cacheBytes = NB * BS * Hkv * D * esize(c.dtype);
  const replays = (c.replays ?? [c.lens]).map((r) => (Array.isArray(r) ? { lens: r } : r)).map((r) => {
    const lens = r.error === 'len' ? r.lens : r.lens.map((x) => Math.min(x, cap));
    return { ...r, lens, off: addInput(encode(lens, c.lenDtype).bytes), want: reference(c, M, NB, tables, lens, qv, kv, vv, qsb, qsh) };
  });
  c.geom = { M, NB, garbage };
  const variants = onlyV3 ? ['v3'] : ['v2', ...(withV1 ? ['v1'] : []), ...(withV3 ? ['v3'] : [])];
  for (const v of variants) {
    let kern;
    let splits;
    let block;
    let nameCounters = null;
    if (v === 'v3') {
      // The launcher's address forms (llm-paged.ts, KILN_CUDA_PAGED_INDEX=fast): a shift for a
      // power-of-two block size, 32-bit products for a cache under 2^31 elements; --v3-div: the old.
      const pow2 = !v3Div && (c.BS & (c.BS - 1)) === 0;
      const spec = { dtype: c.dtype, tableDtype: c.tableDtype, lenDtype: c.lenDtype, headDim: D, group: G, align: c.align, ...(pow2 ? { blockShift: Math.log2(c.BS) } : {}), ...(!v3Div && NB * c.BS * Hkv * D < 2 ** 31 ? { index32: true } : {}), ...(v3Pp ? { pingpong: true } : {}) };
      kern = P3.generatePagedAttentionV3(spec);
      const plan = P3.pagedPlanV3(spec);
      splits = P3.pagedSplitsV3(B, Hkv, cap, plan.span, c.sms, pinnedSplits);
      block = plan.nw * 32;
      nameCounters = `ns_${kern.name}::${kern.name}_counters`;
      c.plan3 = plan;
    } else if (v === 'v2') {
      const spec = { dtype: c.dtype, tableDtype: c.tableDtype, lenDtype: c.lenDtype, headDim: D, group: G, align: c.align };
      kern = P.generatePagedAttention(spec);
      const plan = P.pagedPlan(spec);
      splits = P.pagedSplits(B, Hkv, cap, plan.span, c.sms);
      block = plan.nw * 32;
      nameCounters = `ns_${kern.name}::${kern.name}_counters`;
      c.plan = plan;
    } else {
      const vb = P1.pagedVectorBytesV1(c.dtype, D);
      const spec = { dtype: c.dtype, tableDtype: c.tableDtype, lenDtype: c.lenDtype, headDim: D, group: G, vec: vb > 0 && c.align % vb === 0 };
      kern = P1.generatePagedAttentionV1(spec);
      splits = Math.max(1, Math.min(32, Math.ceil((2 * c.sms) / (B * Hkv)), Math.ceil(cap / 32)));
      block = P1.pagedWarpsV1(spec) * 32;
    }
    addKernel(kern);
    let reduce = null;
    if (v === 'v1' && splits > 1) {
      reduce = P1.generatePagedReduceV1(c.dtype);
      addKernel(reduce);
    }
    const ct = ctOf(c.dtype);
    const outBytes = B * H * D * esize(c.dtype);
    const accB = ct === 'double' ? 8 : 4;
    // One scratch per (case, kernel), reused by every launch: a replayed graph's partials buffers.
    const sc = `scratch_${ci}_${v}`;
    scratchDecls.push(`static std::vector<unsigned char> ${sc}_acc(${Math.max(1, B * H * splits * D * accB)}, 0xff), ${sc}_ml(${Math.max(1, B * H * splits * 2 * accB)}, 0xff);`);
    const codes = v !== 'v1' ? '11LL, 22LL, 33LL' : '11LL, 22LL';
    for (let rep = 0; rep < 2; rep++) {
      for (const [ri, r] of replays.entries()) {
        const id = runs.length;
        const resident = rep === 0 ? 1 : 4;
        const order = [];
        for (let z = 0; z < splits; z++) for (let y = 0; y < B; y++) for (let x = 0; x < Hkv; x++) order.push([x, y, z]);
        for (let i = order.length - 1; i > 0; i--) {
          const j = Math.floor(rnd() * (i + 1));
          [order[i], order[j]] = [order[j], order[i]];
        }
        const scaleLit = ct === 'double' ? c.scale.toPrecision(17) : `${Math.fround(c.scale).toPrecision(9)}f`;
        const label = JSON.stringify(`${v} ${c.name} lengths [${r.lens.join(', ')}] resident ${resident}`);
        const L = [];
        L.push(`static void run${id}(const unsigned char* in, FILE* out) {`);
        L.push(`  std::vector<unsigned char> o(${outBytes}, 0xff);`);
        L.push(`  unsigned char* pacc = ${sc}_acc.data(); unsigned char* pml = ${sc}_ml.data();`);
        L.push('  unsigned long long claim = 0; long long report[4] = {0, 0, 0, 0};');
        L.push(`  emu_checks_begin(in + ${offs.k}, in + ${offs.k + cacheBytes}, in + ${offs.v}, in + ${offs.v + cacheBytes});`);
        L.push(`  static const unsigned order[][3] = {${order.map((o) => `{${o.join(',')}}`).join(',')}};`);
        L.push(`  emu_launch_conc(${label}, order, ${order.length}, {${Hkv}, ${B}, ${splits}}, ${block}, ${resident}, ${id * 7919 + 1}ULL, [&] { ns_${kern.name}::${kern.name}(&claim, report, ${codes}, AnyPtr{(void*)(in + ${offs.q})}, ${qsb}LL, ${qsh}LL, AnyPtr{(void*)(in + ${offs.k})}, AnyPtr{(void*)(in + ${offs.v})}, AnyPtr{(void*)(in + ${offs.t})}, ${M}LL, AnyPtr{(void*)(in + ${r.off})}, AnyPtr{(void*)o.data()}, AnyPtr{(void*)pacc}, AnyPtr{(void*)pml}, ${NB}, ${BS}, ${M}, ${Hkv}, ${scaleLit}, ${splits}); });`);
        if (reduce) {
          const rorder = Array.from({ length: B * H }, (_, i) => `{${i},0,0}`);
          L.push(`  static const unsigned rorder[][3] = {${rorder.join(',')}};`);
          L.push(`  emu_launch_conc(${label}, rorder, ${B * H}, {${B * H}, 1, 1}, ${Math.min(256, Math.ceil(D / 32) * 32)}, ${resident}, ${id * 7919 + 2}ULL, [&] { ns_${reduce.name}::${reduce.name}(AnyPtr{(void*)o.data()}, AnyPtr{(void*)pacc}, AnyPtr{(void*)pml}, ${D}, ${splits}); });`);
        }
        L.push('  long long nonzero = 0;');
        if (nameCounters) L.push(`  for (int i = 0; i < ${P.PAGED_COUNTERS}; i++) nonzero += ${nameCounters}[i] != 0;`);
        L.push('  long long meta[6] = {report[0], report[1], report[2], nonzero, emu_early_count, emu_oob_loads};');
        L.push('  fwrite(meta, 8, 6, out);');
        L.push('  fwrite(o.data(), 1, o.size(), out);');
        L.push('  fflush(out);');
        L.push('}');
        cpp.push(L.join('\n'));
        runs.push({ c, v, splits, outBytes, r, ri, resident });
      }
    }
  }
}

// The CUDA subset the kernels use beyond emu.h, and the interleaving launcher.
const extras = String.raw`
#include <csignal>
#include <unistd.h>
struct __align__(16) uint4 { unsigned x, y, z, w; };
struct __align__(8) uint2 { unsigned x, y; };
inline float __expf(float x) { return expf(x); }

// Per launch: K/V loads outside the caches, and whether a block counted its split in before all
// of its threads had fenced (blocks interleave only at preemption points, so a missing barrier
// between the fences and the count may not show in the numbers; on the GPU it is a race).
static const unsigned char *emu_k0, *emu_k1, *emu_v0, *emu_v1;
static long long emu_oob_loads;
static long long emu_early_count;
inline void emu_checks_begin(const unsigned char* k0, const unsigned char* k1, const unsigned char* v0, const unsigned char* v1) {
  emu_k0 = k0; emu_k1 = k1; emu_v0 = v0; emu_v1 = v1; emu_oob_loads = 0; emu_early_count = 0;
}
template <typename T> inline T __ldg(const T* p) {
  const unsigned char* c = reinterpret_cast<const unsigned char*>(p);
  const bool in = (c >= emu_k0 && c + sizeof(T) <= emu_k1) || (c >= emu_v0 && c + sizeof(T) <= emu_v1);
  if (!in) { emu_oob_loads++; T z; std::memset(&z, 0, sizeof(T)); return z; }
  return *p;
}

// The state of one live block: its threads' fibers and the barriers, shuffle buffer and shared
// memory emu.h keeps in globals (swapped in while the block runs).
static const unsigned EMU_SLOT_THREADS = 256;
static const size_t EMU_STACK = 1 << 16;
static const unsigned long long EMU_HANG_ROUNDS = 3000000ULL;
struct EmuBlock {
  unsigned bx, by, bz;
  void* sp[EMU_SLOT_THREADS];
  bool done[EMU_SLOT_THREADS];
  const EmuBarrier* waiting[EMU_SLOT_THREADS];
  unsigned wait_gen[EMU_SLOT_THREADS];
  EmuBarrier bar, warp[32];
  uint64_t shfl[EMU_SLOT_THREADS];
  unsigned fenced;
  int or_value;
  alignas(16) unsigned char smem[1 << 16];
  long smem_off[64];
  size_t smem_used;
  char* stacks;
};
static EmuBlock* emu_cur_block;
static unsigned emu_fenced;
static int emu_or_value;
static const char* emu_what = "";

/** The running block's shared array number id (same address for all its threads). */
inline void* emu_shared(int id, size_t bytes) {
  EmuBlock* b = emu_cur_block;
  if (b->smem_off[id] < 0) {
    b->smem_off[id] = (long)b->smem_used;
    b->smem_used = (b->smem_used + bytes + 15) & ~(size_t)15;
    if (b->smem_used > sizeof(b->smem)) { std::fprintf(stderr, "emu: shared memory past 64 KiB in %s\n", emu_what); std::exit(5); }
  }
  return b->smem + b->smem_off[id];
}

// Preemption points: the thread goes back to the scheduler, runnable; another block may run first.
inline void emu_preempt() { emu_yield(); }
template <typename T> inline T __ldcg(const T* p) { emu_preempt(); return *p; }
inline void __threadfence() { emu_fenced++; emu_preempt(); }
inline void __threadfence_system() {}
inline void __nanosleep(unsigned) { emu_preempt(); }
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  emu_preempt();
  if (emu_fenced < blockDim.x) emu_early_count = 1;
  unsigned o = *p; *p = o + v; return o;
}
inline unsigned atomicInc(unsigned* p, unsigned v) { emu_preempt(); unsigned o = *p; *p = o >= v ? 0 : o + 1; return o; }
inline unsigned atomicExch(unsigned* p, unsigned v) { emu_preempt(); unsigned o = *p; *p = v; return o; }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v) { emu_preempt(); unsigned long long o = *p; if (o == cmp) *p = v; return o; }
inline int __syncthreads_or(int p) {
  if (p) emu_or_value = 1;
  __syncthreads();
  const int r = emu_or_value;
  __syncthreads();
  if (threadIdx.x == 0) emu_or_value = 0;
  __syncthreads();
  return r;
}

static void emu_load(EmuBlock* b, unsigned n) {
  std::memcpy(emu_sp, b->sp, n * sizeof(void*));
  std::memcpy(emu_done, b->done, n * sizeof(bool));
  std::memcpy(emu_waiting, b->waiting, n * sizeof(void*));
  std::memcpy(emu_wait_gen, b->wait_gen, n * sizeof(unsigned));
  std::memcpy(emu_shfl, b->shfl, n * sizeof(uint64_t));
  emu_block_barrier = b->bar;
  for (int w = 0; w < 32; w++) emu_warp_barrier[w] = b->warp[w];
  emu_fenced = b->fenced;
  emu_or_value = b->or_value;
  blockIdx.x = b->bx; blockIdx.y = b->by; blockIdx.z = b->bz;
  emu_cur_block = b;
}
static void emu_save(EmuBlock* b, unsigned n) {
  std::memcpy(b->sp, emu_sp, n * sizeof(void*));
  std::memcpy(b->done, emu_done, n * sizeof(bool));
  std::memcpy(b->waiting, emu_waiting, n * sizeof(void*));
  std::memcpy(b->wait_gen, emu_wait_gen, n * sizeof(unsigned));
  std::memcpy(b->shfl, emu_shfl, n * sizeof(uint64_t));
  b->bar = emu_block_barrier;
  for (int w = 0; w < 32; w++) b->warp[w] = emu_warp_barrier[w];
  b->fenced = emu_fenced;
  b->or_value = emu_or_value;
}

/**
 * Runs body over the blocks order[0..n) of a 3-d grid: at most 'resident' blocks live at once
 * (the next in order takes a freed slot), a random live block (seeded) runs each round (its
 * runnable threads each to their next barrier, shuffle or preemption point). A launch in which
 * no block finishes for EMU_HANG_ROUNDS rounds is a hang (a block waiting for another); all
 * threads of a block waiting at barriers nobody else reaches is a deadlock. Both end the process.
 */
inline void emu_launch_conc(const char* what, const unsigned (*order)[3], unsigned n, Dim3 grid, unsigned block, unsigned resident, unsigned long long rng, const std::function<void()>& body) {
  static EmuBlock* slots[8];
  if (block > EMU_SLOT_THREADS || resident < 1 || resident > 8) { std::fprintf(stderr, "emu: %u threads or %u resident blocks not supported\n", block, resident); std::exit(5); }
  emu_what = what;
  gridDim = grid;
  blockDim.x = block;
  emu_body = &body;
  EmuBlock* live[8];
  unsigned nlive = 0, next = 0;
  auto admit = [&]() {
    while (nlive < resident && next < n) {
      unsigned s = 0;
      for (;; s++) { bool used = false; for (unsigned i = 0; i < nlive; i++) used |= live[i] == slots[s]; if (!used) break; }
      if (!slots[s]) {
        slots[s] = new EmuBlock();
        slots[s]->stacks = static_cast<char*>(std::aligned_alloc(64, EMU_STACK * EMU_SLOT_THREADS));
      }
      EmuBlock* b = slots[s];
      b->bx = order[next][0]; b->by = order[next][1]; b->bz = order[next][2];
      next++;
      for (unsigned t = 0; t < block; t++) {
        // A fresh stack that emu_switch "returns" into the trampoline from (as emu.h's emu_launch).
        void** sp = reinterpret_cast<void**>(b->stacks + EMU_STACK * (t + 1));
        *--sp = nullptr;
        *--sp = reinterpret_cast<void*>(&emu_trampoline);
        for (int r = 0; r < 6; r++) *--sp = nullptr;
        b->sp[t] = sp; b->done[t] = false; b->waiting[t] = nullptr; b->wait_gen[t] = 0; b->shfl[t] = 0;
      }
      b->bar = EmuBarrier{block};
      for (int w = 0; w < 32; w++) b->warp[w] = EmuBarrier{32};
      b->fenced = 0; b->or_value = 0; b->smem_used = 0;
      for (int i = 0; i < 64; i++) b->smem_off[i] = -1;
      live[nlive++] = b;
    }
  };
  admit();
  unsigned long long idle = 0;
  while (nlive > 0) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    const unsigned pick = (unsigned)((rng >> 33) % nlive);
    EmuBlock* b = live[pick];
    emu_load(b, block);
    unsigned alive = 0;
    bool ran = false;
    for (unsigned t = 0; t < block; t++) {
      if (emu_done[t]) continue;
      alive++;
      if (emu_waiting[t] && emu_waiting[t]->generation == emu_wait_gen[t]) continue;
      emu_waiting[t] = nullptr;
      emu_cur = t;
      threadIdx.x = t;
      ran = true;
      emu_switch(&emu_sched_sp, emu_sp[t]);
    }
    emu_save(b, block);
    bool finished = true;
    for (unsigned t = 0; t < block; t++) finished &= b->done[t];
    if (finished) {
      live[pick] = live[--nlive];
      admit();
      idle = 0;
      continue;
    }
    if (!ran && alive > 0) {
      std::fprintf(stderr, "emu: deadlock in %s: block (%u, %u, %u): %u threads wait at barriers that others never reach\n", what, b->bx, b->by, b->bz, alive);
      std::exit(3);
    }
    if (++idle > EMU_HANG_ROUNDS) {
      std::fprintf(stderr, "emu: hang in %s: no block finished in %llu scheduler rounds (%u live, %u of %u blocks not started): a block waits for another\n", what, EMU_HANG_ROUNDS, nlive, n - next, n);
      std::exit(3);
    }
  }
}

static void emu_fault(int sig) {
  static const char m[] = "emu: fatal signal in ";
  if (write(2, m, sizeof(m) - 1) < 0) {}
  if (write(2, emu_what, std::strlen(emu_what)) < 0) {}
  if (write(2, "\n", 1) < 0) {}
  _exit(6);
}
static void emu_alarm(int) {
  static const char m[] = "emu: hang: the process alarm fired (a thread spins without reaching a preemption point)\n";
  if (write(2, m, sizeof(m) - 1) < 0) {}
  if (write(2, emu_what, std::strlen(emu_what)) < 0) {}
  if (write(2, "\n", 1) < 0) {}
  _exit(3);
}
`;
const preludeEmu = PRELUDE.split('\n').filter((l) => !l.includes('asm(')).join('\n');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-paged-emu-'));
const main = `int main(int argc, char** argv) {
  std::signal(SIGALRM, emu_alarm);
  std::signal(SIGSEGV, emu_fault);
  std::signal(SIGBUS, emu_fault);
  alarm(${Math.max(1, Math.round(timeoutS))});
  FILE* f = fopen(argv[1], "rb");
  std::vector<unsigned char> in(${Math.max(1, inBytes)});
  if (fread(in.data(), 1, ${inBytes}, f) != ${inBytes}) return 2;
  fclose(f);
  FILE* out = fopen(argv[2], "wb");
${runs.map((_, i) => `  run${i}(in.data(), out);`).join('\n')}
  fclose(out);
  return 0;
}`;
const header = `#include "${path.join(root, 'scripts/cuda-emu/emu.h')}"\n#include <cstdio>\n#include <vector>\n${extras}\n${preludeEmu}\n${REPORT_INDEX_C}\n`;
const text = `${header}${[...kernels.values()].map((k) => k.emu).join('\n')}\n${scratchDecls.join('\n')}\n${cpp.join('\n\n')}\n${main}\n`;
fs.writeFileSync(path.join(dir, 'emu.cpp'), text);
fs.writeFileSync(path.join(dir, 'in.bin'), Buffer.concat(inputs.map((b) => Buffer.from(b))));

let failures = 0;

if (selftest) {
  // The emulator must report a kernel whose blocks wait for each other: block 0 spins until every
  // other block has counted in, which needs them resident together. One resident block: a hang.
  const spin = `${header}
namespace ns_spin {
__device__ unsigned arrived;
__global__ void spin_fold() {
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0) { while (atomicAdd(&arrived, 0u) < gridDim.x - 1) __nanosleep(100); }
    else atomicAdd(&arrived, 1u);
  }
  __syncthreads();
}
}
int main() {
  std::signal(SIGALRM, emu_alarm);
  alarm(60);
  static const unsigned order[][3] = {{0,0,0},{1,0,0},{2,0,0},{3,0,0}};
  emu_launch_conc("selftest spin-wait fold, resident 1", order, 4, {4, 1, 1}, 32, 1, 1ULL, [] { ns_spin::spin_fold(); });
  return 0;
}
`;
  fs.writeFileSync(path.join(dir, 'selftest.cpp'), spin);
  execFileSync('g++', ['-std=c++17', '-O1', '-w', '-o', path.join(dir, 'selftest'), path.join(dir, 'selftest.cpp')], { stdio: 'inherit' });
  const r = spawnSync(path.join(dir, 'selftest'), { encoding: 'utf8' });
  if (r.status === 3 && /emu: hang in selftest/.test(r.stderr)) console.log(`ok   emulator self-check: a spin-wait between blocks is reported (${r.stderr.trim().split('\n')[0].slice(0, 120)}...)`);
  else {
    failures++;
    console.log(`FAIL emulator self-check: a spin-wait kernel was not reported as a hang (status ${r.status}, stderr ${r.stderr})`);
  }
}

if (nvcc) {
  // Every variant the cuda test, the benches and the emulated cases generate (the launcher's
  // allocations are 256-byte aligned: align 16; the emulated cases add 8/4/2), v2 and v1.
  const specs = new Map();
  const add = (dtype, G, D, tableDtype = 'int32', lenDtype = 'int32', align = 16) => specs.set(`${dtype} ${G} ${D} ${tableDtype} ${lenDtype} ${align}`, { dtype, group: G, headDim: D, tableDtype, lenDtype, align });
  for (const dt of ['float32', 'float16', 'bfloat16', 'float64']) add(dt, 2, 128); // test b1 (Qwen3 heads), graph, bench --dtype
  for (const [G, D] of [[1, 128], [4, 128], [8, 128], [16, 128], [2, 64], [3, 80], [2, 256], [2, 7]]) for (const dt of ['float32', 'bfloat16']) add(dt, G, D); // test shapes
  add('float16', 8, 64);
  add('float16', 2, 128);
  for (const t of ['int32', 'int64']) for (const l of ['int32', 'int64']) add('bfloat16', 2, 128, t, l); // decode bench (Qwen3-0.6B), int64 test case
  add('float32', 2, 128, 'int64', 'int64');
  for (const c of cases) add(c.dtype, c.G, c.D, c.tableDtype, c.lenDtype, c.align);
  const units = new Map();
  for (const s of specs.values()) {
    const k2 = P.generatePagedAttention(s);
    units.set(k2.name, k2.source);
    const k3 = P3.generatePagedAttentionV3(s);
    units.set(k3.name, k3.source);
    const vb = P1.pagedVectorBytesV1(s.dtype, s.headDim);
    for (const vec of new Set([false, vb > 0 && s.align % vb === 0])) {
      const k1 = P1.generatePagedAttentionV1({ ...s, vec });
      units.set(k1.name, k1.source);
    }
    const r1 = P1.generatePagedReduceV1(s.dtype);
    units.set(r1.name, r1.source);
  }
  // KILN_PDL=1: every kernel body starts with the wait (pdl.ts); the Qwen3 decode variants.
  for (const name of [...units.keys()].filter((n) => /bfloat16_int32_int32_d128_g2/.test(n))) units.set(`${name}__pdl`, insertPdlPrologue(units.get(name), 132));
  for (const k of kernels.values()) units.set(k.name, k.cuda);
  for (const [name, source] of units) {
    const f = path.join(dir, `${name}.cu`);
    fs.writeFileSync(f, source);
    // ptxas -v reports on stderr; a compile error throws (and fails the script).
    const log = execFileSync('bash', ['-c', `nvcc -arch=sm_90 -Xptxas -v -cubin -o /dev/null '${f}' 2>&1`], { encoding: 'utf8' });
    if (!name.startsWith('kiln_paged_attn_v1') && name.startsWith('kiln_paged_attn_')) {
      const regs = /Used (\d+) registers/.exec(log)?.[1];
      const spill = /(\d+) bytes spill stores/.exec(log)?.[1];
      const stack = /(\d+) bytes stack frame/.exec(log)?.[1];
      console.log(`nvcc sm_90 ${name}: ${regs} registers, ${stack} bytes stack, ${spill} bytes spilled`);
    }
  }
  console.log(`nvcc -arch=sm_90 -cubin: ${units.size} kernels compiled (v2, v3, v1, v1 reduce, PDL variants)`);
}

const t0 = Date.now();
execFileSync('g++', ['-std=c++17', '-O1', '-w', '-o', path.join(dir, 'emu'), path.join(dir, 'emu.cpp')], { stdio: 'inherit' });
const t1 = Date.now();
const er = spawnSync(path.join(dir, 'emu'), [path.join(dir, 'in.bin'), path.join(dir, 'out.bin')], { stdio: ['ignore', 'inherit', 'pipe'], encoding: 'utf8' });
const t2 = Date.now();
if (er.status !== 0) {
  console.log(`FAIL the emulator stopped (status ${er.status}, signal ${er.signal}): ${er.stderr.trim()}`);
  failures++;
}
const outBuf = fs.existsSync(path.join(dir, 'out.bin')) ? fs.readFileSync(path.join(dir, 'out.bin')) : Buffer.alloc(0);
let pos = 0;
const tol = (d) => (d === 'bfloat16' ? [1e-2, 8e-3] : d === 'float16' ? [2e-3, 2e-3] : d === 'float32' ? [2e-5, 2e-5] : [1e-6, 1e-6]);
let done = 0;
for (const run of runs) {
  const { c, r } = run;
  if (pos + 48 + run.outBytes > outBuf.length) break;
  done++;
  const meta = new BigInt64Array(outBuf.buffer.slice(outBuf.byteOffset + pos, outBuf.byteOffset + pos + 48));
  pos += 48;
  const bytes = new Uint8Array(outBuf.buffer.slice(outBuf.byteOffset + pos, outBuf.byteOffset + pos + run.outBytes));
  pos += run.outBytes;
  const arr = storageArray(c.dtype, bytes.buffer, 0, run.outBytes / esize(c.dtype));
  const dec = decoder(c.dtype);
  const [atol, rtol] = tol(c.dtype);
  const problems = [];
  const code = Number(meta[0]);
  const wantCode = r.error === 'block' ? 11 : r.error === 'len' ? 22 : 0;
  if (code !== wantCode) problems.push(`error code ${code} (value ${meta[1]}, size ${meta[2]}), expected ${wantCode}`);
  let note = '';
  if (r.error === 'block' && code === 11 && c.badBlock === undefined) {
    // The report must name a garbage entry of a row whose length reaches past its blocks, and the cache's size.
    const value = Number(meta[1]);
    const rowsPast = r.lens.map((l, b) => (Math.ceil(l / c.BS) > Math.ceil(c.lens[b] / c.BS) ? b : -1)).filter((b) => b >= 0);
    if (!rowsPast.some((b) => c.geom.garbage[b].includes(value))) problems.push(`reported ${value}, not a garbage entry inside a length`);
    if (Number(meta[2]) !== c.geom.NB) problems.push(`reported size ${meta[2]}, expected the cache's ${c.geom.NB} blocks`);
    note = ` (reported: index ${value} of size ${meta[2]})`;
  }
  if (meta[3] !== 0n) problems.push(`${meta[3]} split counters not back at 0`);
  if (meta[4] !== 0n) problems.push('a split counter was incremented before every thread of its block had fenced its partials');
  if (meta[5] !== 0n) problems.push(`${meta[5]} K/V loads outside the caches`);
  let worst = 0;
  for (let i = 0; i < r.want.length; i++) {
    const g = dec(arr[i]);
    const w = r.want[i];
    const err = Math.abs(g - w);
    if (!(err <= atol + rtol * Math.abs(w))) {
      problems.push(`element ${i}: ${g} vs float64 ${w}`);
      if (problems.length > 4) break;
    }
    worst = Math.max(worst, err);
  }
  const pl = run.v === 'v2' ? c.plan : run.v === 'v3' ? c.plan3 : null;
  const planTag = pl ? ` [${pl.layout.vb}B r${pl.layout.r} nv${pl.layout.nv} u${pl.u} span${pl.span}]` : '';
  const lensTag = (c.replays ?? []).length > 1 ? ` lengths [${r.lens.join(', ')}]` : '';
  const line = `${run.v} ${c.name}${lensTag}: splits ${run.splits}${planTag}, resident ${run.resident}, max err ${worst.toExponential(2)}${note}`;
  if (problems.length) {
    failures++;
    console.log(`FAIL ${line}\n  ${problems.join('\n  ')}`);
  } else console.log(`ok   ${line}`);
}
if (done < runs.length) {
  failures++;
  console.log(`FAIL ${runs.length - done} run(s) did not complete`);
}
console.log(`${cases.length} cases, ${runs.length} runs, ${kernels.size} kernels: g++ ${((t1 - t0) / 1000).toFixed(1)} s, run ${((t2 - t1) / 1000).toFixed(1)} s; ${failures} failure(s)`);
if (!keep) fs.rmSync(dir, { recursive: true, force: true });
else console.log(`kept ${dir}`);
process.exit(failures ? 1 : 0);
