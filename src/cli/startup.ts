/**
 * Where `kiln serve` and `kiln generate` spend their start-up (issue #17: start to first token), as
 * one log line: "ready in 1.93 s: node and imports 0.31 s, weights 0.80 s, tokenizer 0.10 s,
 * engine 0.02 s". The first phase is the time from the process's start (performance.timeOrigin)
 * to the clock's creation: Node's own start and loading Kiln's modules. Each later phase ends at
 * mark(); a phase that queues device work (weight uploads, the KV cache's memset) should
 * synchronize the device before its mark, or the wait lands in whichever phase syncs next.
 */
import { getDiskCache, type DiskCacheStats } from '../runtime/cache/index.js';

export class StartupClock {
  private readonly phases: [string, number][] = [];
  private last: number;

  constructor() {
    this.last = performance.now();
    this.phases.push(['node and imports', this.last]);
  }

  /** Ends the phase running since the last mark (or the clock's creation), named `name`. */
  mark(name: string): void {
    const now = performance.now();
    this.phases.push([name, now - this.last]);
    this.last = now;
  }

  /** Seconds since the process started. */
  get totalSeconds(): number {
    return performance.now() / 1000;
  }

  /** "ready in T s: phase s, phase s, ..." (phases of 5 ms or more, seconds with 2 decimals). */
  line(): string {
    const parts = this.phases.filter(([, ms]) => ms >= 5).map(([name, ms]) => `${name} ${(ms / 1000).toFixed(2)} s`);
    return `ready in ${this.totalSeconds.toFixed(2)} s: ${parts.join(', ')}`;
  }
}

/** The process's disk-cache counters (compiled programs, CUDA kernels, GEMM choices), for a log line. */
export function diskCacheSummary(before?: DiskCacheStats): string {
  const s = getDiskCache().stats();
  const d = (k: keyof DiskCacheStats): number => s[k] - (before?.[k] ?? 0);
  return `disk cache ${d('hits')} hits, ${d('misses')} misses, ${d('writes')} writes`;
}
