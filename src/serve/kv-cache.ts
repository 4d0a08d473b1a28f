/**
 * The paged KV cache: per layer one K and one V tensor [numBlocks, blockSize, kvHeads, headDim] in
 * the model's dtype on its device, allocated once (from a byte budget or a block count) and zeroed,
 * so a padded read never meets NaN garbage. A sequence owns a block table (block ids in position
 * order); token at position p lives in slot table[p / blockSize] * blockSize + p % blockSize of
 * the flat [numBlocks * blockSize, kvHeads, headDim] views that step-context.ts gathers from
 * (llm.reshapeAndCache writes by slot into the 4-d tensors). Blocks are counted by
 * block-allocator.ts; with prefix caching on, full blocks are keyed by prefix-hash.ts and shared
 * between sequences.
 */
import { zeros } from '../api/creation.js';
import { view } from '../api/views.js';
import type { KvGeometry } from '../models/step-kv.js';
import { itemSize } from '../tensor/dtype.js';
import { keep } from '../tensor/scope.js';
import type { Tensor } from '../tensor/tensor.js';
import { BlockAllocator } from './block-allocator.js';

export const DEFAULT_BLOCK_SIZE = 16;

export interface KvCacheOptions {
  /** Tokens per block (default 16). */
  blockSize?: number;
  /** Blocks in the cache; or give memoryBytes. */
  numBlocks?: number;
  /** Byte budget for K and V of all layers; numBlocks = floor(budget / bytesPerBlock). */
  memoryBytes?: number;
  /** Share full prompt blocks between requests (default true). */
  prefixCaching?: boolean;
}

export class PagedKvCache {
  readonly geometry: KvGeometry;
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly prefixCaching: boolean;
  readonly allocator: BlockAllocator;
  /** Per layer [numBlocks, blockSize, kvHeads, headDim]. */
  readonly keys: readonly Tensor[];
  readonly values: readonly Tensor[];
  /** The same storage as [numBlocks * blockSize, kvHeads, headDim], indexed by slot. */
  readonly keySlots: readonly Tensor[];
  readonly valueSlots: readonly Tensor[];
  private disposed = false;

  /** Bytes one block takes over all layers, K and V. */
  static bytesPerBlock(g: KvGeometry, blockSize = DEFAULT_BLOCK_SIZE): number {
    return 2 * g.numLayers * blockSize * g.numKvHeads * g.headDim * itemSize(g.dtype);
  }

  constructor(geometry: KvGeometry, options: KvCacheOptions = {}) {
    const fn = 'PagedKvCache';
    const bs = options.blockSize ?? DEFAULT_BLOCK_SIZE;
    if (!Number.isInteger(bs) || bs < 1) throw new Error(`${fn}: blockSize must be a positive integer, got ${bs}`);
    let n = options.numBlocks;
    if (n !== undefined && options.memoryBytes !== undefined) throw new Error(`${fn}: give numBlocks (${n}) or memoryBytes (${options.memoryBytes}), not both`);
    if (n === undefined) {
      const budget = options.memoryBytes;
      if (budget === undefined) throw new Error(`${fn}: the cache size is missing; give numBlocks or memoryBytes`);
      const per = PagedKvCache.bytesPerBlock(geometry, bs);
      n = Math.floor(budget / per);
      if (!(n >= 1)) throw new Error(`${fn}: memoryBytes ${budget} holds no block (one block of ${bs} tokens takes ${per} bytes over ${geometry.numLayers} layers)`);
    }
    if (!Number.isInteger(n) || n < 1) throw new Error(`${fn}: numBlocks must be a positive integer, got ${n}`);
    this.geometry = geometry;
    this.blockSize = bs;
    this.numBlocks = n;
    this.prefixCaching = options.prefixCaching ?? true;
    this.allocator = new BlockAllocator(n);
    const { numKvHeads: h, headDim: d, dtype, device } = geometry;
    const make = (): Tensor => keep(zeros([n, bs, h, d], { dtype, device }));
    this.keys = Array.from({ length: geometry.numLayers }, make);
    this.values = Array.from({ length: geometry.numLayers }, make);
    this.keySlots = this.keys.map((t) => keep(view(t, [n * bs, h, d])));
    this.valueSlots = this.values.map((t) => keep(view(t, [n * bs, h, d])));
  }

  /** Device bytes held by the cache tensors. */
  get bytes(): number {
    return this.numBlocks * PagedKvCache.bytesPerBlock(this.geometry, this.blockSize);
  }

  /** Tokens the whole cache holds. */
  get capacityTokens(): number {
    return this.numBlocks * this.blockSize;
  }

  /** Blocks a table needs to hold `numTokens` tokens. */
  blocksFor(numTokens: number): number {
    return Math.ceil(numTokens / this.blockSize);
  }

  /** The slot of position `pos` in a sequence with block table `table`. */
  slot(table: readonly number[], pos: number): number {
    const b = table[Math.floor(pos / this.blockSize)];
    if (b === undefined) throw new Error(`PagedKvCache.slot: position ${pos} is past the block table (${table.length} blocks of ${this.blockSize})`);
    return b * this.blockSize + (pos % this.blockSize);
  }

  /** Appends fresh blocks to `table` until it holds `numTokens`; the caller checked numFree. */
  grow(table: number[], numTokens: number): void {
    while (table.length * this.blockSize < numTokens) table.push(this.allocator.allocate());
  }

  /** Releases a table's blocks, last first, so a shared prefix is the last to be evicted. */
  release(table: number[]): void {
    for (let i = table.length - 1; i >= 0; i--) this.allocator.release(table[i]!);
    table.length = 0;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const t of [...this.keySlots, ...this.valueSlots, ...this.keys, ...this.values]) t.dispose();
  }

  get isDisposed(): boolean {
    return this.disposed;
  }
}
