/**
 * Seeded pseudo-random generator (xoshiro128**, seeded through splitmix32). Every random op takes
 * an optional Generator; without one it uses the default generator, which `manualSeed` resets.
 * The streams are Kiln's own: seeds reproduce Kiln runs, not PyTorch's numbers.
 */

function splitmix32(state: { s: number }): number {
  state.s = (state.s + 0x9e3779b9) | 0;
  let z = state.s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** A Generator's position in its stream (opaque to callers; plain data, so it can be kept). */
export interface GeneratorState {
  readonly s: readonly [number, number, number, number];
  readonly initialSeed: number;
  readonly spareNormal: number | undefined;
}

export class Generator {
  private s0 = 0;
  private s1 = 0;
  private s2 = 0;
  private s3 = 0;
  private initialSeed = 0;
  private spareNormal: number | undefined;

  constructor(seed = 0x5eed) {
    this.manualSeed(seed);
  }

  manualSeed(seed: number): this {
    if (!Number.isInteger(seed)) throw new TypeError(`Generator.manualSeed: seed must be an integer, got ${seed}`);
    this.initialSeed = seed;
    const st = { s: (seed ^ Math.floor(seed / 4294967296)) | 0 };
    this.s0 = splitmix32(st);
    this.s1 = splitmix32(st);
    this.s2 = splitmix32(st);
    this.s3 = splitmix32(st);
    this.spareNormal = undefined;
    return this;
  }

  seed(): number {
    return this.initialSeed;
  }

  /** A copy of the stream's position (torch.Generator.get_state): setState(s) replays from here. */
  getState(): GeneratorState {
    return { s: [this.s0, this.s1, this.s2, this.s3], initialSeed: this.initialSeed, spareNormal: this.spareNormal };
  }

  setState(state: GeneratorState): this {
    [this.s0, this.s1, this.s2, this.s3] = state.s;
    this.initialSeed = state.initialSeed;
    this.spareNormal = state.spareNormal;
    return this;
  }

  /** Uniform 32-bit unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /**
   * Writes the stream's next words into out[start, end): the same words, and the same state
   * afterwards, as end - start nextUint32() calls. The state is held in locals through the loop
   * (read and written back once), which makes bulk draws several times faster than a call per word
   * (seeded random weights draw one word per parameter: 600M for a 0.6B model).
   */
  fillUint32(out: Uint32Array, start = 0, end = out.length): Uint32Array {
    if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && start <= end && end <= out.length)) {
      throw new RangeError(`Generator.fillUint32: need 0 <= start <= end <= out.length (${out.length}), got start ${start}, end ${end}`);
    }
    if (start === end) return out;
    // | 0: a freshly seeded state holds uint32 values (splitmix32's >>> 0); as int32 locals the loop
    // stays in 32-bit integer arithmetic. Every step leaves int32 values, as nextUint32 does.
    let s0 = this.s0 | 0;
    let s1 = this.s1 | 0;
    let s2 = this.s2 | 0;
    let s3 = this.s3 | 0;
    for (let i = start; i < end; i++) {
      const m = Math.imul(s1, 5);
      out[i] = Math.imul((m << 7) | (m >>> 25), 9); // stored modulo 2^32: nextUint32's >>> 0
      const t = s1 << 9;
      s2 ^= s0;
      s3 ^= s1;
      s1 ^= s2;
      s0 ^= s3;
      s2 ^= t;
      s3 = (s3 << 11) | (s3 >>> 21);
    }
    this.s0 = s0;
    this.s1 = s1;
    this.s2 = s2;
    this.s3 = s3;
    return out;
  }

  /**
   * Moves the stream `n` words ahead without drawing them: afterwards the generator is where n
   * nextUint32() calls would leave it (spareNormal untouched, as nextUint32 leaves it), in
   * O(log n) steps. Bulk fills split over threads start each part from a copy advanced to it.
   */
  advance(n: number): this {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`Generator.advance: n must be a non-negative safe integer, got ${n}`);
    if (n === 0) return this;
    let v: State = [this.s0 | 0, this.s1 | 0, this.s2 | 0, this.s3 | 0];
    for (let k = 0; n > 0; k++, n = Math.floor(n / 2)) if (n % 2 === 1) v = applyBits(stepPower(k), v);
    [this.s0, this.s1, this.s2, this.s3] = v;
    return this;
  }

  /** Uniform in [0, 1) with 53 random bits. */
  nextDouble(): number {
    const hi = this.nextUint32() >>> 5; // 27 bits
    const lo = this.nextUint32() >>> 6; // 26 bits
    return (hi * 67108864 + lo) / 9007199254740992;
  }

  /** Standard normal (Box-Muller, caching the second value). */
  nextNormal(): number {
    if (this.spareNormal !== undefined) {
      const v = this.spareNormal;
      this.spareNormal = undefined;
      return v;
    }
    let u = 0;
    while (u === 0) u = this.nextDouble();
    const v = this.nextDouble();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spareNormal = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  /** Uniform integer in [low, high). */
  nextInt(low: number, high: number): number {
    return low + Math.floor(this.nextDouble() * (high - low));
  }
}

type State = [number, number, number, number];

/** One xoshiro128 state update (nextUint32's, without the output), on int32 words. */
function step(v: State): State {
  let [s0, s1, s2, s3] = v;
  const t = s1 << 9;
  s2 ^= s0;
  s3 ^= s1;
  s1 ^= s2;
  s0 ^= s3;
  s2 ^= t;
  s3 = rotl(s3, 11);
  return [s0, s1, s2, s3];
}

// Jump-ahead. The state update is linear over GF(2) (xors, shifts and rotations, no constant), so
// n updates are one 128 x 128 bit matrix T^n. A matrix is stored as its 128 columns of 4 words
// (column j: the image of the state with only bit j set); POWERS[k] = T^(2^k), made on first use by
// squaring, so advancing by n applies one matrix per set bit of n.
const POWERS: Int32Array[] = [];

function applyBits(m: Int32Array, v: State): State {
  let r0 = 0;
  let r1 = 0;
  let r2 = 0;
  let r3 = 0;
  // Only the set bits of the state contribute: visit them lowest first (w & -w isolates one).
  for (let k = 0; k < 4; k++) {
    for (let w = v[k]! | 0; w !== 0; w &= w - 1) {
      const j = 4 * (32 * k + 31 - Math.clz32(w & -w));
      r0 ^= m[j]!;
      r1 ^= m[j + 1]!;
      r2 ^= m[j + 2]!;
      r3 ^= m[j + 3]!;
    }
  }
  return [r0, r1, r2, r3];
}

/**
 * T^(2^k), the jump of 2^k words, as 128 columns of 4 int32 words (column j: the state that the
 * state with only bit j set (bit j & 31 of word j >> 5) becomes after 2^k updates). Device-side
 * draws (kernels/cuda/random-draw.ts) jump each thread to its part of the stream with these. The
 * array is shared: do not write to it.
 */
export function jumpMatrix(k: number): Int32Array {
  if (!Number.isInteger(k) || k < 0 || k > 63) throw new RangeError(`jumpMatrix: k must be an integer in [0, 63], got ${k}`);
  return stepPower(k);
}

function stepPower(k: number): Int32Array {
  while (POWERS.length <= k) {
    const m = new Int32Array(512);
    const prev = POWERS[POWERS.length - 1];
    for (let j = 0; j < 128; j++) {
      const unit: State = [0, 0, 0, 0];
      unit[j >>> 5] = 1 << (j & 31);
      // T^(2^k) = (T^(2^(k-1)))^2: column j is the previous power applied twice to bit j.
      const col = prev === undefined ? step(unit) : applyBits(prev, applyBits(prev, unit));
      m.set(col, 4 * j);
    }
    POWERS.push(m);
  }
  return POWERS[k]!;
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

export const defaultGenerator = new Generator();

/** Seeds the default generator (torch.manual_seed). */
export function manualSeed(seed: number): Generator {
  return defaultGenerator.manualSeed(seed);
}
