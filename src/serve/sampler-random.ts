/**
 * The uniform draw of a seeded request at one step. It is a pure function of (seed, step), where
 * step is the number of tokens the request generated before: a request's tokens then depend on
 * nothing else in the batch, nor on the order rows come in, and a step computed twice (after a
 * preemption, say) draws the same number. The pair is hashed to 32 bits (murmur3's finaliser,
 * which mixes every input bit into every output bit) and seeds Kiln's Generator, whose first double
 * is the draw.
 */
import { Generator } from '../tensor/random.js';

function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Uniform in [0, 1) for step `step` (>= 0) of the request seeded with `seed` (a safe integer). */
export function seededUniform(seed: number, step: number): number {
  const s = BigInt(seed);
  const lo = Number(BigInt.asUintN(32, s));
  const hi = Number(BigInt.asUintN(32, s >> 32n));
  let h = fmix32(lo ^ 0x9e3779b9);
  h = fmix32(h ^ fmix32(hi + 0x7f4a7c15));
  h = fmix32(h ^ fmix32((step >>> 0) + 0x632be5ab));
  return new Generator(h).nextDouble();
}
