/**
 * One request's state in the engine: its tokens (prompt, then generated), how many of them have
 * keys/values in the cache, its block table, and the prefix hashes of its full blocks. Preemption
 * (recompute) drops the cache state and keeps the tokens, so the request later resumes exactly
 * where it was.
 */
import type { SamplingParams } from './sampling-params.js';

export type FinishReason = 'stop' | 'length' | 'abort';
export type SequenceStatus = 'waiting' | 'running' | 'finished';

export class Sequence {
  readonly tokens: number[];
  readonly outputIds: number[] = [];
  /** Tokens whose keys/values are in the cache (positions 0 .. numComputed - 1). */
  numComputed = 0;
  readonly blockTable: number[] = [];
  /** Prefix keys of the full blocks of `tokens` (computed on demand; tokens never change). */
  readonly blockHashes: string[] = [];
  /** Leading blocks of the table already registered in the prefix cache. */
  numRegistered = 0;
  /** Prompt tokens served from the prefix cache at the last admission. */
  numCachedTokens = 0;
  status: SequenceStatus = 'waiting';
  finishReason: FinishReason | null = null;
  numPreemptions = 0;

  constructor(
    readonly id: string,
    readonly promptIds: readonly number[],
    readonly params: SamplingParams,
    readonly maxNewTokens: number,
    /** Token ids that finish the request (stopTokenIds plus the model's eos ids unless ignoreEos). */
    readonly stopIds: ReadonlySet<number>,
    /** Longest total length (the model's positions and the cache's capacity, whichever is less). */
    readonly maxLength: number,
  ) {
    this.tokens = [...promptIds];
  }

  get length(): number {
    return this.tokens.length;
  }

  /** Tokens still to be run through the model before the next one can be sampled. */
  get numPending(): number {
    return this.tokens.length - this.numComputed;
  }

  append(id: number): void {
    this.tokens.push(id);
    this.outputIds.push(id);
  }

  /** Why the request ends after its latest token, or null when it goes on. */
  finishCheck(): FinishReason | null {
    const last = this.outputIds[this.outputIds.length - 1];
    if (last !== undefined && this.stopIds.has(last)) return 'stop';
    if (this.outputIds.length >= this.maxNewTokens || this.tokens.length >= this.maxLength) return 'length';
    return null;
  }
}
