/**
 * Warm-up until the device's speed stops rising, before anything is timed on an accelerator.
 *
 * Why: under Dawn/Vulkan an NVIDIA GPU's SM clock falls to its idle 345 MHz within about a second
 * of light load (a compile, the host's syncs between small batches) and, under the half-busy load
 * of a benchmark loop, took seconds to climb back to 1980 (issue #20, session 29: samples every
 * 100 ms showed 480, 825, 870, 915, 1245, 1455 MHz over 6 s of timing). A fixed warm-up of 10 ms
 * (KILN_BENCH_WARM_MS) did not cover that, and the same kernel read 2x apart between variants.
 * Under CUDA the clock stayed at 1980 throughout, so this changes nothing there but the time taken.
 *
 * How: the functions run round-robin in rounds of back-to-back calls (one sync a round, so the GPU
 * is never idle for long), each round's device time taken from events; it stops once the rounds
 * of the last 300 ms are no faster than those before them (roundsSettled: the clock has stopped
 * climbing), after at least `minMs`, or at `maxMs` of wall time regardless (KILN_BENCH_STEADY_MS).
 */
import * as kiln from '../index.js';
import { getOption } from '../runtime/config.js';

export interface SteadyReport {
  /** Rounds run and the wall time they took (ms). */
  rounds: number;
  wallMs: number;
  /** Device ms of the first and the last round (one call of every function each). */
  firstMs: number;
  lastMs: number;
  /** Whether it stopped because the rounds settled (false: it ran out of time). */
  settled: boolean;
}

export interface SteadyOptions {
  /** The shortest warm-up (ms, default 200). */
  minMs?: number;
  /** The longest (ms, default KILN_BENCH_STEADY_MS). */
  maxMs?: number;
  /** The window of recent rounds compared with the ones before it (ms, default 300). */
  windowMs?: number;
  /** How much faster the recent rounds may be and still count as settled (default 0.02). */
  tolerance?: number;
}

/** One warm-up round: device ms per call of each function, and when it ended (ms from the start). */
export interface SteadyRound {
  readonly ms: number;
  readonly at: number;
}

/**
 * Whether rounds (oldest first) have settled: the fastest of the last `windowMs` is no more than
 * `tolerance` faster than the fastest before it (with two rounds or more on each side). A clock
 * that is still climbing makes the recent rounds faster than any before them; comparing rounds
 * with their neighbours instead would stop in the middle of a slow climb (session 29: 345 to
 * 1980 MHz over 1.2 s, under 3% between rounds of 20 ms).
 */
export function roundsSettled(rounds: readonly SteadyRound[], windowMs: number, tolerance: number): boolean {
  if (rounds.length === 0) return false;
  const cut = rounds[rounds.length - 1]!.at - windowMs;
  const before = rounds.filter((r) => r.at <= cut).map((r) => r.ms);
  const recent = rounds.filter((r) => r.at > cut).map((r) => r.ms);
  if (before.length < 2 || recent.length < 2) return false;
  return Math.min(...recent) >= Math.min(...before) * (1 - tolerance);
}

/** Runs `fns` on `device` until a round of one call each stops getting faster; see the header. */
export function warmUntilSteady(device: string, fns: readonly (() => void)[], options: SteadyOptions = {}): SteadyReport {
  const minMs = options.minMs ?? 600;
  const windowMs = options.windowMs ?? 300;
  const maxMs = options.maxMs ?? getOption('KILN_BENCH_STEADY_MS');
  const tolerance = options.tolerance ?? 0.02;
  const t0 = performance.now();
  const rounds: SteadyRound[] = [];
  // Calls of each function per round: grown until a round holds about 20 ms of device work, so
  // the sync between rounds is a small gap in a busy GPU.
  let per = 1;
  while (true) {
    const ms = kiln.scope(() => {
      const s = new kiln.Event(device).record();
      for (let i = 0; i < per; i++) for (const fn of fns) kiln.scope(fn);
      const e = new kiln.Event(device).record();
      e.synchronize();
      return s.elapsedTime(e) / per;
    });
    rounds.push({ ms, at: performance.now() - t0 });
    if (ms * per < 20 && per < 1024) per = Math.min(1024, Math.max(per * 2, Math.ceil(20 / Math.max(ms, 1e-3))));
    const wallMs = performance.now() - t0;
    const done = roundsSettled(rounds, windowMs, tolerance);
    if ((done && wallMs >= minMs) || wallMs >= maxMs) {
      return { rounds: rounds.length, wallMs, firstMs: rounds[0]!.ms, lastMs: ms, settled: done };
    }
  }
}
