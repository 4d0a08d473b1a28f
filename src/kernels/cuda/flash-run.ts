/**
 * Runs the fused attention kernels (codegen/flash-tc.ts; float32: codegen/flash-f32-async.ts on
 * compute capability 8.0+, codegen/flash-f32.ts before it or when forced) for
 * scaled_dot_product_attention on cuda, or says it cannot (returns false) so the caller runs the
 * math path. What the fused path takes: float32/float16/bfloat16; dropout 0; equal q/k/v head dims,
 * a multiple of 8 (16-bit) or 4 (float32), up to 256; at most four batch dims (outer dims + heads);
 * grouped-query heads on the head dim; a bool or float32/float16/bfloat16 mask of any strides; any
 * batch and row strides of q, k and v as long as rows are unit-stride and 16-byte aligned (otherwise
 * that operand is copied to a contiguous tensor first, O(L * E), never O(L * S)); fp16/bf16 need
 * compute capability 8.0 or newer (cp.async, bf16 mma). The output is the op's contiguous
 * [...batch, L, E].
 */
import { attentionGeometry, type AttentionGeometry } from '../../ops/defs/nn.js';
import { itemSize } from '../../tensor/dtype.js';
import { contiguousStrides, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { getOption, setOption } from '../../runtime/config.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch } from '../../runtime/cuda/launch.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import { FLASH_BATCH_DIMS, FLASH_PARAMS, type FlashSpec, type MaskKind } from './codegen/flash-common.js';
import { f32RowsPerThread, generateFlashF32, paddedHeadDimF32 } from './codegen/flash-f32.js';
import { generateFlashF32Async, paddedHeadDimF32Async, type F32AsyncTile } from './codegen/flash-f32-async.js';
import { generateFlashTc, paddedHeadDimTc, tcConfig, type GeneratedFlash, type TcConfig } from './codegen/flash-tc.js';
import { copyTensor } from './core.js';
import { allocOut, ptrOf, streamOf } from './device.js';

/** 'auto': fused kernel whenever it supports the call; 'math': always the composed GEMM path. */
export type CudaAttentionPath = 'auto' | 'math';

/** Forces the math path (benchmarks compare the two; tests check both against the reference); option 'cuda.attentionPath'. */
export function setCudaAttentionPath(p: CudaAttentionPath): void {
  setOption('cuda.attentionPath', p);
}

let tcOverride: TcConfig | null = null;

/** Overrides the fp16/bf16 tile shape (benchmark sweeps); null restores the rule in tileFor(). */
export function setFlashTcConfig(cfg: TcConfig | null): void {
  tcOverride = cfg;
}

let f32RowsOverride: number | null = null;

/** Forces the register-staged float32 kernel (flash-f32.ts) with `rm` rows per thread (1, 2 or 4; tests and sweeps); null restores the rule. */
export function setFlashF32Rows(rm: number | null): void {
  f32RowsOverride = rm;
}

let f32AsyncOverride: F32AsyncTile | null = null;

/** Forces the cp.async float32 kernel (flash-f32-async.ts) with this tile (tests and sweeps); null restores the rule. */
export function setFlashF32Tile(tile: F32AsyncTile | null): void {
  f32AsyncOverride = tile;
}

/**
 * The cp.async float32 tile for a call (before measurement on the H200; bench/cuda-sdpa.ts sweeps
 * the alternatives): rows per thread as for the register-staged kernel (the largest whose grid
 * fills every SM, within 64 output registers per thread); a grid that cannot fill the GPU gets
 * 16-row blocks of 8 row groups x 2 rows x 16 lanes (the 16 x 1 layout was shared-memory-bound at
 * Qwen3's shape, H200 R1) and 64-key tiles (32 beyond head dim 128, to fit shared memory); a filling grid gets 8 lanes and 32-key tiles, whose smaller shared-memory
 * footprint lets two blocks share an SM.
 */
function f32AsyncTile(d: number, fills: (bm: number) => boolean): F32AsyncTile {
  const maxRm = (tx: number): number => Math.min(4, Math.floor(64 / (paddedHeadDimF32Async(d, tx) / tx)));
  for (const rm of [4, 2, 1] as const) if (rm <= maxRm(8) && fills(16 * rm)) return { rm, tx: 8, bn: 32 };
  // 16-row blocks as 8 row groups x 2 rows x 16 lanes (128 threads). H200 R2, qwen3 [1,16,128,128]
  // f32, device time per call (bench/cuda-sdpa.ts sweep): 8x2x16 0.0121 ms; 16x1x16 0.0161,
  // 4x4x16 0.0184, 8x2x8 0.0214, 16x4x8 (32-row blocks) 0.0251; the register-staged kernel 0.0235.
  return { rg: 8, rm: 2, tx: 16, bn: paddedHeadDimF32Async(d, 16) > 128 ? 32 : 64 };
}

/**
 * The tile for a call with `blocksPerRow` = batch x heads and `l` query rows. Short prefills are
 * latency-bound: Qwen3-0.6B's [1,16,128,128] made 16 blocks of 128 rows (bf16) / 32 of 64 (f32) for
 * 132 SMs, each walking its key tiles alone. Measured on the H200 (bench/cuda-sdpa.ts sweep, median
 * of 50 eager calls, 2026-11-30):
 * - float32: the largest rows-per-thread whose grid still gives every SM a block, at most 4 for
 *   head dims up to 64 and 2 beyond (long [1,16,4096,128]: rm2 3.75 ms, rm4 4.25; qwen3: rm1 0.043,
 *   rm4 0.054; transformer-block d 64: rm4 0.217, rm2 0.285).
 * - fp16/bf16: the default tile while its grid fills the GPU; otherwise 4 warps over 32-key tiles
 *   for head dims up to 128 (qwen3: 4x1x32 0.023 ms, default 8x1x64 and 1/2/4 warps x 64 keys
 *   0.030-0.032), and fewer warps of the default for larger head dims.
 */
function tileFor(dtype: string, d: number, blocksPerRow: number, l: number, sms: number, cc: number): Tile {
  const fills = (bm: number): boolean => blocksPerRow * Math.ceil(l / bm) >= sms;
  if (dtype === 'float32') {
    if (f32RowsOverride !== null) return { rm: f32RowsOverride };
    if (f32AsyncOverride) return { f32: f32AsyncOverride };
    if (cc >= 8) return { f32: f32AsyncTile(d, fills) };
    const max = Math.min(f32RowsPerThread(d), paddedHeadDimF32(d) <= 64 ? 4 : 2);
    for (const rm of [4, 2, 1]) if (rm <= max && fills(16 * rm)) return { rm };
    return { rm: 1 };
  }
  if (tcOverride) return { tc: tcOverride };
  const base = tcConfig(d);
  if (fills(base.nw * 16 * base.mi)) return { tc: base };
  if (paddedHeadDimTc(d) <= 128) return { tc: { nw: 4, mi: 1, bn: 32 } };
  return { tc: { ...base, nw: Math.max(1, base.nw / 2) } };
}

export const flashStats = { runs: 0, copies: 0 };

const MAX_HEAD_DIM = 256;
// The decode rule in supported(): at most this many query rows, and more keys than these.
const DECODE_ROWS = 16;
const DECODE_KEYS_F32 = 512;
const DECODE_KEYS_16 = 2048;
const LOG2E = 1.4426950408889634;

interface Loaded {
  gen: GeneratedFlash;
  kernel: ReturnType<typeof kernelFromSource>;
}
const cache = new Map<string, Loaded>();
/** A launch's kernel choice: float32 register-staged (`rm`) or cp.async (`f32`), or a tensor-core tile (`tc`). */
interface Tile {
  rm?: number;
  f32?: F32AsyncTile;
  tc?: TcConfig;
}

/** The loaded kernel for `spec`, or null when its tiles need more shared memory than the device has. */
function kernelFor(index: number, spec: FlashSpec, tile: Tile): Loaded | null {
  const { rm, tc, f32 } = tile;
  const cfg = tc ? `${tc.nw}x${tc.mi}x${tc.bn}` : f32 ? `async${f32.rg ?? 16}x${f32.rm}x${f32.tx}x${f32.bn}x${f32.ks ?? 1}` : `rm${rm}`;
  const key = `${index}:${spec.dtype}:${spec.d}:${spec.causal}:${spec.mask}:${spec.maskDtype ?? ''}:${cfg}`;
  let k = cache.get(key);
  if (!k) {
    const gen = f32 ? generateFlashF32Async(spec, f32) : spec.dtype === 'float32' ? generateFlashF32(spec, rm) : generateFlashTc(spec, tc);
    if (gen.sharedBytes > deviceInfo(index).sharedMemPerBlockOptin) return null;
    k = { gen, kernel: kernelFromSource(index, gen.source, gen.name, FLASH_PARAMS, [], gen.sharedBytes) };
    cache.set(key, k);
  }
  return k;
}

/** Elements per 16 bytes: rows, batch strides and the base must be multiples of it. */
function vecElems(t: Tensor): number {
  return 16 / itemSize(t.dtype);
}

function rowsAligned(t: Tensor, geoStrides: readonly number[]): boolean {
  const v = vecElems(t);
  if (t.strides[t.ndim - 1] !== 1 && t.shape[t.ndim - 1]! > 1) return false;
  if (t.shape[t.ndim - 2]! > 1 && t.strides[t.ndim - 2]! % v !== 0) return false;
  if (geoStrides.some((s) => s % v !== 0)) return false;
  return ptrOf(t) % 16 === 0;
}

/** Whether the fused kernels handle this call's dtypes, head dims, dropout, mask and batch rank. */
function supported(q: Tensor, geo: AttentionGeometry, attnMask: Tensor | null, dropoutP: number): boolean {
  if (getOption('cuda.attentionPath') === 'math' || dropoutP > 0) return false;
  const dt = q.dtype;
  if (dt !== 'float32' && dt !== 'float16' && dt !== 'bfloat16') return false;
  if (geo.e !== geo.ev || geo.e > MAX_HEAD_DIM || geo.e % (dt === 'float32' ? 4 : 8) !== 0) return false;
  if (dt !== 'float32' && Number.parseFloat(deviceInfo(q.device.index).computeCapability) < 8) return false;
  if (geo.batch.length > FLASH_BATCH_DIMS) return false;
  const last = geo.batch.length - 1;
  for (const m of [geo.k, geo.v]) if (m.divisors.some((d, i) => d !== 1 && i !== last)) return false;
  if (attnMask && !['bool', 'float32', 'float16', 'bfloat16'].includes(attnMask.dtype)) return false;
  // A few query rows over many keys (a decode step): one block per (batch, head) walks every key
  // tile in turn while most SMs idle, and the math path's GEMMs are faster until a split-KV kernel
  // exists. H200, q [1,16,1,128] over 8 kv heads x 4096 keys: fused 0.924 ms f32 / 0.145 ms bf16,
  // math 0.117 / 0.100 ms; the fused kernel costs about 14 us (f32) / 2.3 us (bf16) per key tile of
  // 64 there, so it passes the math path's ~0.1 ms beyond 512 (f32) / 2048 (fp16/bf16) keys.
  if (geo.l <= DECODE_ROWS && geo.s > (dt === 'float32' ? DECODE_KEYS_F32 : DECODE_KEYS_16)) return false;
  // Query blocks run along grid y (at most 65535 of them, 16 rows or more each).
  if (Math.ceil(geo.l / 16) > 65535 || geo.s >= 2 ** 30) return false;
  return true;
}

/** `t` as a fresh contiguous tensor (the caller disposes it). */
function dense(t: Tensor): Tensor {
  const d = allocOut({ shape: t.shape, strides: contiguousStrides(t.shape), dtype: t.dtype, device: t.device });
  copyTensor(d, t);
  flashStats.copies++;
  return d;
}

const pad = (xs: readonly number[], fill: number): number[] => [...new Array<number>(FLASH_BATCH_DIMS - xs.length).fill(fill), ...xs];

/**
 * Runs the fused kernel into `out` (`geometry` is the caller's attentionGeometry of these operands;
 * [...batch, L, E] with unit-stride rows and 16-byte aligned row
 * and batch strides: the op's contiguous or [.., L, H, E] layout) and returns true, or returns false
 * (nothing launched) when the call needs the math path.
 */
export function runFlashAttention(
  out: Tensor,
  geometry: AttentionGeometry,
  query: Tensor,
  key: Tensor,
  value: Tensor,
  attnMask: Tensor | null,
  dropoutP: number,
  isCausal: boolean,
  scale: number | null,
): boolean {
  let geo = geometry;
  if (!supported(query, geo, attnMask, dropoutP)) return false;
  const mask: MaskKind = attnMask ? (attnMask.dtype === 'bool' ? 'bool' : 'add') : 'none';
  const spec: FlashSpec = { dtype: query.dtype, d: geo.e, causal: isCausal, mask, maskDtype: mask === 'add' ? attnMask!.dtype : undefined };
  const info = deviceInfo(query.device.index);
  const tile = tileFor(query.dtype, geo.e, numel(geo.batch), geo.l, info.smCount, Number.parseFloat(info.computeCapability));
  // A cp.async tile too large for the device's shared memory falls back to the register-staged kernel.
  const loaded = kernelFor(query.device.index, spec, tile) ?? (tile.f32 ? kernelFor(query.device.index, spec, { rm: 1 }) : null);
  if (!loaded) return false;
  const { gen, kernel } = loaded;
  const temps: Tensor[] = [];
  try {
    let [q, k, v] = [query, key, value];
    if (!rowsAligned(q, geo.q.strides)) temps.push((q = dense(q)));
    if (!rowsAligned(k, geo.k.strides)) temps.push((k = dense(k)));
    if (!rowsAligned(v, geo.v.strides)) temps.push((v = dense(v)));
    if (temps.length > 0) geo = attentionGeometry(q, k, v, attnMask, dropoutP, isCausal, scale);
    const { batch, l, s, e } = geo;
    const nb = numel(batch);
    const bdims = pad(batch, 1);
    const qs = pad(geo.q.strides, 0);
    const ks = pad(geo.k.strides, 0);
    const vs = pad(geo.v.strides, 0);
    const ms = geo.maskStrides ? pad(geo.maskStrides.slice(0, batch.length), 0) : [0, 0, 0, 0];
    const mrs = geo.maskStrides ? geo.maskStrides[batch.length]! : 0;
    const mcs = geo.maskStrides ? geo.maskStrides[batch.length + 1]! : 0;
    const kdiv = geo.k.divisors[batch.length - 1] ?? 1;
    const vdiv = geo.v.divisors[batch.length - 1] ?? 1;
    const sc = (scale ?? 1 / Math.sqrt(e)) * LOG2E;
    const args = [
      ptrOf(q), ptrOf(k), ptrOf(v), ptrOf(out), attnMask ? ptrOf(attnMask) : 0,
      l, s, bdims[1]!, bdims[2]!, bdims[3]!,
      ...qs, q.strides[q.ndim - 2]!,
      ...ks, k.strides[k.ndim - 2]!,
      ...vs, v.strides[v.ndim - 2]!,
      ...ms, mrs, mcs,
      ...pad(out.strides.slice(0, batch.length), 0), out.strides[out.ndim - 2]!,
      kdiv, vdiv,
      sc,
    ];
    launch(kernel, args, { grid: nb, gridY: Math.ceil(l / gen.bm), block: gen.threads, sharedBytes: gen.sharedBytes }, streamOf(q));
    flashStats.runs++;
  } finally {
    for (const t of temps) t.dispose();
  }
  return true;
}
