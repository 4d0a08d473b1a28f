/**
 * The engine's scheduling policy, one call per step (continuous batching: requests join and leave
 * between steps). Modelled on vLLM's v1 scheduler:
 *
 * 1. Running requests, oldest first, each get their pending tokens (one when decoding; a chunk of
 *    the prompt when prefill was cut short), within a per-step token budget. When a request needs
 *    a block and none is free, the newest running request is preempted by recompute: its blocks
 *    are released and it goes back to the front of the queue with its tokens (prompt and
 *    generated so far), to be prefilled again later. If the newest is the request itself, it
 *    stops there.
 * 2. Then, unless something was preempted this step, waiting requests in arrival order are
 *    admitted while the budget, maxNumSeqs and the free blocks allow. With prefix caching, the
 *    leading full blocks already in the cache are taken instead of computed; the last prompt token
 *    is always computed (its logits give the first new token), so the block holding it is never a
 *    shared one and no step ever writes into a block another request reads.
 *
 * Prefill is chunked: a prompt longer than the budget left runs over several steps, mixed with the
 * decode tokens of the running requests.
 */
import type { PagedKvCache } from './kv-cache.js';
import { extendBlockHashes } from './prefix-hash.js';
import type { Sequence } from './sequence.js';

export interface SchedulerOptions {
  /** Sequences running at once (default 64). */
  maxNumSeqs?: number;
  /** New tokens per step, prefill chunks and decode tokens together (default 512). */
  maxNumBatchedTokens?: number;
}

export interface ScheduledEntry {
  readonly seq: Sequence;
  readonly numNew: number;
}

export interface SchedulerOutput {
  readonly entries: readonly ScheduledEntry[];
  readonly preempted: readonly Sequence[];
}

export class Scheduler {
  readonly waiting: Sequence[] = [];
  readonly running: Sequence[] = [];
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  numPreemptions = 0;
  /** Prompt tokens served from the prefix cache over all admissions. */
  numPrefixHitTokens = 0;

  constructor(
    private readonly cache: PagedKvCache,
    options: SchedulerOptions = {},
  ) {
    this.maxNumSeqs = options.maxNumSeqs ?? 64;
    this.maxNumBatchedTokens = options.maxNumBatchedTokens ?? 512;
    for (const [k, v] of [
      ['maxNumSeqs', this.maxNumSeqs],
      ['maxNumBatchedTokens', this.maxNumBatchedTokens],
    ] as const) {
      if (!Number.isInteger(v) || v < 1) throw new Error(`Scheduler: ${k} must be a positive integer, got ${v}`);
    }
  }

  add(seq: Sequence): void {
    seq.status = 'waiting';
    this.waiting.push(seq);
  }

  get numUnfinished(): number {
    return this.waiting.length + this.running.length;
  }

  /** Takes `seq` out of the queues and releases its blocks at once (finish or abort). */
  remove(seq: Sequence): void {
    for (const list of [this.waiting, this.running]) {
      const i = list.indexOf(seq);
      if (i >= 0) list.splice(i, 1);
    }
    this.cache.release(seq.blockTable);
    seq.numComputed = 0;
    seq.numRegistered = 0;
    seq.status = 'finished';
  }

  schedule(): SchedulerOutput {
    const entries: ScheduledEntry[] = [];
    const preempted: Sequence[] = [];
    const alloc = this.cache.allocator;
    let budget = this.maxNumBatchedTokens;

    for (let i = 0; i < this.running.length && budget > 0; ) {
      const seq = this.running[i]!;
      const numNew = Math.min(seq.numPending, budget);
      const need = (): number => this.cache.blocksFor(seq.numComputed + numNew) - seq.blockTable.length;
      let self = false;
      while (need() > alloc.numFree) {
        const victim = this.running[this.running.length - 1]!;
        this.preempt(victim);
        preempted.push(victim);
        if (victim === seq) {
          self = true;
          break;
        }
      }
      if (self) break;
      this.cache.grow(seq.blockTable, seq.numComputed + numNew);
      entries.push({ seq, numNew });
      budget -= numNew;
      i++;
    }

    if (preempted.length === 0) {
      while (this.waiting.length > 0 && budget > 0 && this.running.length < this.maxNumSeqs) {
        const seq = this.waiting[0]!;
        const hits = this.cachedPrefix(seq);
        const computed = hits.length * this.cache.blockSize;
        const numNew = Math.min(seq.length - computed, budget);
        // Cached blocks nobody uses sit in the free queue: taking them leaves fewer to allocate.
        const freeHits = hits.filter((b) => alloc.refCount(b) === 0).length;
        if (this.cache.blocksFor(computed + numNew) - hits.length > alloc.numFree - freeHits) break;
        for (let k = 0; k < hits.length; k++) seq.blockTable.push(alloc.acquireCached(seq.blockHashes[k]!)!);
        seq.numComputed = computed;
        seq.numRegistered = hits.length;
        seq.numCachedTokens = computed;
        this.numPrefixHitTokens += computed;
        this.cache.grow(seq.blockTable, computed + numNew);
        this.waiting.shift();
        seq.status = 'running';
        this.running.push(seq);
        entries.push({ seq, numNew });
        budget -= numNew;
      }
    }
    return { entries, preempted };
  }

  /** After the model ran `entries`: their tokens are cached; full blocks join the prefix cache. */
  commit(entries: readonly ScheduledEntry[]): void {
    const bs = this.cache.blockSize;
    for (const { seq, numNew } of entries) {
      seq.numComputed += numNew;
      if (!this.cache.prefixCaching) continue;
      const full = Math.floor(seq.numComputed / bs);
      if (full <= seq.numRegistered) continue;
      extendBlockHashes(seq.blockHashes, seq.tokens.slice(0, full * bs), bs);
      for (let k = seq.numRegistered; k < full; k++) this.cache.allocator.register(seq.blockTable[k]!, seq.blockHashes[k]!);
      seq.numRegistered = full;
    }
  }

  /** Block ids of the longest run of `seq`'s leading blocks in the prefix cache (not taken yet). */
  private cachedPrefix(seq: Sequence): number[] {
    if (!this.cache.prefixCaching) return [];
    const bs = this.cache.blockSize;
    // The last token is always computed, so only blocks wholly before it can be shared.
    const maxBlocks = Math.floor((seq.length - 1) / bs);
    extendBlockHashes(seq.blockHashes, seq.tokens.slice(0, maxBlocks * bs), bs);
    const out: number[] = [];
    for (let k = 0; k < maxBlocks; k++) {
      const b = this.cache.allocator.lookup(seq.blockHashes[k]!);
      if (b === undefined) break;
      out.push(b);
    }
    return out;
  }

  private preempt(seq: Sequence): void {
    const i = this.running.indexOf(seq);
    if (i >= 0) this.running.splice(i, 1);
    this.cache.release(seq.blockTable);
    seq.numComputed = 0;
    seq.numRegistered = 0;
    seq.status = 'waiting';
    seq.numPreemptions++;
    this.numPreemptions++;
    this.waiting.unshift(seq);
  }
}
