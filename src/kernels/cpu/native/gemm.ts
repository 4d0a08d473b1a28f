/**
 * The native float32 GEMM (gemm-c.ts) as JavaScript functions. The base library (no generated
 * epilogue) is built on first use (blocking: an eager matmul needs it now) and then comes from the
 * on-disk cache; compiled programs load variants with a generated epilogue (`loadGemmLibrary`).
 * Typed arrays are passed to C as `void *` so koffi hands over their memory without a copy;
 * the offsets travel as separate element counts because a storage view starts at element 0.
 */
import { loadLibrary, type NativeFn } from './koffi.js';
import { GEMM_C_SOURCE, GEMM_EPI_MAX } from './gemm-c.js';
import { buildSharedObjectSync } from './so-cache.js';
import { ensureSharedPool } from './pool.js';
import { nativeThreads } from './threads.js';
import { probeToolchain } from './toolchain.js';

/** Epilogue activations understood by the C kernel (the numbers are its `act` codes). */
export const GEMM_ACT = { none: 0, relu: 1, gelu: 2, geluTanh: 3 } as const;
export type GemmAct = keyof typeof GEMM_ACT;

/** A float32 operand: element (r, c) at data[offset + r * rowStride + c * colStride]. */
export interface F32Operand {
  readonly data: Float32Array;
  readonly offset: number;
  readonly rowStride: number;
  readonly colStride: number;
}

/** The bias epilogue input: element j at data[offset + j * stride]. */
export interface F32Vector {
  readonly data: Float32Array;
  readonly offset: number;
  readonly stride: number;
}

/** An extra input of a generated epilogue: element (i, j) at data[offset + i * ld + j] (ld 0: a row vector). */
export interface F32Extra {
  readonly data: Float32Array;
  readonly offset: number;
  readonly ld: number;
}

/** A B operand packed once by `GemmLibrary.packB` (reused while the weight is unchanged); it starts 64-byte aligned at `offset`. */
/** A B operand of bfloat16 bits (a bfloat16 weight read in place; kiln_sgemm widens it as it packs). */
export interface Bf16Operand {
  data: Uint16Array;
  offset: number;
  rowStride: number;
  colStride: number;
}

export interface PackedB {
  readonly data: Float32Array;
  readonly offset: number;
  readonly k: number;
  readonly n: number;
}

export interface SgemmOptions {
  bias?: F32Vector | null;
  act?: GemmAct;
  /** Inputs of the library's generated epilogue (at most GEMM_EPI_MAX). */
  extras?: readonly F32Extra[];
  /** Threads (default nativeThreads()). */
  threads?: number;
}

/** Convolution geometry for `GemmLibrary.conv2d` (input x[N, H, W, C] through any strides). */
export interface ConvGeometry {
  readonly n: number;
  readonly h: number;
  readonly w: number;
  readonly c: number;
  readonly xStrides: readonly [n: number, h: number, w: number, c: number];
  readonly o: number;
  readonly kh: number;
  readonly kw: number;
  readonly stride: readonly [number, number];
  readonly padding: readonly [number, number];
  readonly dilation: readonly [number, number];
  readonly oh: number;
  readonly ow: number;
}

/** One loaded GEMM shared object (the base one or a variant with a generated epilogue). */
export class GemmLibrary {
  private readonly gemm: NativeFn;
  private readonly packFn: NativeFn;
  private readonly sizeFn: NativeFn;
  private readonly convFn: NativeFn;
  private readonly alignFn: NativeFn;
  private readonly poolFn: NativeFn;
  private readonly directFn: NativeFn;

  constructor(file: string) {
    ensureSharedPool();
    const lib = loadLibrary(file);
    this.poolFn = lib.func('int32_t kiln_pool_is_shared(void)');
    this.directFn = lib.func('int64_t kiln_sconv2d_direct_count(void)');
    const epi = Array.from({ length: GEMM_EPI_MAX }, (_, q) => `void *e${q}, int64_t e${q}o, int64_t e${q}l`).join(', ');
    this.gemm = lib.func(
      `int32_t kiln_sgemm(int64_t m, int64_t n, int64_t k, float alpha, void *A, int64_t ao, int64_t ars, int64_t acs, void *B, int64_t bo, int64_t brs, int64_t bcs, int32_t bbf16, void *PB, int64_t pbo, float beta, void *C, int64_t co, int64_t ldc, void *bias, int64_t biaso, int64_t bs, int32_t act, ${epi}, int32_t nthreads)`,
    );
    this.packFn = lib.func('void kiln_sgemm_packb(int64_t k, int64_t n, void *B, int64_t bo, int64_t brs, int64_t bcs, void *out, int64_t outo, int32_t nthreads)');
    this.alignFn = lib.func('int64_t kiln_align_floats(void *p)');
    this.sizeFn = lib.func('int64_t kiln_sgemm_packed_size(int64_t k, int64_t n)');
    this.convFn = lib.func(
      `int32_t kiln_sconv2d(int64_t N, int64_t H, int64_t W, int64_t C, void *x, int64_t xo, int64_t xsn, int64_t xsh, int64_t xsw, int64_t xsc, int64_t O, int64_t KH, int64_t KW, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t OH, int64_t OW, void *PB, int64_t pbo, void *out, int64_t oo, int64_t osn, int64_t osh, int64_t osw, int64_t osc, void *bias, int64_t biaso, int64_t bs, int32_t act, ${epi}, int32_t nthreads)`,
    );
  }

  /** Whether this object's threads are the process-wide pool's (pool.ts) rather than its own. */
  poolShared(): boolean {
    return (this.poolFn() as number) !== 0;
  }

  /** conv2d calls of this object that ran the direct (unpacked-A) path (conv-c.ts); tests check it ran. */
  convDirectCalls(): number {
    return Number(this.directFn());
  }

  /** B[k, n] packed for repeated products (kiln_sgemm_packb's layout). */
  packB(k: number, n: number, b: F32Operand): PackedB {
    const size = Number(this.sizeFn(k, n));
    // 16 spare floats: room to start at a 64-byte boundary (V8 never moves a backing store).
    const data = new Float32Array(size + 16);
    const offset = Number(this.alignFn(data));
    this.packFn(k, n, b.data, b.offset, b.rowStride, b.colStride, data, offset, nativeThreads());
    return { data, offset, k, n };
  }

  /**
   * C[m, n] (row-major from c.offset, leading dimension ldc) = epi(act(alpha * A . B + beta * C + bias)).
   * beta = 0 overwrites C (NaNs in C are not propagated). `b` is an operand or a PackedB for (k, n).
   */
  sgemm(m: number, n: number, k: number, alpha: number, a: F32Operand, b: F32Operand | Bf16Operand | PackedB, beta: number, c: F32Vector & { ldc: number }, options: SgemmOptions = {}): void {
    calls++;
    const act = actCode(options.act);
    if (c.stride !== 1) throw new RangeError(`native sgemm: C must have unit column stride, got ${c.stride}`);
    const packed = 'k' in b ? b : null;
    if (packed && (packed.k !== k || packed.n !== n)) throw new RangeError(`native sgemm: B was packed for [${packed.k}, ${packed.n}], the product needs [${k}, ${n}]`);
    const op = packed ? null : (b as F32Operand | Bf16Operand);
    const bias = options.bias ?? null;
    const rc = this.gemm(
      m, n, k, alpha,
      a.data, a.offset, a.rowStride, a.colStride,
      op?.data ?? null, op?.offset ?? 0, op?.rowStride ?? 0, op?.colStride ?? 0, op?.data instanceof Uint16Array ? 1 : 0, packed?.data ?? null, packed?.offset ?? 0,
      beta, c.data, c.offset, c.ldc,
      bias?.data ?? null, bias?.offset ?? 0, bias?.stride ?? 0, act,
      ...extraArgs(options.extras),
      options.threads ?? nativeThreads(),
    ) as number;
    if (rc !== 0) throw new Error(`native sgemm [${m}, ${k}] x [${k}, ${n}]: out of memory for packing buffers`);
  }

  /**
   * conv2d as an implicit GEMM: out[pixel, o] = epi(act(patches(x) . W^T + bias)), with the weight
   * prepacked as B[(kh, kw, c), o]; output element (n, o, oh, ow) at
   * out.offset + n * strides[0] + oh * strides[1] + ow * strides[2] + o * strides[3]. Returns false
   * (nothing written) when the output is not channels_last and the kernel's direct path does not
   * apply: the caller then passes a channels_last scratch.
   */
  conv2d(g: ConvGeometry, x: { data: Float32Array; offset: number }, weight: PackedB, out: { data: Float32Array; offset: number; strides: readonly [n: number, h: number, w: number, c: number] }, options: SgemmOptions = {}): boolean {
    calls++;
    if (weight.k !== g.kh * g.kw * g.c || weight.n !== g.o) throw new RangeError(`native conv2d: weight packed as [${weight.k}, ${weight.n}], expected [${g.kh * g.kw * g.c}, ${g.o}]`);
    const bias = options.bias ?? null;
    const rc = this.convFn(
      g.n, g.h, g.w, g.c, x.data, x.offset, ...g.xStrides,
      g.o, g.kh, g.kw, g.stride[0], g.stride[1], g.padding[0], g.padding[1], g.dilation[0], g.dilation[1],
      g.oh, g.ow, weight.data, weight.offset, out.data, out.offset, ...out.strides,
      bias?.data ?? null, bias?.offset ?? 0, bias?.stride ?? 0, actCode(options.act),
      ...extraArgs(options.extras),
      options.threads ?? nativeThreads(),
    ) as number;
    if (rc === -1) throw new Error(`native conv2d: out of memory for packing buffers`);
    return rc === 0;
  }
}

function actCode(a: GemmAct | undefined): number {
  const act = GEMM_ACT[a ?? 'none'];
  if (act === undefined) throw new TypeError(`native sgemm: unknown activation '${String(a)}' (expected ${Object.keys(GEMM_ACT).join(', ')})`);
  return act;
}

function extraArgs(extras: readonly F32Extra[] | undefined): unknown[] {
  const xs = extras ?? [];
  if (xs.length > GEMM_EPI_MAX) throw new RangeError(`native sgemm: at most ${GEMM_EPI_MAX} epilogue inputs, got ${xs.length}`);
  const args: unknown[] = [];
  for (let q = 0; q < GEMM_EPI_MAX; q++) {
    const e = xs[q];
    args.push(e?.data ?? null, e?.offset ?? 0, e?.ld ?? 0);
  }
  return args;
}

let base: GemmLibrary | undefined;
let calls = 0;

/** How many native sgemm / conv2d calls this process made (tests use it to see which engine ran). */
export function nativeGemmCalls(): number {
  return calls;
}

/** Loads (building if needed) a GEMM library from its source; throws NativeCompileError / Error with the reason. */
export function loadGemmLibrary(source: string): GemmLibrary {
  const probe = probeToolchain();
  if (!probe.ok) throw new Error(`native cpu path: ${probe.reason}`);
  return new GemmLibrary(buildSharedObjectSync('kiln_sgemm', source, probe.toolchain));
}

/** The base GEMM library (built on first use). */
export function nativeGemm(): GemmLibrary {
  base ??= loadGemmLibrary(GEMM_C_SOURCE);
  return base;
}

/** Loads (building if needed) the base GEMM library. */
export function loadNativeGemm(): void {
  nativeGemm();
}

/**
 * C[m, n] (row-major from c.offset, leading dimension ldc) = act(alpha * A . B + beta * C + bias).
 * beta = 0 overwrites C (NaNs in C are not propagated).
 */
export function sgemm(m: number, n: number, k: number, alpha: number, a: F32Operand, b: F32Operand | Bf16Operand | PackedB, beta: number, c: F32Vector & { ldc: number }, options: SgemmOptions = {}): void {
  nativeGemm().sgemm(m, n, k, alpha, a, b, beta, c, options);
}
