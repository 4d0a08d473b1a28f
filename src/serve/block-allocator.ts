/**
 * Block bookkeeping for the paged KV cache (kv-cache.ts): which of the cache's fixed-size blocks
 * are in use, by how many sequences, and which hold a known prefix (automatic prefix caching).
 * Pure host-side integers; the tensors live in PagedKvCache.
 *
 * - Every block has a reference count. A block is free at count 0 and sits in the free queue, a
 *   doubly linked list over block ids: allocate() takes the head, so the head is evicted first.
 * - A block whose contents are a full, hashed prompt prefix (register()) keeps its hash when freed
 *   and goes to the tail: it can still be found by acquireCached() (count 0 -> 1, out of the
 *   queue) until allocate() reaches it, which evicts the hash. So cached blocks leave in least
 *   recently freed order (LRU). Freed blocks without a hash go to the head: nothing to keep.
 * - A hash maps to at most one block; a second block computed with the same contents (two
 *   requests prefilled in the same step) simply stays unhashed.
 */

const NONE = -1;

export interface BlockAllocatorStats {
  /** Prefix-cache blocks handed out by acquireCached. */
  hits: number;
  /** Hashed free blocks reused for other contents by allocate(). */
  evictions: number;
}

export class BlockAllocator {
  readonly numBlocks: number;
  private readonly refs: Int32Array;
  private readonly hashes: (string | null)[];
  private readonly byHash = new Map<string, number>();
  // Free queue: prev/next links, NONE-terminated; inQueue says whether a block is linked.
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly inQueue: Uint8Array;
  private head = NONE;
  private tail = NONE;
  private free = 0;
  readonly stats: BlockAllocatorStats = { hits: 0, evictions: 0 };

  constructor(numBlocks: number) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1) throw new Error(`BlockAllocator: numBlocks must be a positive integer, got ${numBlocks}`);
    this.numBlocks = numBlocks;
    this.refs = new Int32Array(numBlocks);
    this.hashes = new Array<string | null>(numBlocks).fill(null);
    this.prev = new Int32Array(numBlocks).fill(NONE);
    this.next = new Int32Array(numBlocks).fill(NONE);
    this.inQueue = new Uint8Array(numBlocks);
    for (let b = 0; b < numBlocks; b++) this.pushTail(b);
  }

  /** Blocks with reference count 0 (including cached ones that still hold a prefix). */
  get numFree(): number {
    return this.free;
  }

  /** Blocks in use by more than one sequence (shared prefixes). */
  get numShared(): number {
    let n = 0;
    for (let b = 0; b < this.numBlocks; b++) if (this.refs[b]! > 1) n++;
    return n;
  }

  /** Free blocks that still hold a hashed prefix. */
  get numCachedFree(): number {
    let n = 0;
    for (let b = 0; b < this.numBlocks; b++) if (this.refs[b] === 0 && this.hashes[b] !== null) n++;
    return n;
  }

  refCount(block: number): number {
    this.checkId('refCount', block);
    return this.refs[block]!;
  }

  hashOf(block: number): string | null {
    this.checkId('hashOf', block);
    return this.hashes[block]!;
  }

  /** A fresh block (count 1), evicting the least recently freed cached prefix if it has to. */
  allocate(): number {
    const b = this.head;
    if (b === NONE) throw new Error(`BlockAllocator.allocate: all ${this.numBlocks} blocks are in use`);
    this.unlink(b);
    const h = this.hashes[b];
    if (h !== null && h !== undefined) {
      this.byHash.delete(h);
      this.hashes[b] = null;
      this.stats.evictions++;
    }
    this.refs[b] = 1;
    return b;
  }

  /** Another sequence uses `block` too. */
  retain(block: number): void {
    this.checkId('retain', block);
    if (this.refs[block] === 0) throw new Error(`BlockAllocator.retain: block ${block} is free; use acquireCached for cached blocks`);
    this.refs[block]!++;
  }

  /** One user fewer; at count 0 the block becomes free (kept findable when it has a hash). */
  release(block: number): void {
    this.checkId('release', block);
    if (this.refs[block]! <= 0) throw new Error(`BlockAllocator.release: block ${block} is already free (double free)`);
    if (--this.refs[block]! > 0) return;
    if (this.hashes[block] !== null) this.pushTail(block);
    else this.pushHead(block);
  }

  /** The block holding prefix `hash`, if any (in use or cached free); does not take it. */
  lookup(hash: string): number | undefined {
    return this.byHash.get(hash);
  }

  /** Takes the block holding `hash` (count + 1; out of the free queue if it was free). */
  acquireCached(hash: string): number | undefined {
    const b = this.byHash.get(hash);
    if (b === undefined) return undefined;
    if (this.refs[b] === 0) this.unlink(b);
    this.refs[b]!++;
    this.stats.hits++;
    return b;
  }

  /**
   * Marks an in-use block as holding the full prefix `hash`. Returns false (and changes nothing)
   * when another block already holds that hash or this block already has one.
   */
  register(block: number, hash: string): boolean {
    this.checkId('register', block);
    if (this.refs[block] === 0) throw new Error(`BlockAllocator.register: block ${block} is free`);
    if (this.hashes[block] !== null || this.byHash.has(hash)) return false;
    this.hashes[block] = hash;
    this.byHash.set(hash, block);
    return true;
  }

  /** Forgets every cached prefix (free blocks stay free). */
  resetPrefixCache(): void {
    for (const [, b] of this.byHash) this.hashes[b] = null;
    this.byHash.clear();
  }

  /** Throws if the bookkeeping is inconsistent (for tests and debugging). */
  checkInvariants(): void {
    let n = 0;
    let p = NONE;
    for (let b = this.head; b !== NONE; b = this.next[b]!) {
      if (this.prev[b] !== p) throw new Error(`BlockAllocator: broken free-queue link at block ${b}`);
      if (this.refs[b] !== 0 || !this.inQueue[b]) throw new Error(`BlockAllocator: queued block ${b} has count ${this.refs[b]}`);
      if (++n > this.numBlocks) throw new Error('BlockAllocator: cycle in the free queue');
      p = b;
    }
    if (p !== this.tail) throw new Error('BlockAllocator: tail does not end the free queue');
    if (n !== this.free) throw new Error(`BlockAllocator: ${n} queued blocks but numFree = ${this.free}`);
    for (let b = 0; b < this.numBlocks; b++) {
      if (this.refs[b]! < 0) throw new Error(`BlockAllocator: block ${b} has negative count`);
      if ((this.refs[b] === 0) !== (this.inQueue[b] === 1)) throw new Error(`BlockAllocator: block ${b} count ${this.refs[b]} but queued=${this.inQueue[b]}`);
      const h = this.hashes[b];
      if (h !== null && this.byHash.get(h!) !== b) throw new Error(`BlockAllocator: block ${b}'s hash maps elsewhere`);
    }
    for (const [h, b] of this.byHash) if (this.hashes[b] !== h) throw new Error(`BlockAllocator: hash map entry for block ${b} is stale`);
  }

  private checkId(fn: string, block: number): void {
    if (!Number.isInteger(block) || block < 0 || block >= this.numBlocks) throw new Error(`BlockAllocator.${fn}: block ${block} is outside [0, ${this.numBlocks})`);
  }

  private pushTail(b: number): void {
    this.prev[b] = this.tail;
    this.next[b] = NONE;
    if (this.tail !== NONE) this.next[this.tail] = b;
    else this.head = b;
    this.tail = b;
    this.inQueue[b] = 1;
    this.free++;
  }

  private pushHead(b: number): void {
    this.next[b] = this.head;
    this.prev[b] = NONE;
    if (this.head !== NONE) this.prev[this.head] = b;
    else this.tail = b;
    this.head = b;
    this.inQueue[b] = 1;
    this.free++;
  }

  private unlink(b: number): void {
    const p = this.prev[b]!;
    const n = this.next[b]!;
    if (p !== NONE) this.next[p] = n;
    else this.head = n;
    if (n !== NONE) this.prev[n] = p;
    else this.tail = p;
    this.prev[b] = NONE;
    this.next[b] = NONE;
    this.inQueue[b] = 0;
    this.free--;
  }
}
