/**
 * Seeded uniform draws on the GPU, bit for bit the host's (tensor/random-fill.ts): element i of a
 * fill is xoshiro128** word i of the generator's stream from the fill's start state, times `scale`
 * minus `shift` in double precision (one rounded multiply, one rounded subtract: no FMA), stored as
 * the dtype stores a number (float64 as is; float32 rounded to nearest even; float16 / bfloat16
 * through float32 with half.ts' integer rounding, ported line by line). Seeded random weights
 * (`kiln serve --random`, Qwen3ForCausalLM.fromConfig on cuda) take milliseconds this way instead
 * of a host draw of every word and an upload of every byte.
 *
 * The stream is sequential, so each thread draws a run of K = 2^LOG_K consecutive words: thread t
 * starts at word t*K, the fill's start state jumped by T^(t*K), T being the (GF(2)-linear) state
 * update. The jump applies one 128x128 bit matrix per set bit of t: the matrices
 * T^(2^(LOG_K + k)) (Generator's jumpMatrix) live in a small device table made once per device.
 *
 * The source compiles for the host too (tests build it with a C++ compiler and compare with the
 * Generator on thread indices far into the stream; no GPU needed to check the arithmetic): the
 * device intrinsics that fix rounding sit behind macros with plain-C++ equivalents.
 */
import type { DrawDType } from '../../tensor/random-fill.js';
import { registerDeviceUniformDraw } from '../../tensor/device-draw.js';
import { jumpMatrix, type GeneratorState } from '../../tensor/random.js';
import { Tensor } from '../../tensor/tensor.js';
import { getOption } from '../../runtime/config.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel, type ParamType } from '../../runtime/cuda/launch.js';
import { emitWarning } from '../../platform/index.js';
import { cuda, ptrOf, streamOf } from './device.js';

/** Words per thread: 2^LOG_K. */
export const DRAW_LOG_K = 10;
/** Jump matrices in the table: thread indices below 2^JUMPS (fills below 2^(JUMPS + LOG_K) = 2^53 words). */
export const DRAW_JUMPS = 53 - DRAW_LOG_K;
const BLOCK = 128;

/** Entry point per dtype (one source holds all four). */
export const DRAW_KERNELS: Readonly<Record<DrawDType, string>> = {
  float32: 'kiln_uniform_draw_f32',
  float64: 'kiln_uniform_draw_f64',
  float16: 'kiln_uniform_draw_f16',
  bfloat16: 'kiln_uniform_draw_bf16',
};
const PARAMS: readonly ParamType[] = ['ptr', 'i64', 'u32', 'u32', 'u32', 'u32', 'f64', 'f64', 'ptr'];

/** The CUDA C of the four draw kernels (also valid C++ for the host, see the header). */
export function uniformDrawSource(): string {
  return `// kiln: seeded uniform draws (xoshiro128**), bit-identical to tensor/random-fill.ts
typedef unsigned int kiln_u32;
typedef unsigned short kiln_u16;
#ifdef __CUDACC_RTC__
#define KILN_DRAW_DEVICE 1
#elif defined(__CUDA_ARCH__)
#define KILN_DRAW_DEVICE 1
#endif
#ifdef KILN_DRAW_DEVICE
#define KILN_DMUL(a, b) __dmul_rn((a), (b))
#define KILN_DSUB(a, b) __dsub_rn((a), (b))
#define KILN_D2F(d) __double2float_rn(d)
#define KILN_F2U(f) __float_as_uint(f)
#define KILN_CTZ(w) (__ffs((int)(w)) - 1)
#else
// Host build (tests): IEEE double arithmetic without contraction (-ffp-contract=off), x86 rounding.
#define KILN_DMUL(a, b) ((a) * (b))
#define KILN_DSUB(a, b) ((a) - (b))
#define KILN_D2F(d) ((float)(d))
static inline kiln_u32 KILN_F2U(float f) { kiln_u32 u; __builtin_memcpy(&u, &f, 4); return u; }
#define KILN_CTZ(w) __builtin_ctz(w)
#endif
#define KILN_LOG_K ${DRAW_LOG_K}

// v = M v over GF(2): M's column j (4 words at m + 4j) for each set bit j of v (Generator's applyBits).
__device__ static inline void kiln_jump(const kiln_u32* m, kiln_u32* v) {
  kiln_u32 r0 = 0, r1 = 0, r2 = 0, r3 = 0;
  for (int k = 0; k < 4; k++) {
    for (kiln_u32 w = v[k]; w != 0; w &= w - 1) {
      const kiln_u32* c = m + 4 * (32 * k + KILN_CTZ(w));
      r0 ^= c[0]; r1 ^= c[1]; r2 ^= c[2]; r3 ^= c[3];
    }
  }
  v[0] = r0; v[1] = r1; v[2] = r2; v[3] = r3;
}

// half.ts bfloat16FromFloat32Bits: round to nearest even, NaN kept quiet.
__device__ static inline kiln_u16 kiln_bf16_bits(kiln_u32 bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (kiln_u16)(((bits >> 16) | 0x0040u) & 0xffffu);
  kiln_u32 bias = 0x7fffu + ((bits >> 16) & 1u);
  return (kiln_u16)(((bits + bias) >> 16) & 0xffffu);
}

// half.ts float16FromFloat32Bits: round to nearest even, subnormals, overflow to infinity.
__device__ static inline kiln_u16 kiln_f16_bits(kiln_u32 bits) {
  kiln_u32 abs = bits & 0x7fffffffu;
  if (abs >= 0x38800000u && abs < 0x47800000u) {
    return (kiln_u16)(((bits >> 16) & 0x8000u) | ((abs - 0x38000000u + 0xfffu + ((abs >> 13) & 1u)) >> 13));
  }
  kiln_u32 sign = (bits >> 16) & 0x8000u;
  kiln_u32 exp = (bits >> 23) & 0xffu;
  kiln_u32 mant = bits & 0x7fffffu;
  if (exp == 0xffu) return (kiln_u16)(sign | 0x7c00u | (mant != 0 ? 0x200u : 0u));
  int e = (int)exp - 127 + 15;
  if (e >= 0x1f) return (kiln_u16)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (kiln_u16)sign;
    mant |= 0x800000u;
    int shift = 14 - e;
    kiln_u32 half = 1u << (shift - 1);
    kiln_u32 rem = mant & ((1u << shift) - 1u);
    kiln_u32 m = mant >> shift;
    if (rem > half || (rem == half && (m & 1u) == 1u)) m++;
    return (kiln_u16)(sign | m);
  }
  kiln_u32 rem = mant & 0x1fffu;
  kiln_u32 m = mant >> 13;
  if (rem > 0x1000u || (rem == 0x1000u && (m & 1u) == 1u)) {
    m++;
    if (m == 0x400u) {
      m = 0;
      e++;
      if (e >= 0x1f) return (kiln_u16)(sign | 0x7c00u);
    }
  }
  return (kiln_u16)(sign | ((kiln_u32)e << 10) | m);
}

#define KILN_STORE_F64(x) (x)
#define KILN_STORE_F32(x) KILN_D2F(x)
#define KILN_STORE_BF16(x) kiln_bf16_bits(KILN_F2U(KILN_D2F(x)))
#define KILN_STORE_F16(x) kiln_f16_bits(KILN_F2U(KILN_D2F(x)))

// out[i] = word i * scale - shift for i < n; thread t draws words [t*K, t*K + K), its start state
// (s0..s3) jumped by t*K words with jumps[k] = T^(2^(LOG_K + k)).
#define KILN_DRAW_KERNEL(NAME, T, STORE) \\
extern "C" __global__ void NAME(T* out, long long n, kiln_u32 s0, kiln_u32 s1, kiln_u32 s2, kiln_u32 s3, double scale, double shift, const kiln_u32* jumps) { \\
  long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; \\
  long long start = t << KILN_LOG_K; \\
  if (start >= n) return; \\
  kiln_u32 v[4] = {s0, s1, s2, s3}; \\
  int k = 0; \\
  for (long long q = t; q != 0; q >>= 1, k++) if (q & 1) kiln_jump(jumps + 512 * k, v); \\
  kiln_u32 a = v[0], b = v[1], c = v[2], d = v[3]; \\
  long long left = n - start; \\
  int len = left < (1LL << KILN_LOG_K) ? (int)left : (1 << KILN_LOG_K); \\
  T* o = out + start; \\
  for (int i = 0; i < len; i++) { \\
    kiln_u32 m = b * 5u; \\
    kiln_u32 u = ((m << 7) | (m >> 25)) * 9u; \\
    kiln_u32 x = b << 9; \\
    c ^= a; d ^= b; b ^= c; a ^= d; c ^= x; d = (d << 11) | (d >> 21); \\
    double y = KILN_DSUB(KILN_DMUL((double)u, scale), shift); \\
    o[i] = STORE(y); \\
  } \\
}

KILN_DRAW_KERNEL(kiln_uniform_draw_f64, double, KILN_STORE_F64)
KILN_DRAW_KERNEL(kiln_uniform_draw_f32, float, KILN_STORE_F32)
KILN_DRAW_KERNEL(kiln_uniform_draw_bf16, kiln_u16, KILN_STORE_BF16)
KILN_DRAW_KERNEL(kiln_uniform_draw_f16, kiln_u16, KILN_STORE_F16)
`;
}

/** The jump table's host words: jumpMatrix(LOG_K + k) for k < DRAW_JUMPS, 512 words each. */
export function jumpTableWords(): Uint32Array {
  const words = new Uint32Array(512 * DRAW_JUMPS);
  for (let k = 0; k < DRAW_JUMPS; k++) words.set(new Uint32Array(jumpMatrix(DRAW_LOG_K + k).buffer), 512 * k);
  return words;
}

const tables = new Map<number, Tensor>();

/** The device's jump table (made and uploaded on first use; kept for the process). */
function jumpTable(t: Tensor): Tensor {
  let table = tables.get(t.device.index);
  if (table === undefined) {
    const words = jumpTableWords();
    table = Tensor.empty([words.length], 'int32', t.device);
    cuda().copyHostToDevice(table.storage.buffer, 0, new Uint8Array(words.buffer));
    tables.set(t.device.index, table);
  }
  return table;
}

let source: string | undefined;
/** Fills drawn on the GPU (tests check that the device path really ran, not the host fallback). */
export const deviceDrawStats = { launches: 0 };
/** Set when the kernels failed to build or load: every later fill draws on the host. */
let broken: string | undefined;

function drawKernel(index: number, dtype: DrawDType): CudaKernel {
  source ??= uniformDrawSource();
  return kernelFromSource(index, source, DRAW_KERNELS[dtype], PARAMS);
}

/**
 * The device draw (tensor/device-draw.ts). KILN_DEVICE_RANDOM=0 turns it off (host draws and
 * uploads: the reference path, for comparing). A fill inside a CUDA graph capture is left to the
 * host path, which refuses it with its own error.
 */
function drawOnCuda(t: Tensor, dtype: DrawDType, scale: number, shift: number, state: GeneratorState): boolean {
  if (!getOption('KILN_DEVICE_RANDOM')) return false;
  const stream = streamOf(t);
  if (stream.isCapturing()) return false;
  const n = t.numel();
  if (n === 0) return true;
  if (broken !== undefined) return false;
  let table: Tensor;
  let kernel: CudaKernel;
  try {
    table = jumpTable(t);
    kernel = drawKernel(t.device.index, dtype);
  } catch (e) {
    // The host draw gives the same bits, only slower: say why once and use it from now on.
    broken = (e as Error).message;
    emitWarning(`kiln: the cuda random-draw kernels are unavailable (${broken}); seeded random weights are drawn on the host and uploaded`, { type: 'KilnWarning', code: 'KILN_DEVICE_RANDOM' });
    return false;
  }
  const threads = Math.ceil(n / 2 ** DRAW_LOG_K);
  const [s0, s1, s2, s3] = state.s;
  launch(kernel, [ptrOf(t), n, s0 >>> 0, s1 >>> 0, s2 >>> 0, s3 >>> 0, scale, shift, ptrOf(table)], { grid: Math.ceil(threads / BLOCK), block: BLOCK }, stream);
  deviceDrawStats.launches++;
  return true;
}

registerDeviceUniformDraw('cuda', drawOnCuda);
