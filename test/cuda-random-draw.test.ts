/**
 * The GPU's seeded uniform draw (kernels/cuda/random-draw.ts) against the host draw
 * (tensor/random-fill.ts), bit for bit:
 *   - the kernel source built for the host with a C++ compiler (its arithmetic behind the same
 *     macros) and run thread by thread, near the start of a stream and at thread indices far into
 *     it (the jump table), for every dtype, with scales that reach float16 subnormals and overflow;
 *   - nvcc compiles it for sm_90 with the parameter layout the launch packs;
 *   - on a GPU, fillUniformStd_ on cuda equals it on cpu (values and the generator afterwards), and
 *     a random Qwen3 built on cuda has the cpu build's weights.
 */
import assert from 'node:assert/strict';
import childProcess from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { DRAW_KERNELS, DRAW_LOG_K, deviceDrawStats, jumpTableWords, uniformDrawSource } from '../src/kernels/cuda/random-draw.js';
import { findNvcc, nvccCheck } from '../src/compile/codegen/cuda/nvcc-check.js';
import { fillUniformStd_ } from '../src/models/init.js';
import { Generator } from '../src/tensor/random.js';
import { drawItemSize, drawUniformWords, drawWords, type DrawDType } from '../src/tensor/random-fill.js';
import { Tensor } from '../src/tensor/tensor.js';
import { Device } from '../src/runtime/device.js';
import { itemSize } from '../src/tensor/dtype.js';
import { skipUnlessCuda } from './cuda-util.js';

const K = 2 ** DRAW_LOG_K;
const DTYPES: readonly DrawDType[] = ['float32', 'float64', 'float16', 'bfloat16'];

function findCxx(): string | null {
  for (const c of [process.env.CXX, 'c++', 'g++', 'clang++']) {
    if (!c) continue;
    if (childProcess.spawnSync(c, ['--version'], { stdio: 'pipe' }).status === 0) return c;
  }
  return null;
}

// The kernel source as host C++: __global__ / __device__ erased, the launch indices globals that
// the driver loop sets per thread.
const HARNESS_HEAD = `#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>
struct kiln_dim3 { unsigned x; };
static kiln_dim3 blockIdx, threadIdx, blockDim;
#define __global__
#define __device__
`;
const HARNESS_MAIN = `
template <typename T, typename F>
static int run(F kernel, long long n, unsigned* s, double scale, double shift, long long t0, long long t1, const char* jumpsFile, const char* outFile) {
  std::vector<unsigned> jumps(512 * 64);
  FILE* f = fopen(jumpsFile, "rb");
  if (!f) return 2;
  size_t got = fread(jumps.data(), 4, jumps.size(), f);
  fclose(f);
  (void)got;
  long long first = t0 << KILN_LOG_K;
  long long last = t1 << KILN_LOG_K;
  if (last > n) last = n;
  std::vector<T> win(last - first);
  // The kernel indexes out[start + i]: hand it the window's address minus the first element's.
  T* base = (T*)((uintptr_t)win.data() - (uintptr_t)first * sizeof(T));
  // Blocks of 2^12 threads (more than a GPU allows; the harness does not mind) keep blockIdx.x
  // within 32 bits for thread indices up to 2^44.
  blockDim.x = 4096;
  for (long long t = t0; t < t1; t++) {
    blockIdx.x = (unsigned)(t >> 12);
    threadIdx.x = (unsigned)(t & 4095);
    kernel(base, n, s[0], s[1], s[2], s[3], scale, shift, jumps.data());
  }
  f = fopen(outFile, "wb");
  fwrite(win.data(), sizeof(T), win.size(), f);
  fclose(f);
  return 0;
}
static double fromBits(const char* hex) { unsigned long long b = strtoull(hex, 0, 16); double d; memcpy(&d, &b, 8); return d; }
int main(int argc, char** argv) {
  // dtype n s0 s1 s2 s3 scaleBits shiftBits t0 t1 jumps out
  if (argc != 13) return 3;
  long long n = atoll(argv[2]);
  unsigned s[4];
  for (int i = 0; i < 4; i++) s[i] = (unsigned)strtoul(argv[3 + i], 0, 10);
  double scale = fromBits(argv[7]), shift = fromBits(argv[8]);
  long long t0 = atoll(argv[9]), t1 = atoll(argv[10]);
  const char* d = argv[1];
  if (!strcmp(d, "float64")) return run<double>(kiln_uniform_draw_f64, n, s, scale, shift, t0, t1, argv[11], argv[12]);
  if (!strcmp(d, "float32")) return run<float>(kiln_uniform_draw_f32, n, s, scale, shift, t0, t1, argv[11], argv[12]);
  if (!strcmp(d, "bfloat16")) return run<kiln_u16>(kiln_uniform_draw_bf16, n, s, scale, shift, t0, t1, argv[11], argv[12]);
  if (!strcmp(d, "float16")) return run<kiln_u16>(kiln_uniform_draw_f16, n, s, scale, shift, t0, t1, argv[11], argv[12]);
  return 4;
}
`;

const cxx = findCxx();

function doubleBits(x: number): string {
  const v = new DataView(new ArrayBuffer(8));
  v.setFloat64(0, x, true);
  return v.getBigUint64(0, true).toString(16);
}

test('the draw kernel built for the host gives the Generator host draw, bit for bit (every dtype, jumps far into the stream)', { skip: cxx ? false : 'no C++ compiler (c++, g++, clang++) on PATH' }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-draw-'));
  try {
    const exe = path.join(dir, 'draw');
    fs.writeFileSync(path.join(dir, 'draw.cpp'), HARNESS_HEAD + uniformDrawSource() + HARNESS_MAIN);
    const b = childProcess.spawnSync(cxx!, ['-O2', '-ffp-contract=off', '-std=c++17', '-o', exe, path.join(dir, 'draw.cpp')], { encoding: 'utf8' });
    assert.equal(b.status, 0, `host build of the draw kernel failed:\n${b.stderr}`);
    const jumps = path.join(dir, 'jumps.bin');
    const table = jumpTableWords();
    fs.writeFileSync(jumps, new Uint8Array(table.buffer));
    const cases: { label: string; n: number; t0: number; t1: number; std: number; scale?: number; shift?: number }[] = [
      // The first threads of a fill that ends mid-thread.
      { label: 'start of a fill', n: 3 * K + 517, t0: 0, t1: 4, std: 0.02 },
      // Thread indices with many set bits (one jump matrix per bit), far into a 2^44-word stream.
      { label: 'far threads', n: 2 ** 44, t0: 2 ** 33 + 0x5a5a5a5, t1: 2 ** 33 + 0x5a5a5a5 + 2, std: 0.02 },
      { label: 'last thread of 2^43 threads', n: 2 ** 53, t0: 2 ** 43 - 1, t1: 2 ** 43, std: 1 },
      // Values from -2^-10 to about 2^-8: float16 subnormals and their rounding, bfloat16 small values.
      { label: 'tiny values', n: 2 * K, t0: 0, t1: 2, std: 0, scale: 2 ** -40, shift: 2 ** -10 },
      // Up to about 4.3e5: float16 overflows to infinity.
      { label: 'large values', n: 2 * K, t0: 0, t1: 2, std: 0, scale: 1e-4, shift: 1 },
    ];
    let compared = 0;
    for (const seed of [0, 1234567]) {
      for (const c of cases) {
        const a = c.std * Math.sqrt(3);
        const scale = c.scale ?? (2 * a) / 4294967296;
        const shift = c.shift ?? a;
        const g = new Generator(seed);
        const s = g.getState().s.map((w) => String(w >>> 0));
        const first = c.t0 * K;
        const len = Math.min(c.n, c.t1 * K) - first;
        const ref = new Generator(seed).advance(first);
        for (const dtype of DTYPES) {
          const out = path.join(dir, `out-${dtype}.bin`);
          const r = childProcess.spawnSync(exe, [dtype, String(c.n), ...s, doubleBits(scale), doubleBits(shift), String(c.t0), String(c.t1), jumps, out], { encoding: 'utf8' });
          assert.equal(r.status, 0, `${c.label} ${dtype}: harness exit ${r.status} ${r.stderr}`);
          const got = new Uint8Array(fs.readFileSync(out));
          const want = new ArrayBuffer(len * drawItemSize(dtype));
          drawUniformWords(drawWords(dtype, want, 0, len), dtype, scale, shift, new Generator().setState(ref.getState()));
          assert.equal(got.byteLength, want.byteLength, `${c.label} ${dtype}: bytes`);
          const w = new Uint8Array(want);
          const bad = got.findIndex((x, i) => x !== w[i]);
          assert.equal(bad, -1, `${c.label} seed ${seed} ${dtype}: first differing byte ${bad} (element ${Math.floor(bad / drawItemSize(dtype)) + first})`);
          compared += len;
        }
      }
    }
    assert.ok(compared > 50 * K);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Large values must really reach float16 infinity and tiny ones float16 subnormals, or the cases
// above would not test those paths.
test('the host-build cases reach float16 subnormals and infinity', () => {
  const tiny = new Uint16Array(2 * K);
  drawUniformWords(tiny, 'float16', 2 ** -40, 2 ** -10, new Generator(0));
  assert.ok(tiny.some((h) => (h & 0x7c00) === 0 && (h & 0x3ff) !== 0), 'a float16 subnormal');
  const large = new Uint16Array(2 * K);
  drawUniformWords(large, 'float16', 1e-4, 1, new Generator(0));
  assert.ok(large.some((h) => h === 0x7c00), 'float16 infinity');
});

const nvcc = findNvcc();

test('nvcc compiles the draw kernels for sm_90 with the launch parameter layout', { skip: nvcc ? false : 'nvcc is not on PATH' }, () => {
  const r = nvccCheck([uniformDrawSource()], 'sm_90', nvcc!);
  assert.deepEqual(r.errors, []);
  for (const name of Object.values(DRAW_KERNELS)) {
    const p = r.params.get(name);
    assert.ok(p, `PTX has entry ${name}`);
    assert.deepEqual(
      p.map((x) => x.bytes),
      [8, 8, 4, 4, 4, 4, 8, 8, 8],
      `${name}: parameter sizes`,
    );
  }
});

const skipCuda = skipUnlessCuda();

/** The bytes of a tensor's elements in order (a contiguous cpu copy). */
function bitsOf(t: Tensor): Uint8Array {
  const c = t.to('cpu').contiguous();
  const size = itemSize(c.dtype);
  return new Uint8Array(c.storage.cpuArrayBuffer().slice(c.offset * size, (c.offset + c.numel()) * size));
}

test('cuda: fillUniformStd_ draws the cpu bits on the GPU and leaves the generator where the cpu draw does', { skip: skipCuda }, () => {
  for (const dtype of DTYPES) {
    for (const n of [1, K - 1, 5 * K + 3, 3_000_001]) {
      const gc = new Generator(77);
      const gd = new Generator(77);
      // A contiguous view at an offset: the kernel writes from the view's first element only.
      const cpu = Tensor.empty([n + 5], dtype, new Device('cpu'));
      const dev = Tensor.empty([n + 5], dtype, new Device('cuda'));
      kiln.noGrad(() => {
        cpu.fill_(0);
        dev.fill_(0);
      });
      fillUniformStd_(cpu.narrow(0, 3, n), 0.05, gc);
      const launches = deviceDrawStats.launches;
      fillUniformStd_(dev.narrow(0, 3, n), 0.05, gd);
      assert.equal(deviceDrawStats.launches, launches + 1, `${dtype} n=${n}: drawn by the cuda kernel (not the host fallback)`);
      assert.deepEqual(gd.getState(), gc.getState(), `${dtype} n=${n}: generator state afterwards`);
      assert.deepEqual(bitsOf(dev), bitsOf(cpu), `${dtype} n=${n}: bits`);
    }
  }
});

test('cuda: a random Qwen3 built on cuda has the weights of the cpu build', { skip: skipCuda }, () => {
  const cfg = kiln.models.QWEN3_TINY;
  const onCpu = kiln.models.Qwen3ForCausalLM.fromConfig(cfg, { seed: 5, dtype: 'bfloat16', device: 'cpu' });
  const launches = deviceDrawStats.launches;
  const onGpu = kiln.models.Qwen3ForCausalLM.fromConfig(cfg, { seed: 5, dtype: 'bfloat16', device: 'cuda' });
  assert.ok(deviceDrawStats.launches > launches, 'the cuda build drew its weights with the kernel');
  const a = onCpu.stateDict();
  const b = onGpu.stateDict();
  assert.deepEqual(Object.keys(b), Object.keys(a));
  for (const [k, v] of Object.entries(a)) {
    assert.deepEqual(bitsOf(b[k]!), bitsOf(v), `${k}: bits`);
  }
});
