/**
 * Compile-time measurements that need fresh processes (a process keeps its compiled programs,
 * kernels and worker pool, so only a new one shows what a user's next run pays):
 * - startup: cold (empty KILN_CACHE_DIR) vs warm (the directory a cold run just filled) time from
 *   `kiln.compile(...)` to the first call's result, with the disk-cache and pool counters that
 *   explain it;
 * - compile report: the cold first call with the compile worker pool at its default size vs
 *   KILN_COMPILE_WORKERS=1 (and 0, in-process), each from an empty cache.
 * Runs alternate between the variants and report medians, so load drift hits all of them.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { median } from './harness.js';

const CHILD = fileURLToPath(new URL('./startup-child.js', import.meta.url));

/** What one child process reports (startup-child.ts). */
export interface StartupSample {
  workload: string;
  import_s: number;
  first_call_s: number;
  /** Process CPU seconds of the first call (pool workers included). */
  first_call_cpu_s: number;
  /** The second call: the program's run alone. */
  second_call_s: number;
  counters: { compiles: number; diskHits: number; diskMisses: number; traces: number };
  pool: { size: number; workers: number; tasks: number };
  disk: { hits: number; misses: number; corrupt: number; writes: number };
  output: { sum: number; abs_sum: number; finite: boolean };
}

export interface StartupTarget {
  workload: string;
  size: string;
  device: string;
  dtype: string;
  seed: number;
}

/** Runs one measurement in a new Node process with the given cache directory and extra environment. */
export function startupSample(t: StartupTarget, cacheDir: string, env: Record<string, string | undefined> = {}): StartupSample {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, KILN_CACHE_DIR: cacheDir };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete childEnv[k];
    else childEnv[k] = v;
  }
  const r = spawnSync(process.execPath, [CHILD, t.workload, t.size, t.device, t.dtype, String(t.seed)], { encoding: 'utf8', env: childEnv, timeout: 600_000 });
  if (r.status !== 0) throw new Error(`bench: startup measurement of ${t.workload} failed (exit ${String(r.status ?? r.signal)}):\n${r.stderr}`);
  const last = r.stdout.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(last) as StartupSample;
  } catch {
    throw new Error(`bench: startup measurement of ${t.workload} printed no report:\n${r.stdout}\n${r.stderr}`);
  }
}

function withTempDir<T>(fn: (dir: string) => T): T {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-cache-'));
  try {
    return fn(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export interface StartupResult {
  workload: string;
  /** Median first-call seconds with an empty cache / with the cache a cold run filled. */
  cold_start_s: number;
  warm_start_s: number;
  /** Median CPU seconds of the warm first calls (robust to a busy machine). */
  warm_start_cpu_s: number;
  /** Median second-call seconds of the warm runs: the run alone, without compiling. */
  warm_second_call_s: number;
  runs: number;
  /** Counters of the last cold and warm runs (the warm one should show disk hits and no pool tasks). */
  cold: StartupSample;
  warm: StartupSample;
}

/** `runs` pairs of (cold in a new empty directory, then warm in that directory). */
export function measureStartup(t: StartupTarget, runs: number, onRun?: (done: number, total: number) => void): StartupResult {
  const cold: StartupSample[] = [];
  const warm: StartupSample[] = [];
  for (let i = 0; i < runs; i++) {
    withTempDir((dir) => {
      cold.push(startupSample(t, dir));
      onRun?.(2 * i + 1, 2 * runs);
      warm.push(startupSample(t, dir));
      onRun?.(2 * i + 2, 2 * runs);
    });
  }
  return {
    workload: t.workload,
    cold_start_s: median(cold.map((s) => s.first_call_s)),
    warm_start_s: median(warm.map((s) => s.first_call_s)),
    warm_start_cpu_s: median(warm.map((s) => s.first_call_cpu_s)),
    warm_second_call_s: median(warm.map((s) => s.second_call_s)),
    runs,
    cold: cold[cold.length - 1]!,
    warm: warm[warm.length - 1]!,
  };
}

export interface CompileReportRow {
  workload: string;
  /** 'default' or the KILN_COMPILE_WORKERS value used. */
  workers_setting: string;
  /** The pool size the child actually used. */
  pool_size: number;
  /** Median cold first-call seconds (empty cache each run). */
  compile_s: number;
  /** Every run's seconds. */
  runs_s: number[];
  pool_tasks: number;
  kernels_compiled: number;
}

/** Settings compared: the pool at its default size, one worker, and in-process (0). */
export const COMPILE_REPORT_SETTINGS: readonly (string | undefined)[] = [undefined, '1', '0'];

/** Cold compiles of `t` under each worker setting, interleaved, `runs` times each. */
export function compileReport(t: StartupTarget, runs: number, onRun?: (done: number, total: number) => void): CompileReportRow[] {
  const samples = COMPILE_REPORT_SETTINGS.map(() => [] as StartupSample[]);
  let done = 0;
  for (let i = 0; i < runs; i++) {
    COMPILE_REPORT_SETTINGS.forEach((setting, k) => {
      samples[k]!.push(withTempDir((dir) => startupSample(t, dir, { KILN_COMPILE_WORKERS: setting })));
      onRun?.(++done, runs * COMPILE_REPORT_SETTINGS.length);
    });
  }
  return COMPILE_REPORT_SETTINGS.map((setting, k) => {
    const s = samples[k]!;
    const last = s[s.length - 1]!;
    return {
      workload: t.workload,
      workers_setting: setting ?? 'default',
      pool_size: last.pool.size,
      compile_s: median(s.map((x) => x.first_call_s)),
      runs_s: s.map((x) => x.first_call_s),
      pool_tasks: last.pool.tasks,
      kernels_compiled: last.counters.compiles,
    };
  });
}
