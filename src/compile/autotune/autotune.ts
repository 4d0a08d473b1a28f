/**
 * The autotuner: runs every candidate implementation of a kernel, times it with device events
 * (`kiln.Event`, so the same code measures every accelerator), keeps the fastest and remembers the
 * winner on disk, keyed by the caller's key and the device (type, name, arch).
 */
import '../../ops/index.js';
import '../../kernels/cpu/index.js';
import { clone } from '../../api/core.js';
import { configFingerprint, getOption } from '../../runtime/config.js';
import { Event, synchronize } from '../../runtime/event.js';
import type { DeviceLike } from '../../runtime/device.js';
import { acceleratorFor } from '../../runtime/registry.js';
import { Tensor } from '../../tensor/tensor.js';
import { getDiskCache, type DiskCache } from '../../runtime/cache/disk-cache.js';
import { cacheKey, canonicalJson } from '../../runtime/cache/key.js';

export const AUTOTUNE_NAMESPACE = 'autotune';

export interface AutotuneCandidate<C> {
  config: C;
  /** Runs the candidate once on the tuning inputs. Must only touch tensors from `cloneArgsForTuning` if it mutates. */
  run: () => void;
}

export interface AutotuneOptions<C> {
  /** What is being tuned (op, shapes, dtypes...): winners are stored under this key plus the device. */
  key: string;
  device: DeviceLike;
  candidates: readonly AutotuneCandidate<C>[];
  /** Untimed runs per candidate before timing (default 2). */
  warmup?: number;
  /** Timed runs per candidate; the minimum counts (default 5). */
  reps?: number;
  /** Called before each timed run, outside the timed region (e.g. to evict caches). */
  flush?: () => void;
  /**
   * The tuning copies the candidates write into (made with `cloneArgsForTuning`); disposed once
   * tuning is over, whether the result came from timing or from the cache.
   */
  clonedInputs?: readonly Tensor[];
  /** Where winners persist (default: the shared `getDiskCache()`); null keeps nothing. */
  cache?: DiskCache | null;
}

export interface AutotuneTiming<C> {
  config: C;
  /** Best of `reps` runs in milliseconds; Infinity when the candidate threw. */
  ms: number;
  error?: string;
}

export interface AutotuneResult<C> {
  best: C;
  /** Position of `best` in the candidates. */
  bestIndex: number;
  /** Per candidate, in candidate order (empty when the answer came from the cache or tuning is off). */
  timings: AutotuneTiming<C>[];
  /** The winner was read from the cache; nothing was run. */
  fromCache: boolean;
  /** KILN_AUTOTUNE=0: nothing was timed and the first candidate won. */
  disabled: boolean;
}

interface StoredWinner {
  key: string;
  device: { type: string; name: string; arch: string | null };
  /** canonicalJson of the winning config; null when the config has no canonical form. */
  config: string | null;
  index: number;
  count: number;
  ms: number;
}

function checkCount(name: string, v: number, min: number): number {
  if (!Number.isInteger(v) || v < min) throw new RangeError(`autotune: ${name} must be an integer >= ${min}, got ${String(v)}`);
  return v;
}

function canonicalOrNull(v: unknown): string | null {
  try {
    return canonicalJson(v);
  } catch {
    return null;
  }
}

function describe(config: unknown): string {
  return canonicalOrNull(config) ?? String(config);
}

/** True unless KILN_AUTOTUNE is '0' (or 'false'/'off'). */
export function autotuneEnabled(): boolean {
  return getOption('KILN_AUTOTUNE');
}

/** The cache key for a tuning key on a device: the key plus device type and properties (name/arch). */
export function autotuneCacheKey(key: string, device: DeviceLike): { cacheKey: string; device: StoredWinner['device'] } {
  const { accelerator, device: d } = acceleratorFor(device);
  const props = accelerator.properties(d.index);
  const arch = props.arch ?? props.computeCapability ?? null;
  const dev = { type: d.type, name: String(props.name), arch: arch === null ? null : String(arch) };
  return { cacheKey: cacheKey(['autotune', key, dev.type, dev.name, dev.arch, configFingerprint()]), device: dev };
}

function timeCandidate(run: () => void, deviceArg: DeviceLike, warmup: number, reps: number, flush: (() => void) | undefined): number {
  for (let i = 0; i < warmup; i++) run();
  const start = new Event(deviceArg, { enableTiming: true });
  const end = new Event(deviceArg, { enableTiming: true });
  let best = Infinity;
  for (let r = 0; r < reps; r++) {
    flush?.();
    synchronize(deviceArg); // earlier work (the flush, the last rep) must not land in this window
    start.record();
    run();
    end.record();
    end.synchronize();
    best = Math.min(best, start.elapsedTime(end));
  }
  return best;
}

/**
 * Picks the fastest candidate. Throwing candidates are dropped (ms = Infinity, with their error);
 * if every candidate throws, the error lists each failure. A second call with the same key on the
 * same kind of device returns the stored winner without running anything (`fromCache: true`).
 */
export function autotune<C>(opts: AutotuneOptions<C>): AutotuneResult<C> {
  try {
    return tune(opts);
  } finally {
    for (const t of opts.clonedInputs ?? []) t.dispose();
  }
}

function tune<C>(opts: AutotuneOptions<C>): AutotuneResult<C> {
  const { key, candidates, flush } = opts;
  if (typeof key !== 'string' || key === '') throw new TypeError(`autotune: key must be a non-empty string, got ${String(key)}`);
  if (!Array.isArray(candidates) || candidates.length === 0) throw new RangeError(`autotune '${key}': no candidates to choose from`);
  const warmup = checkCount('warmup', opts.warmup ?? 2, 0);
  const reps = checkCount('reps', opts.reps ?? 5, 1);
  if (!autotuneEnabled()) return { best: candidates[0]!.config, bestIndex: 0, timings: [], fromCache: false, disabled: true };

  const cache = opts.cache === undefined ? getDiskCache() : opts.cache;
  const where = autotuneCacheKey(key, opts.device);
  const configs = candidates.map((c) => canonicalOrNull(c.config));
  if (cache) {
    const stored = cache.get(AUTOTUNE_NAMESPACE, where.cacheKey) as StoredWinner | undefined;
    const i = stored ? findStored(stored, configs) : -1;
    if (i >= 0) return { best: candidates[i]!.config, bestIndex: i, timings: [], fromCache: true, disabled: false };
  }

  const timings: AutotuneTiming<C>[] = candidates.map(({ config, run }) => {
    try {
      return { config, ms: timeCandidate(run, opts.device, warmup, reps, flush) };
    } catch (e) {
      return { config, ms: Infinity, error: e instanceof Error ? e.message : String(e) };
    }
  });
  let bestIndex = -1;
  timings.forEach((t, i) => {
    if (t.error === undefined && (bestIndex < 0 || t.ms < timings[bestIndex]!.ms)) bestIndex = i;
  });
  if (bestIndex < 0) {
    const lines = timings.map((t, i) => `  [${i}] ${describe(t.config)}: ${t.error ?? 'no timing'}`);
    throw new Error(`autotune '${key}': all ${timings.length} candidates failed:\n${lines.join('\n')}`);
  }
  if (cache) {
    const winner: StoredWinner = {
      key,
      device: where.device,
      config: configs[bestIndex]!,
      index: bestIndex,
      count: candidates.length,
      ms: timings[bestIndex]!.ms,
    };
    cache.put(AUTOTUNE_NAMESPACE, where.cacheKey, winner);
  }
  return { best: candidates[bestIndex]!.config, bestIndex, timings, fromCache: false, disabled: false };
}

/** The candidate a stored winner refers to, or -1 when the candidate list no longer contains it. */
function findStored(stored: StoredWinner, configs: readonly (string | null)[]): number {
  if (typeof stored !== 'object' || stored === null) return -1;
  if (stored.config !== null) return configs.indexOf(stored.config);
  // Configs without a canonical form are matched by position, only if the list is unchanged in size.
  return stored.count === configs.length && Number.isInteger(stored.index) && stored.index < configs.length ? stored.index : -1;
}

/**
 * Copies the tensors among `args` that candidates mutate (all of them, or the positions in
 * `mutated`) with the public `clone`, so tuning runs never corrupt live data. Other values pass
 * through unchanged. Pass the copies to `autotune({ clonedInputs })` to have them disposed.
 */
export function cloneArgsForTuning<T extends readonly unknown[]>(args: T, mutated?: readonly number[]): T {
  if (mutated) {
    for (const i of mutated) {
      if (!Number.isInteger(i) || i < 0 || i >= args.length) throw new RangeError(`cloneArgsForTuning: mutated index ${i} is out of range for ${args.length} args`);
      if (!(args[i] instanceof Tensor)) throw new TypeError(`cloneArgsForTuning: argument ${i} is marked mutated but is not a Tensor`);
    }
  }
  const pick = mutated ? new Set(mutated) : undefined;
  return args.map((a, i) => (a instanceof Tensor && (!pick || pick.has(i)) ? clone(a) : a)) as unknown as T;
}

/** The tensors `cloneArgsForTuning` made (those not identical to the originals), for `clonedInputs`. */
export function clonedTensors(original: readonly unknown[], cloned: readonly unknown[]): Tensor[] {
  return cloned.filter((c, i): c is Tensor => c instanceof Tensor && c !== original[i]);
}
