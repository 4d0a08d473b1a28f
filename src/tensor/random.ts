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

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

export const defaultGenerator = new Generator();

/** Seeds the default generator (torch.manual_seed). */
export function manualSeed(seed: number): Generator {
  return defaultGenerator.manualSeed(seed);
}
