/**
 * Bulk seeded uniform draws into host words of a floating dtype: out[i] = u_i * scale - shift, u_i
 * the generator's next words, stored as the dtype stores a number. This is what seeded random
 * weights are made of (models/init.ts: 600M words for a 0.6B model), so it is written for speed:
 * words come in chunks from Generator.fillUint32 (the state in locals), float16 / bfloat16 words
 * are rounded in bulk from float32 bits (half.ts' rounding, the element encoder's), and each
 * array type has its own loop. The result and the generator's state afterwards are exactly those of
 * one nextUint32() per element and the element encoder.
 *
 * `drawUniformTask` is the same draw as a worker task over part of a SharedArrayBuffer, from a
 * given generator state (Generator.advance gives each part its start): models/init.ts spreads
 * large fills over the worker pool with it. This module imports only the generator and half.ts, so
 * a worker that loads it loads little.
 */
import type { DType } from './dtype.js';
import { float32ArrayToBfloat16Bits, float32ArrayToFloat16Bits } from './half.js';
import { Generator, type GeneratorState } from './random.js';

/** The float dtypes a uniform draw writes, and the host words each is stored in. */
export type DrawDType = 'float32' | 'float64' | 'float16' | 'bfloat16';
export type DrawWords = Float32Array | Float64Array | Uint16Array;

export function isDrawDType(dtype: DType): dtype is DrawDType {
  return dtype === 'float32' || dtype === 'float64' || dtype === 'float16' || dtype === 'bfloat16';
}

/** Bytes per word of a draw dtype. */
export function drawItemSize(dtype: DrawDType): number {
  return dtype === 'float64' ? 8 : dtype === 'float32' ? 4 : 2;
}

/** The words of `dtype` over bytes [byteOffset, byteOffset + length * itemsize) of `buffer`. */
export function drawWords(dtype: DrawDType, buffer: ArrayBufferLike, byteOffset: number, length: number): DrawWords {
  switch (dtype) {
    case 'float32':
      return new Float32Array(buffer, byteOffset, length);
    case 'float64':
      return new Float64Array(buffer, byteOffset, length);
    case 'float16':
    case 'bfloat16':
      return new Uint16Array(buffer, byteOffset, length);
    default:
      return dtype satisfies never;
  }
}

/** Words per chunk: the scratch arrays stay in the core's cache. */
const CHUNK = 4096;
let scratchWords: Uint32Array | undefined;
let scratchFloats: Float32Array | undefined;

/**
 * out[i] = (the generator's next word) * scale - shift for i < out.length, stored as `dtype` stores
 * a number: a Float32Array or Float64Array element as assigned, a float16 / bfloat16 word as
 * half.ts rounds float32 (the value rounded to float32 first, as the element encoder does). The
 * stream and the generator's state afterwards are those of out.length nextUint32() calls.
 */
export function drawUniformWords(out: DrawWords, dtype: DrawDType, scale: number, shift: number, generator: Generator): void {
  scratchWords ??= new Uint32Array(CHUNK);
  scratchFloats ??= new Float32Array(CHUNK);
  if (dtype === 'float32' && out instanceof Float32Array) drawFloat32(out, scale, shift, generator, scratchWords);
  else if (dtype === 'float64' && out instanceof Float64Array) drawFloat64(out, scale, shift, generator, scratchWords);
  else if ((dtype === 'bfloat16' || dtype === 'float16') && out instanceof Uint16Array) drawHalf(out, dtype === 'bfloat16', scale, shift, generator, scratchWords, scratchFloats);
  else throw new TypeError(`drawUniformWords: a ${out.constructor.name} does not hold ${String(dtype)} words (float32, float64, float16 or bfloat16 only)`);
}

// One loop per array type, so that every element access in a loop sees one typed-array kind (a
// store site shared by Float32Array, Float64Array and Uint16Array runs several times slower).

function drawFloat32(out: Float32Array, scale: number, shift: number, generator: Generator, words: Uint32Array): void {
  for (let base = 0; base < out.length; base += CHUNK) {
    const len = Math.min(CHUNK, out.length - base);
    generator.fillUint32(words, 0, len);
    for (let i = 0; i < len; i++) out[base + i] = words[i]! * scale - shift;
  }
}

function drawFloat64(out: Float64Array, scale: number, shift: number, generator: Generator, words: Uint32Array): void {
  for (let base = 0; base < out.length; base += CHUNK) {
    const len = Math.min(CHUNK, out.length - base);
    generator.fillUint32(words, 0, len);
    for (let i = 0; i < len; i++) out[base + i] = words[i]! * scale - shift;
  }
}

function drawHalf(out: Uint16Array, bf16: boolean, scale: number, shift: number, generator: Generator, words: Uint32Array, floats: Float32Array): void {
  for (let base = 0; base < out.length; base += CHUNK) {
    const len = Math.min(CHUNK, out.length - base);
    generator.fillUint32(words, 0, len);
    // The Float32Array store rounds the double to float32 as the element encoder does.
    for (let i = 0; i < len; i++) floats[i] = words[i]! * scale - shift;
    const f = len === CHUNK ? floats : floats.subarray(0, len);
    if (bf16) float32ArrayToBfloat16Bits(f, out, base);
    else float32ArrayToFloat16Bits(f, out, base);
  }
}

/** A part of a parallel draw: `length` words of `dtype` at `byteOffset` of `buffer`, from `state`. */
export interface DrawUniformPayload {
  readonly buffer: SharedArrayBuffer;
  readonly byteOffset: number;
  readonly length: number;
  readonly dtype: DrawDType;
  readonly scale: number;
  readonly shift: number;
  readonly state: GeneratorState;
}

/** The worker-pool task (kind 'random-uniform'): drawUniformWords over the payload's part of the buffer. */
export function drawUniformTask(payload: DrawUniformPayload): number {
  const { buffer, byteOffset, length, dtype, scale, shift, state } = payload;
  const g = new Generator().setState(state);
  drawUniformWords(drawWords(dtype, buffer, byteOffset, length), dtype, scale, shift, g);
  return length;
}
