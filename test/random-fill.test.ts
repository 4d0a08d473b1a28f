/**
 * Seeded bulk draws (issue #17: building a random qwen3-0.6b took ~11 s in fillUniformStd_):
 * Generator.fillUint32 and Generator.advance against nextUint32 one word at a time (words and the
 * state afterwards), the float16 / bfloat16 rounding of half.ts against a copy of the element
 * encoders as they were before the bulk paths (a straightforward per-value implementation), and
 * models/init.ts' fillUniformStd_ against the old per-element loop (nextUint32, then the old
 * encoder) for float32, float64, float16 and bfloat16: single-threaded, spread over pool workers,
 * on a non-contiguous view, and on webgpu (where an adapter exists: against the old device path
 * too, a float32 host tensor moved to the device and cast there).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { fillUniformStd_ } from '../src/models/init.js';
import { Device } from '../src/runtime/device.js';
import { setCompileWorkers } from '../src/runtime/pool/index.js';
import { float32ArrayToBfloat16Bits, float32ArrayToFloat16Bits, float32ToBfloat16Bits, float32ToFloat16Bits } from '../src/tensor/half.js';
import { drawUniformWords } from '../src/tensor/random-fill.js';
import { Generator } from '../src/tensor/random.js';
import { Tensor } from '../src/tensor/tensor.js';
import type { DType } from '../src/tensor/dtype.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

// ---- References: half.ts' encoders as they were, one value at a time through a Float32Array.
const rf32 = new Float32Array(1);
const ru32 = new Uint32Array(rf32.buffer);
function refBfloat16(x: number): number {
  rf32[0] = x;
  const bits = ru32[0]!;
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x007fffff) !== 0) return ((bits >>> 16) | 0x0040) & 0xffff;
  const roundingBias = 0x7fff + ((bits >>> 16) & 1);
  return ((bits + roundingBias) >>> 16) & 0xffff;
}
function refFloat16(x: number): number {
  rf32[0] = x;
  const bits = ru32[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rem = mant & ((1 << shift) - 1);
    let m = mant >>> shift;
    if (rem > half || (rem === half && (m & 1) === 1)) m++;
    return sign | m;
  }
  const rem = mant & 0x1fff;
  let m = mant >>> 13;
  if (rem > 0x1000 || (rem === 0x1000 && (m & 1) === 1)) {
    m++;
    if (m === 0x400) {
      m = 0;
      e++;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}

/** The old fillUniformStd_ loop: one nextUint32 per element, stored through the old encoder. */
function refFill(dtype: DType, n: number, std: number, g: Generator): Float32Array | Float64Array | Uint16Array {
  const a = std * Math.sqrt(3);
  const scale = (2 * a) / 4294967296;
  const out = dtype === 'float32' ? new Float32Array(n) : dtype === 'float64' ? new Float64Array(n) : new Uint16Array(n);
  const enc = dtype === 'bfloat16' ? refBfloat16 : dtype === 'float16' ? refFloat16 : (x: number) => x;
  for (let i = 0; i < n; i++) out[i] = enc(g.nextUint32() * scale - a);
  return out;
}

/** The words of a contiguous cpu tensor, as its dtype stores them. */
function words(t: Tensor): Float32Array | Float64Array | Uint16Array {
  const buf = t.storage.cpuArrayBuffer();
  const off = t.offset * t.elementSize();
  if (t.dtype === 'float32') return new Float32Array(buf, off, t.numel());
  if (t.dtype === 'float64') return new Float64Array(buf, off, t.numel());
  return new Uint16Array(buf, off, t.numel());
}

/** Bitwise equality (NaN payloads and signed zeros included): compares the bytes. */
function assertSameWords(actual: ArrayLike<number> & { buffer: ArrayBufferLike; byteOffset: number; byteLength: number }, expected: typeof actual, what: string): void {
  const a = new Uint8Array(actual.buffer, actual.byteOffset, actual.byteLength);
  const e = new Uint8Array(expected.buffer, expected.byteOffset, expected.byteLength);
  assert.equal(a.length, e.length, `${what}: byte length`);
  const bad = a.findIndex((x, i) => x !== e[i]);
  assert.equal(bad, -1, `${what}: first differing byte ${bad}`);
}

const CPU = new Device('cpu');
const SEEDS = [0, 1, 0x5eed, 2 ** 40 + 3];

test('Generator.fillUint32: the words and the state of as many nextUint32 calls', () => {
  for (const seed of SEEDS) {
    for (const n of [0, 1, 2, 4095, 4096, 4097, 100003]) {
      const a = new Generator(seed);
      const b = new Generator(seed);
      const want = Uint32Array.from({ length: n }, () => a.nextUint32());
      const got = b.fillUint32(new Uint32Array(n));
      assert.deepEqual(got, want, `seed ${seed}, n ${n}`);
      assert.deepEqual(b.getState(), a.getState(), `seed ${seed}, n ${n}: state`);
      assert.equal(b.nextUint32(), a.nextUint32());
    }
    // A sub-range: the rest of the array is left alone.
    const a = new Generator(seed);
    const b = new Generator(seed);
    const out = new Uint32Array(10).fill(7);
    b.fillUint32(out, 3, 8);
    assert.deepEqual([...out], [7, 7, 7, ...Array.from({ length: 5 }, () => a.nextUint32()), 7, 7]);
    assert.deepEqual(b.getState(), a.getState());
  }
  assert.throws(() => new Generator(1).fillUint32(new Uint32Array(4), 3, 5), /Generator\.fillUint32: need 0 <= start <= end <= out\.length \(4\), got start 3, end 5/);
  assert.throws(() => new Generator(1).fillUint32(new Uint32Array(4), 2, 1), /got start 2, end 1/);
});

test('Generator.advance(n): the state of n nextUint32 calls, the spare normal kept', () => {
  for (const seed of SEEDS) {
    for (const n of [0, 1, 2, 31, 32, 33, 1000, 65537, (1 << 20) + 7]) {
      const a = new Generator(seed);
      for (let i = 0; i < n; i++) a.nextUint32();
      const b = new Generator(seed).advance(n);
      assert.deepEqual(b.getState(), a.getState(), `seed ${seed}, n ${n}`);
      assert.equal(b.nextUint32(), a.nextUint32());
    }
  }
  // Jumps compose: 3 + 5 + 1000 words = 1008 words.
  const a = new Generator(9).advance(3).advance(5).advance(1000);
  assert.deepEqual(a.getState(), new Generator(9).advance(1008).getState());
  const g = new Generator(4);
  const first = g.nextNormal();
  const spare = g.getState().spareNormal;
  assert.ok(Number.isFinite(first) && spare !== undefined);
  g.advance(10);
  assert.equal(g.nextNormal(), spare);
  for (const bad of [-1, 0.5, Number.NaN, 2 ** 53]) assert.throws(() => new Generator(1).advance(bad), /Generator\.advance: n must be a non-negative safe integer/);
});

test('half.ts: float32 -> float16 / bfloat16 bits equal the per-value reference, scalar and bulk', () => {
  // Every exponent and sign, with mantissas at and around the rounding boundaries of both formats
  // (float16 drops 13 bits, normal; more when subnormal; bfloat16 drops 16), then random patterns.
  const mantissas = [0, 1, 2, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x5000, 0x7fff, 0x8000, 0x8001, 0x18000, 0x7fe000, 0x7fefff, 0x7ff000, 0x7fffff, 0x400000, 0x400001];
  const bits: number[] = [];
  for (let s = 0; s < 2; s++) for (let e = 0; e < 256; e++) for (const m of mantissas) bits.push(((s << 31) | (e << 23) | m) >>> 0);
  const g = new Generator(11);
  for (let i = 0; i < 1 << 20; i++) bits.push(g.nextUint32());
  const u = Uint32Array.from(bits);
  const f = new Float32Array(u.buffer);
  const b16 = new Uint16Array(f.length);
  const h16 = new Uint16Array(f.length);
  float32ArrayToBfloat16Bits(f, b16);
  float32ArrayToFloat16Bits(f, h16);
  for (let i = 0; i < f.length; i++) {
    const x = f[i]!;
    const wantB = refBfloat16(x);
    const wantH = refFloat16(x);
    if (float32ToBfloat16Bits(x) !== wantB || b16[i] !== wantB) assert.fail(`bfloat16 of bits 0x${u[i]!.toString(16)}: scalar ${float32ToBfloat16Bits(x)}, bulk ${b16[i]}, reference ${wantB}`);
    if (float32ToFloat16Bits(x) !== wantH || h16[i] !== wantH) assert.fail(`float16 of bits 0x${u[i]!.toString(16)}: scalar ${float32ToFloat16Bits(x)}, bulk ${h16[i]}, reference ${wantH}`);
  }
  // dstStart: the words land at an offset.
  const dst = new Uint16Array(5).fill(9);
  float32ArrayToBfloat16Bits(Float32Array.of(1, -2), dst, 2);
  assert.deepEqual([...dst], [9, 9, 0x3f80, 0xc000, 9]);
});

test('fillUniformStd_ on the cpu: the old per-element loop bit for bit, and the generator state', () => {
  // std 0.02 (weights: float16 subnormals near 0), 1, and 60000 (float16 overflows to +-inf).
  for (const dtype of ['float32', 'float64', 'float16', 'bfloat16'] as const) {
    for (const n of [1, 7, 4096, 4097, 70001]) {
      for (const std of [0.02, 1, 60000]) {
        const ref = new Generator(n);
        const want = refFill(dtype, n, std, ref);
        const g = new Generator(n);
        const t = Tensor.empty([n], dtype, CPU);
        const version = t.storage.version;
        assert.equal(fillUniformStd_(t, std, g), t);
        assertSameWords(words(t), want, `${dtype} n ${n} std ${std}`);
        assert.deepEqual(g.getState(), ref.getState(), `${dtype} n ${n} std ${std}: generator state`);
        assert.ok(t.storage.version > version, 'the storage version moves (autograd sees the write)');
        t.dispose();
      }
    }
  }
  // An offset view into a larger storage: only its elements are written.
  const base = kiln.zeros([10], { dtype: 'bfloat16' });
  const view = base.narrow(0, 3, 5);
  fillUniformStd_(view, 0.5, new Generator(2));
  const all = words(base);
  assertSameWords(all.subarray(3, 8), refFill('bfloat16', 5, 0.5, new Generator(2)), 'narrow view');
  assert.deepEqual([...all.subarray(0, 3), ...all.subarray(8)], [0, 0, 0, 0, 0]);
  base.dispose();
});

test('drawUniformWords: a typed array of another dtype is refused, naming both', () => {
  assert.throws(() => drawUniformWords(new Float32Array(4), 'bfloat16', 1, 0, new Generator(1)), /drawUniformWords: a Float32Array does not hold bfloat16 words/);
  assert.throws(() => drawUniformWords(new Uint16Array(4), 'float32', 1, 0, new Generator(1)), /a Uint16Array does not hold float32 words/);
});

test('fillUniformStd_ on a non-contiguous view: the values in logical order, as before', () => {
  for (const dtype of ['float32', 'bfloat16'] as const) {
    const base = Tensor.empty([300, 5], dtype, CPU);
    const t = base.t(); // [5, 300], strides [1, 5]
    const g = new Generator(3);
    fillUniformStd_(t, 0.02, g);
    const ref = new Generator(3);
    const want = refFill(dtype, 1500, 0.02, ref);
    const got = words(t.contiguous());
    assertSameWords(got, want, `${dtype} transposed`);
    assert.deepEqual(g.getState(), ref.getState());
    base.dispose();
  }
  // Not a float dtype: drawn as float32, then cast by copy_ (as before).
  const ints = Tensor.empty([4], 'int32', CPU);
  fillUniformStd_(ints, 1000, new Generator(5));
  assert.deepEqual(ints.toArray(), [...refFill('float32', 4, 1000, new Generator(5))].map(Math.trunc));
});

test('fillUniformStd_ spread over pool workers: the single-threaded bits, the same generator state', () => {
  setCompileWorkers(3);
  try {
    // 1.5M: one round in 3 parts; 8M + 12345: two rounds (the second smaller than a round).
    for (const [dtype, n] of [['float32', 1_500_000], ['bfloat16', 1_500_001], ['float16', (1 << 23) + 12345], ['float64', 1_048_576]] as const) {
      const ref = new Generator(77);
      ref.nextUint32(); // start mid-stream
      const want = refFill(dtype, n, 0.02, ref);
      const g = new Generator(77);
      g.nextUint32();
      const t = Tensor.empty([n], dtype, CPU);
      fillUniformStd_(t, 0.02, g);
      assertSameWords(words(t), want, `${dtype} n ${n}`);
      assert.deepEqual(g.getState(), ref.getState(), `${dtype} n ${n}: generator state`);
      t.dispose();
    }
  } finally {
    setCompileWorkers(undefined);
  }
});

test('Qwen3ForCausalLM.fromConfig: the same weights single-threaded and over workers', () => {
  // Vocabulary and sizes big enough that the embedding and MLP weights take the parallel path.
  const config = new kiln.models.Qwen3Config({ ...kiln.models.QWEN3_TINY, vocabSize: 8192, hiddenSize: 256, intermediateSize: 4096 });
  const build = (workers: number): Map<string, Uint8Array> => {
    setCompileWorkers(workers);
    try {
      const m = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 5, dtype: 'bfloat16' });
      return new Map([...m.namedParameters()].map(([k, p]) => [k, new Uint8Array(p.storage.cpuArrayBuffer(), p.offset * 2, p.numel() * 2).slice()]));
    } finally {
      setCompileWorkers(undefined);
    }
  };
  const one = build(0);
  const many = build(2);
  assert.deepEqual([...many.keys()], [...one.keys()]);
  for (const [k, v] of one) assert.ok(Buffer.from(v).equals(Buffer.from(many.get(k)!)), `parameter ${k}`);
});

const skipWebgpu = webgpuSkipReason();

test('fillUniformStd_ on webgpu: the cpu draw and the old device path (float32 host, cast on the device)', { skip: skipWebgpu }, () => {
  for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
    // 2^21 + 5: two upload chunks, the second partial.
    for (const n of [1, 1001, (1 << 21) + 5]) {
      const g = new Generator(8);
      const t = Tensor.empty([n], dtype, new Device('webgpu'));
      fillUniformStd_(t, 0.02, g);
      const ref = new Generator(8);
      const want = refFill(dtype, n, 0.02, ref);
      const host = t.cpu();
      assertSameWords(words(host), want, `webgpu ${dtype} n ${n}`);
      assert.deepEqual(g.getState(), ref.getState());
      // The old path: float32 values on the host, moved, cast on the device.
      const f32 = Tensor.empty([n], 'float32', CPU);
      words(f32).set(refFill('float32', n, 0.02, new Generator(8)));
      const old = f32.to('webgpu').to(dtype).cpu();
      assertSameWords(words(host), words(old), `webgpu ${dtype} n ${n} against the old path`);
      for (const x of [t, host, f32, old]) x.dispose();
    }
  }
});
