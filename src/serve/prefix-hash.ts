/**
 * Prefix-cache keys: the hash of a full cache block is chained over the hash of the block before
 * it, so it names the block's token ids and every token before them. Two requests share a block
 * exactly when they agree on all tokens up to its end, which (positions being implied) is when
 * the cached keys/values are the same. SHA-256, so a collision, which would silently give a
 * request another prompt's keys, is not a practical concern.
 */
import { createHash } from '../platform/index.js';

/** The key of a block of `tokens` that follows the block keyed `parent` (null for the first). */
export function hashBlock(parent: string | null, tokens: readonly number[]): string {
  const h = createHash('sha256');
  h.update(parent ?? 'kiln-prefix-v1');
  h.update(Int32Array.from(tokens));
  return h.digest('base64');
}

/** Extends `hashes` (keys of the first full blocks of `tokens`) to every full block of `tokens`. */
export function extendBlockHashes(hashes: string[], tokens: readonly number[], blockSize: number): string[] {
  const full = Math.floor(tokens.length / blockSize);
  for (let i = hashes.length; i < full; i++) hashes.push(hashBlock(i === 0 ? null : hashes[i - 1]!, tokens.slice(i * blockSize, (i + 1) * blockSize)));
  return hashes;
}
