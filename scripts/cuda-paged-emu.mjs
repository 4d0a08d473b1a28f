#!/usr/bin/env node
// Dev check without a GPU for the cuda llm.pagedAttention kernels (src/kernels/cuda/codegen/
// paged-attention.ts, and paged-attention-v1.ts with --v1): runs their CUDA C on the host
// (scripts/cuda-emu/emu.h: a fiber per CUDA thread) and compares with a float64 loop over the same
// dtype-rounded inputs. The blocks of a launch run in a shuffled order (each case twice, with two
// orders), so the last-block-done fold of the split partials is exercised whichever block is last;
// after every launch the split counters must be back at zero, and every thread of a block must have
// fenced its partials before the block's counter increment (blocks run one at a time here, so a
// missing barrier would not show in the numbers; on the GPU it is a race). Cases: batch 1 and ragged batches,
// contexts crossing block and chunk boundaries, one to many chunks per split, GQA ratios 1-16,
// head dims 7-256, the vector layouts (16/8/4-byte and scalar loads, padded rows), float32,
// float16, bfloat16 and float64, int32/int64 tables and lengths, table entries past a sequence's
// length that are not block ids (never read), a strided query, and the device-side errors (a bad
// block id, a length past the table).
//   npm run build && node scripts/cuda-paged-emu.mjs [--filter substring] [--v1] [--nvcc] [--keep]
// --nvcc also compiles every generated variant with `nvcc -arch=sm_90 -cubin` (and prints
// registers/spills of the v2 ones). Numbers only: the H200 runs test/cuda-paged-attention.test.ts.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const imp = (p) => import(pathToFileURL(path.join(root, 'dist', p)).href);
const P = await imp('src/kernels/cuda/codegen/paged-attention.js');
const P1 = await imp('src/kernels/cuda/codegen/paged-attention-v1.js');
const { PRELUDE } = await imp('src/kernels/cuda/codegen/ctypes.js');
const { REPORT_INDEX_C } = await imp('src/runtime/cuda/device-errors.js');
const { encoder, decoder, storageArray } = await imp('src/tensor/typed.js');
const { itemSize } = await imp('src/tensor/dtype.js');

const argv = process.argv.slice(2);
const fi = argv.indexOf('--filter');
const filter = fi >= 0 ? argv[fi + 1] : '';
const withV1 = argv.includes('--v1');
const nvcc = argv.includes('--nvcc');
const keep = argv.includes('--keep');

let seed = 20261203;
const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;

/**
 * A case: geometry, lengths, and how the launch is planned. sms: the SM count the split rule
 * sees (small values give few splits, so each split loops over several chunks).
 */
const C = (name, o) => ({ name, dtype: 'bfloat16', B: 1, Hkv: 8, G: 2, D: 128, BS: 16, M: null, lens: [129], sms: 132, align: 16, tableDtype: 'int32', lenDtype: 'int32', scale: 0.0883883, ...o });
const cases = [
  C('bf16 qwen3 b1 len129 (one chunk per split)', {}),
  C('bf16 qwen3 b1 len384', { lens: [384] }),
  C('bf16 qwen3 b1 len2048 (64 splits)', { lens: [2048] }),
  C('bf16 qwen3 b1 len1 and a long table', { lens: [1], M: 64 }),
  C('bf16 qwen3 b1 len32 (exactly one chunk: direct write)', { lens: [32] }),
  C('bf16 qwen3 b1 len33 (two chunks)', { lens: [33] }),
  C('bf16 qwen3 b1 len500, 4 splits (4 chunks per split)', { Hkv: 1, sms: 1, lens: [500] }),
  C('bf16 qwen3 b1 len300, one split (direct, 10 chunks)', { Hkv: 8, sms: 1, lens: [300] }),
  C('bf16 b3 ragged with 0, int64 tables and lengths', { B: 3, Hkv: 2, lens: [0, 1, 150], tableDtype: 'int64', lenDtype: 'int64' }),
  C('bf16 b8 len 256 ragged', { B: 8, Hkv: 4, lens: [256, 255, 17, 16, 15, 64, 200, 129] }),
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
  C('bf16 D128 align 4 (4-byte loads)', { align: 4, Hkv: 2, lens: [140] }),
  C('bf16 D128 align 2 (scalar loads)', { align: 2, Hkv: 2, lens: [140] }),
  C('f32 D128 align 8', { dtype: 'float32', align: 8, Hkv: 2, lens: [140] }),
  C('bf16 BS1', { BS: 1, Hkv: 2, lens: [45] }),
  C('bf16 BS3 len 100', { BS: 3, Hkv: 2, lens: [100] }),
  C('bf16 strided query', { Hkv: 2, lens: [77], qStride: 3 }),
  C('error: bad block id inside the length', { Hkv: 2, lens: [40], badBlock: 1, expectError: 'block' }),
  C('error: length past the table', { Hkv: 2, lens: [40], M: 2, expectError: 'len' }),
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

const kernels = new Map(); // name -> { source (emu), cuda source, names of #defines }
const runs = [];
const inputs = [];
let inBytes = 0;
const addInput = (bytes) => {
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
const addKernel = (k) => {
  if (kernels.has(k.name)) return;
  const body = strip(k.source);
  const defines = [...body.matchAll(/^#define (\w+)/gm)].map((m) => m[1]);
  const emu = `namespace ns_${k.name} {\n${body.replace(/__shared__/g, 'static')}\n}\n${defines.map((d) => `#undef ${d}`).join('\n')}\n`;
  kernels.set(k.name, { emu, cuda: k.source, name: k.name });
};

const cpp = [];
for (const c of cases) {
  const { B, Hkv, G, D, BS } = c;
  const H = Hkv * G;
  const maxLen = Math.max(1, ...c.lens);
  const M = c.M ?? Math.ceil(maxLen / BS) + 1;
  const NB = B * M + 3;
  const cap = M * BS;
  // Block ids: a shuffled permutation; entries past a row's length are garbage (never read).
  const perm = Array.from({ length: NB }, (_, i) => i);
  for (let i = NB - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [perm[i], perm[j]] = [perm[j], perm[i]];
  }
  const tables = [];
  for (let b = 0; b < B; b++) {
    const used = Math.ceil(Math.min(c.lens[b], cap) / BS);
    for (let j = 0; j < M; j++) tables.push(j < used ? perm[b * M + j] : j % 2 ? -5 : 1_000_000 + j);
  }
  if (c.badBlock !== undefined) tables[c.badBlock] = NB + 7;
  const lens = c.lens.map((x) => (c.expectError === 'len' ? x : Math.min(x, cap)));
  const qStride = c.qStride ?? 1;
  const qv = encode(Array.from({ length: B * H * D * qStride }, () => rnd() * 2 - 1), c.dtype);
  const kv = encode(Array.from({ length: NB * BS * Hkv * D }, () => rnd() * 2 - 1), c.dtype);
  const vv = encode(Array.from({ length: NB * BS * Hkv * D }, () => rnd() * 2 - 1), c.dtype);
  const tb = encode(tables, c.tableDtype);
  const lb = encode(lens, c.lenDtype);
  const qsb = H * D * qStride;
  const qsh = D * qStride;
  // float64 reference over the stored values.
  const want = [];
  for (let b = 0; b < B; b++) {
    const L = lens[b] > cap || lens[b] < 0 ? 0 : lens[b];
    for (let h = 0; h < H; h++) {
      const kh = Math.floor(h / G);
      const s = [];
      const rows = [];
      let bad = false;
      for (let t = 0; t < L; t++) {
        const blk = tables[b * M + Math.floor(t / BS)];
        if (blk < 0 || blk >= NB) {
          bad = true;
          continue;
        }
        const base = ((blk * BS + (t % BS)) * Hkv + kh) * D;
        let dot = 0;
        for (let d = 0; d < D; d++) dot += qv.back[b * qsb + h * qsh + d] * kv.back[base + d];
        s.push(dot * c.scale);
        rows.push(base);
      }
      void bad;
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
  const offs = { q: addInput(qv.bytes), k: addInput(kv.bytes), v: addInput(vv.bytes), t: addInput(tb.bytes), l: addInput(lb.bytes) };
  c.want = want;
  c.runs = [];
  const variants = [{ v: 'v2' }, ...(withV1 ? [{ v: 'v1' }] : [])];
  for (const { v } of variants) {
    let kern;
    let splits;
    let block;
    let nameCounters = null;
    if (v === 'v2') {
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
    for (let rep = 0; rep < 2; rep++) {
      const id = runs.length;
      const order = [];
      for (let z = 0; z < splits; z++) for (let y = 0; y < B; y++) for (let x = 0; x < Hkv; x++) order.push([x, y, z]);
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(rnd() * (i + 1));
        [order[i], order[j]] = [order[j], order[i]];
      }
      const scaleLit = ct === 'double' ? c.scale.toPrecision(17) : `${Math.fround(c.scale).toPrecision(9)}f`;
      const L = [];
      L.push(`static void run${id}(const unsigned char* in, FILE* out) {`);
      L.push(`  std::vector<unsigned char> o(${outBytes}, 0xff), pacc(${Math.max(1, B * H * splits * D * accB)}, 0xff), pml(${Math.max(1, B * H * splits * 2 * accB)}, 0xff);`);
      L.push('  unsigned long long claim = 0; long long report[4] = {0, 0, 0, 0}; emu_early_count = 0;');
      L.push(`  static const unsigned order[][3] = {${order.map((o) => `{${o.join(',')}}`).join(',')}};`);
      L.push(`  emu_launch3(order, ${order.length}, {${Hkv}, ${B}, ${splits}}, ${block}, [&] { ns_${kern.name}::${kern.name}(&claim, report, 11LL, 22LL, AnyPtr{(void*)(in + ${offs.q})}, ${qsb}LL, ${qsh}LL, AnyPtr{(void*)(in + ${offs.k})}, AnyPtr{(void*)(in + ${offs.v})}, AnyPtr{(void*)(in + ${offs.t})}, ${M}LL, AnyPtr{(void*)(in + ${offs.l})}, AnyPtr{(void*)o.data()}, AnyPtr{(void*)pacc.data()}, AnyPtr{(void*)pml.data()}, ${NB}, ${BS}, ${M}, ${Hkv}, ${scaleLit}, ${splits}); });`);
      if (reduce) L.push(`  emu_launch(${B * H}, ${Math.min(256, Math.ceil(D / 32) * 32)}, [&] { ns_${reduce.name}::${reduce.name}(AnyPtr{(void*)o.data()}, AnyPtr{(void*)pacc.data()}, AnyPtr{(void*)pml.data()}, ${D}, ${splits}); });`);
      L.push(`  long long nonzero = 0;`);
      if (nameCounters) L.push(`  for (int i = 0; i < ${P.PAGED_COUNTERS}; i++) nonzero += ${nameCounters}[i] != 0;`);
      L.push(`  long long meta[4] = {report[0], report[1], nonzero, emu_early_count};`);
      L.push('  fwrite(meta, 8, 4, out);');
      L.push('  fwrite(o.data(), 1, o.size(), out);');
      L.push('}');
      cpp.push(L.join('\n'));
      runs.push({ c, v, splits, outBytes });
      c.runs.push(id);
    }
  }
}

// The CUDA subset the kernels use beyond emu.h.
const extras = `
struct __align__(16) uint4 { unsigned x, y, z, w; };
struct __align__(8) uint2 { unsigned x, y; };
template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __ldcg(const T* p) { return *p; }
inline float __expf(float x) { return expf(x); }
// Blocks run one after another here, so a block's partials are all written before the next block
// runs whatever the kernel's order; instead, the split counter's increment checks that every thread
// of the block has passed a __threadfence first (the order the GPU needs: write, fence, barrier,
// count), and the run reports it otherwise.
static unsigned emu_fenced;
static int emu_early_count;
inline void __threadfence() { emu_fenced++; }
inline void __threadfence_system() {}
inline unsigned atomicAdd(unsigned* p, unsigned v) { if (emu_fenced < blockDim.x) emu_early_count = 1; unsigned o = *p; *p = o + v; return o; }
inline unsigned atomicExch(unsigned* p, unsigned v) { unsigned o = *p; *p = v; return o; }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v) { unsigned long long o = *p; if (o == cmp) *p = v; return o; }
static int emu_or_value;
inline int __syncthreads_or(int p) {
  if (p) emu_or_value = 1;
  __syncthreads();
  const int r = emu_or_value;
  __syncthreads();
  if (threadIdx.x == 0) emu_or_value = 0;
  __syncthreads();
  return r;
}
/** emu_launch over a 3-d grid, blocks in the given order. */
inline void emu_launch3(const unsigned (*order)[3], unsigned n, Dim3 grid, unsigned block, const std::function<void()>& body) {
  static const size_t STACK = 1 << 16;
  static char* stacks = static_cast<char*>(std::aligned_alloc(64, STACK * 1024));
  gridDim = grid;
  blockDim.x = block;
  emu_body = &body;
  emu_block_barrier = EmuBarrier{block};
  for (unsigned w = 0; w < 32; w++) emu_warp_barrier[w] = EmuBarrier{32};
  for (unsigned i = 0; i < n; i++) {
    blockIdx.x = order[i][0]; blockIdx.y = order[i][1]; blockIdx.z = order[i][2];
    emu_fenced = 0;
    for (unsigned t = 0; t < block; t++) {
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
        if (emu_waiting[t] && emu_waiting[t]->generation == emu_wait_gen[t]) continue;
        emu_waiting[t] = nullptr;
        emu_cur = t;
        threadIdx.x = t;
        ran = true;
        emu_switch(&emu_sched_sp, emu_sp[t]);
      }
      if (!ran && alive > 0) { std::fprintf(stderr, "emu: deadlock\\n"); std::abort(); }
    }
  }
}
`;
const preludeEmu = PRELUDE.split('\n').filter((l) => !l.includes('asm(')).join('\n');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-paged-emu-'));
const main = `int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb");
  std::vector<unsigned char> in(${Math.max(1, inBytes)});
  if (fread(in.data(), 1, ${inBytes}, f) != ${inBytes}) return 2;
  fclose(f);
  FILE* out = fopen(argv[2], "wb");
${runs.map((_, i) => `  run${i}(in.data(), out);`).join('\n')}
  fclose(out);
  return 0;
}`;
const text = `#include "${path.join(root, 'scripts/cuda-emu/emu.h')}"\n#include <cstdio>\n#include <vector>\n${extras}\n${preludeEmu}\n${REPORT_INDEX_C}\n${[...kernels.values()].map((k) => k.emu).join('\n')}\n${cpp.join('\n\n')}\n${main}\n`;
fs.writeFileSync(path.join(dir, 'emu.cpp'), text);
fs.writeFileSync(path.join(dir, 'in.bin'), Buffer.concat(inputs.map((b) => Buffer.from(b))));

if (nvcc) {
  for (const k of kernels.values()) {
    const f = path.join(dir, `${k.name}.cu`);
    fs.writeFileSync(f, k.cuda);
    // ptxas -v reports on stderr; a compile error throws (and fails the script).
    const log = execFileSync('bash', ['-c', `nvcc -arch=sm_90 -Xptxas -v -cubin -o /dev/null '${f}' 2>&1`], { encoding: 'utf8' });
    const regs = /Used (\d+) registers/.exec(log)?.[1];
    const spill = /(\d+) bytes spill stores/.exec(log)?.[1];
    const stack = /(\d+) bytes stack frame/.exec(log)?.[1];
    console.log(`nvcc sm_90 ${k.name}: ${regs} registers, ${stack} bytes stack, ${spill} bytes spilled`);
  }
  console.log(`nvcc -arch=sm_90 -cubin: ${kernels.size} kernels compiled`);
}

const t0 = Date.now();
execFileSync('g++', ['-std=c++17', '-O1', '-w', '-o', path.join(dir, 'emu'), path.join(dir, 'emu.cpp')], { stdio: 'inherit' });
const t1 = Date.now();
execFileSync(path.join(dir, 'emu'), [path.join(dir, 'in.bin'), path.join(dir, 'out.bin')], { stdio: 'inherit' });
const t2 = Date.now();
const outBuf = fs.readFileSync(path.join(dir, 'out.bin'));
let pos = 0;
let failures = 0;
const tol = (d) => (d === 'bfloat16' ? [1e-2, 8e-3] : d === 'float16' ? [2e-3, 2e-3] : d === 'float32' ? [2e-5, 2e-5] : [1e-6, 1e-6]);
for (const r of runs) {
  const c = r.c;
  const meta = new BigInt64Array(outBuf.buffer.slice(outBuf.byteOffset + pos, outBuf.byteOffset + pos + 32));
  pos += 32;
  const bytes = new Uint8Array(outBuf.buffer.slice(outBuf.byteOffset + pos, outBuf.byteOffset + pos + r.outBytes));
  pos += r.outBytes;
  const arr = storageArray(c.dtype, bytes.buffer, 0, r.outBytes / esize(c.dtype));
  const dec = decoder(c.dtype);
  const [atol, rtol] = tol(c.dtype);
  const problems = [];
  const code = Number(meta[0]);
  const wantCode = c.expectError === 'block' ? 11 : c.expectError === 'len' ? 22 : 0;
  if (code !== wantCode) problems.push(`error code ${code} (value ${meta[1]}), expected ${wantCode}`);
  if (meta[2] !== 0n) problems.push(`${meta[2]} split counters not back at 0`);
  if (meta[3] !== 0n) problems.push('a split counter was incremented before every thread of its block had fenced its partials');
  let worst = 0;
  {
    for (let i = 0; i < c.want.length; i++) {
      const g = dec(arr[i]);
      const w = c.want[i];
      const err = Math.abs(g - w);
      if (!(err <= atol + rtol * Math.abs(w))) {
        problems.push(`element ${i}: ${g} vs float64 ${w}`);
        if (problems.length > 4) break;
      }
      worst = Math.max(worst, err);
    }
  }
  const planTag = r.v === 'v2' ? ` [${c.plan.layout.vb}B r${c.plan.layout.r} nv${c.plan.layout.nv} u${c.plan.u} span${c.plan.span}]` : '';
  const line = `${r.v} ${c.name}: splits ${r.splits}${planTag}, max err ${worst.toExponential(2)}`;
  if (problems.length) {
    failures++;
    console.log(`FAIL ${line}\n  ${problems.join('\n  ')}`);
  } else console.log(`ok   ${line}`);
}
console.log(`${cases.length} cases, ${runs.length} runs, ${kernels.size} kernels: g++ ${((t1 - t0) / 1000).toFixed(1)} s, run ${((t2 - t1) / 1000).toFixed(1)} s; ${failures} failure(s)`);
if (!keep) fs.rmSync(dir, { recursive: true, force: true });
else console.log(`kept ${dir}`);
process.exit(failures ? 1 : 0);
