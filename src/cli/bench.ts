/**
 * `kiln bench`: runs the benchmark workloads (src/bench/workloads.ts) through the harness, prints
 * a table on stdout, a progress bar on stderr (plain lines when stderr is not a terminal), and with
 * --json writes `{ meta: { machine, device, date, kiln_version, command, ... }, results: [rows],
 * details: [...] }`. Without --workload it runs a quick subset (QUICK_WORKLOADS); `--all` or
 * `--workload all` runs every workload. Compiles use a fresh temporary KILN_CACHE_DIR, so
 * `compile s` is always a cold compile; `--startup` adds cold vs warm-cache start times measured
 * in new processes, `--compile-report` the cold compile with the worker pool vs one worker.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as kiln from '../index.js';
import type { DType } from '../index.js';
import { type BenchResult, type BenchRow, benchWorkload } from '../bench/harness.js';
import { BENCH_SIZES, type BenchSize, WORKLOADS, type WorkloadSpec, getWorkload } from '../bench/workloads.js';
import { type CompileReportRow, type StartupResult, compileReport, measureStartup } from '../bench/startup.js';
import { getOption, setOption, withEnvOption } from '../runtime/config.js';
import { fitLine, renderTable } from './term-width.js';

/**
 * The default workload list: one of each kind (pointwise chain, small MLP, transformer block,
 * convolutions) that finishes in seconds at the cpu size on a 2-core machine, so `npm run bench`
 * answers in under a minute. Left out: elementwise-4096 (16M elements per op even at the cpu size:
 * about 18 s per eager run there), mlp-2048x4096 (GEMM-bound like mlp-64x512, about 0.4 s a run)
 * and qwen3 (behind --include-slow). `--all` runs everything.
 */
export const QUICK_WORKLOADS: readonly string[] = ['elementwise-1024', 'mlp-64x512', 'transformer-block', 'conv-stack'];

/** The workload of --compile-report: the one with the most kernels among the quick ones. */
export const COMPILE_REPORT_WORKLOAD = 'transformer-block';

export const BENCH_USAGE = `Usage: kiln bench [options]

Options:
  --device <d>          device to run on (default: the first GPU accelerator, else cpu)
  --dtype <t...>        float32 (default), bfloat16 and/or float16: repeat the flag, separate with
                        commas or list several after it (--dtype float32 bfloat16); each workload
                        runs per dtype
  --size <s>            full | cpu | tiny (default: cpu on the cpu device, full elsewhere)
  --workload <w>        a workload to run (repeatable, or comma-separated; 'all' for every one;
                        default: the quick subset ${QUICK_WORKLOADS.join(', ')})
  --all                 every workload (same as --workload all)
  --reps <n>            timed runs per workload (default: 10 on cpu, 50 elsewhere)
  --warmup <n>          untimed runs first (default: 3 on cpu, 10 elsewhere)
  --include-slow        also run the slow workloads on cpu (qwen3-0.6b-forward)
  --seed <n>            seed for weights and inputs (default 0)
  --json <file>         also write the results and machine details as JSON
  --startup             also time compile + first call in new processes, cold (empty cache)
                        and warm (KILN_CACHE_DIR filled by the cold run): cold start s, warm start s
  --startup-runs <n>    cold/warm pairs for --startup, median reported (default 3)
  --compile-report      cold compile of ${COMPILE_REPORT_WORKLOAD} with the compile worker pool at its
                        default size vs KILN_COMPILE_WORKERS=1 and =0 (new processes, empty caches)
  --report-workload <w> the workload of --compile-report (default ${COMPILE_REPORT_WORKLOAD})
  --no-progress         no progress bar (nor slow-build notes) on stderr

Compiles run with a new empty KILN_CACHE_DIR (removed at the end), so 'compile s' is always cold.
A workload that fails is reported and the others still run; the exit status is then 1.

Workloads: ${WORKLOADS.map((w) => w.name).join(', ')}`;

const DTYPES: readonly DType[] = ['float32', 'bfloat16', 'float16'];

export interface BenchCliOptions {
  device: string;
  /** The first of `dtypes`. */
  dtype: DType;
  /** Every dtype to run, in order (each workload runs once per dtype). */
  dtypes: DType[];
  size: BenchSize;
  workloads: WorkloadSpec[];
  skipped: string[];
  reps: number;
  warmup: number;
  seed: number;
  json: string | null;
  progress: boolean;
  startup: boolean;
  startupRuns: number;
  /** Workload of --compile-report. */
  reportWorkload: string;
  compileReport: boolean;
}

function pickDevice(requested?: string): string {
  if (requested) return requested;
  const gpu = kiln.probeAccelerators().filter((r) => r.available && r.type !== 'cpu');
  return gpu.length > 0 ? `${gpu[0]!.type}:0` : 'cpu';
}

function intOption(name: string, v: string | undefined, fallback: number, min: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`bench: --${name} must be an integer >= ${min}, got '${v}'`);
  return n;
}

export function parseBenchArgs(argv: string[]): BenchCliOptions | 'help' {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      device: { type: 'string' },
      dtype: { type: 'string', multiple: true },
      size: { type: 'string' },
      workload: { type: 'string', multiple: true },
      reps: { type: 'string' },
      warmup: { type: 'string' },
      seed: { type: 'string' },
      'include-slow': { type: 'boolean', default: false },
      all: { type: 'boolean', default: false },
      startup: { type: 'boolean', default: false },
      'startup-runs': { type: 'string' },
      'report-workload': { type: 'string' },
      'compile-report': { type: 'boolean', default: false },
      json: { type: 'string' },
      'no-progress': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return 'help';
  // `--dtype float32 bfloat16`: dtype names right after --dtype arrive as positionals.
  const extraDtypes = positionals.filter((p) => (DTYPES as readonly string[]).includes(p));
  const stray = positionals.find((p) => !(DTYPES as readonly string[]).includes(p));
  if (stray !== undefined) throw new Error(`bench: unexpected argument '${stray}' (workloads go after --workload)`);
  if (extraDtypes.length > 0 && values.dtype === undefined) throw new Error(`bench: unexpected argument '${extraDtypes[0]}' (dtypes go after --dtype)`);
  const device = kiln.Device.from(pickDevice(values.device)).toString();
  const onCpu = device === 'cpu';
  const dtypes = [...(values.dtype ?? ['float32']).flatMap((d) => d.split(',')), ...extraDtypes].map((d) => d.trim()).filter((d) => d.length > 0) as DType[];
  for (const d of dtypes) if (!DTYPES.includes(d)) throw new Error(`bench: --dtype must be one of ${DTYPES.join(', ')}, got '${d}'`);
  const dtype = dtypes[0] ?? 'float32';
  const size = (values.size ?? (onCpu ? 'cpu' : 'full')) as BenchSize;
  if (!BENCH_SIZES.includes(size)) throw new Error(`bench: --size must be one of ${BENCH_SIZES.join(', ')}, got '${values.size}'`);
  const names = (values.workload ?? []).flatMap((w) => w.split(',')).map((w) => w.trim()).filter((w) => w.length > 0);
  const all = (values.all ?? false) || names.includes('all');
  const named = names.filter((n) => n !== 'all');
  const requested = all ? [...WORKLOADS] : named.length > 0 ? named.map(getWorkload) : QUICK_WORKLOADS.map(getWorkload);
  const includeSlow = values['include-slow'] ?? false;
  // Slow workloads are skipped on the cpu at the real sizes unless asked for (by flag or by name).
  const skip = (w: WorkloadSpec): boolean => w.slowOnCpu && onCpu && size !== 'tiny' && !includeSlow && !named.includes(w.name);
  return {
    device,
    dtype,
    dtypes: [...new Set(dtypes)],
    size,
    workloads: requested.filter((w) => !skip(w)),
    skipped: requested.filter(skip).map((w) => w.name),
    reps: intOption('reps', values.reps, onCpu ? 10 : 50, 1),
    warmup: intOption('warmup', values.warmup, onCpu ? 3 : 10, 0),
    seed: intOption('seed', values.seed, 0, 0),
    json: values.json ?? null,
    progress: !(values['no-progress'] ?? false),
    startup: values.startup ?? false,
    startupRuns: intOption('startup-runs', values['startup-runs'], 3, 1),
    reportWorkload: values['report-workload'] ?? COMPILE_REPORT_WORKLOAD,
    compileReport: values['compile-report'] ?? false,
  };
}

// ---------------------------------------------------------------------------------------------
// progress (stderr): a bar redrawn in place on a terminal, plain lines otherwise

class Progress {
  private last = '';
  private readonly tty: boolean;

  constructor(
    private readonly enabled: boolean,
    private readonly count: number,
  ) {
    this.tty = process.stderr.isTTY === true;
  }

  /** The `index/phase` last announced as a plain line (not a terminal: logs get one line per phase, no bar). */
  private announced = '';

  update(index: number, name: string, phase: string, done: number, total: number): void {
    if (!this.enabled) return;
    if (!this.tty) {
      const key = `${index}/${phase}`;
      if (key !== this.announced) {
        this.announced = key;
        process.stderr.write(`bench: [${index + 1}/${this.count}] ${name} ${phase}\n`);
      }
      return;
    }
    const width = 24;
    const frac = total > 0 ? done / total : 0;
    const filled = Math.round(frac * width);
    const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${index + 1}/${this.count} ${name} ${phase} ${done}/${total}`;
    if (line === this.last) return;
    this.last = line;
    // Padded to the terminal's width (read each time: it may be resized) and cut one short of it,
    // so the redraw never wraps onto a second line.
    const cols = this.columns();
    process.stderr.write(`\r${fitLine(line, cols).padEnd(cols - 1)}`);
  }

  private columns(): number {
    return process.stderr.columns ?? 101;
  }

  /** A finished workload: one permanent line. */
  line(text: string): void {
    if (!this.enabled) return;
    if (this.tty) process.stderr.write(`\r${' '.repeat(this.columns() - 1)}\r`);
    process.stderr.write(`${text}\n`);
    this.last = '';
  }
}

// ---------------------------------------------------------------------------------------------
// table and JSON

const fmt = (v: number | null, digits: number): string => (v === null || !Number.isFinite(v) ? '-' : v.toFixed(digits));

/** A report row: the shared schema, plus start times with --startup. */
export type ReportRow = BenchRow & { cold_start_s?: number; warm_start_s?: number };

/** The table; `columns` (a terminal's width) fits it by shortening names, then wrapping columns. */
export function formatTable(rows: readonly ReportRow[], columns?: number): string {
  const startup = rows.some((r) => r.warm_start_s !== undefined);
  const header = ['workload', 'device', 'dtype', 'eager ms', 'compiled ms', 'speedup', 'compile s', 'max |diff|', ...(startup ? ['cold start s', 'warm start s'] : [])];
  const body = rows.map((r) => [
    r.workload,
    r.device,
    r.dtype,
    fmt(r.eager_ms, 3),
    fmt(r.compiled_ms, 3),
    r.speedup === null ? '-' : `${r.speedup.toFixed(2)}x`,
    fmt(r.compile_s, 2),
    r.max_abs_diff === null ? '-' : r.max_abs_diff.toExponential(2),
    ...(startup ? [fmt(r.cold_start_s ?? null, 3), fmt(r.warm_start_s ?? null, 3)] : []),
  ]);
  return renderTable(header, body, 3, columns);
}

export function machineInfo(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    os: `${os.type()} ${os.release()} (${process.platform}-${process.arch})`,
    cpu_model: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memory_bytes: os.totalmem(),
    node: process.version,
    // 1/5/15-minute load averages at the start: wall times on a shared machine depend on them.
    load_average: os.loadavg(),
  };
}

export function deviceInfo(device: string): Record<string, unknown> {
  const d = kiln.Device.from(device);
  const props = kiln.getAccelerator(d.type).properties(d.index ?? 0);
  return { device: d.toString(), type: d.type, properties: props };
}

// ---------------------------------------------------------------------------------------------

export function formatCompileReport(rows: readonly CompileReportRow[], columns?: number): string {
  const header = ['workload', 'KILN_COMPILE_WORKERS', 'pool size', 'cold compile s', 'pool tasks'];
  const body = rows.map((r) => [r.workload, r.workers_setting, String(r.pool_size), fmt(r.compile_s, 3), String(r.pool_tasks)]);
  return renderTable(header, body, 2, columns);
}

/**
 * Runs `fn` with KILN_CACHE_DIR set to a new empty directory (removed afterwards), so every
 * compile in it is cold whatever the user's cache holds.
 */
function withFreshCache<T>(fn: () => T): T {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-cache-'));
  try {
    // The variable itself (not an override): child processes of the startup bench inherit it.
    return withEnvOption('KILN_CACHE_DIR', dir, fn);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function runBench(argv: string[]): number {
  const opts = parseBenchArgs(argv);
  if (opts === 'help') {
    console.log(BENCH_USAGE);
    return 0;
  }
  const runs = opts.dtypes.flatMap((dtype) => opts.workloads.map((spec) => ({ dtype, spec })));
  // --no-progress means a quiet stderr: the slow-build notes (runtime/notes.ts) are progress too,
  // and every bench compiles into a fresh cache, so they would come on every run.
  if (!opts.progress) setOption('KILN_QUIET', true);
  const progress = new Progress(opts.progress, runs.length);
  if (opts.skipped.length > 0) progress.line(`bench: skipping ${opts.skipped.join(', ')} on cpu (slow; --include-slow runs it)`);
  const results: BenchResult[] = [];
  let report: CompileReportRow[] | null = null;
  const report_ = (): { rows: ReportRow[]; json: unknown } => {
    const rows: ReportRow[] = results.map((r) => {
      const s = startups.get(`${r.row.workload}/${r.row.dtype}`);
      return s ? { ...r.row, cold_start_s: s.cold_start_s, warm_start_s: s.warm_start_s } : { ...r.row };
    });
    const json = {
      meta: {
        machine: machineInfo(),
        device: deviceInfo(opts.device),
        date: new Date().toISOString(),
        kiln_version: kiln.version,
        command: process.argv.slice(),
        size: opts.size,
        reps: opts.reps,
        warmup: opts.warmup,
        seed: opts.seed,
        skipped: opts.skipped,
        dtypes: opts.dtypes,
        failures,
        complete: results.length + failures.length === runs.length,
        ...(startups.size > 0 ? { startup_runs: opts.startupRuns } : {}),
        ...(report ? { compile_report: report } : {}),
      },
      results: rows,
      details: results.map((r) => {
        const s = startups.get(`${r.row.workload}/${r.row.dtype}`);
        return {
          workload: r.row.workload,
          dtype: r.row.dtype,
          times_ms: r.timesMs,
          min_ms: r.minMs,
          output_shape: r.checksum.shape,
          checksum_sum: r.checksum.sum,
          checksum_abs_sum: r.checksum.absSum,
          output_finite: r.checksum.finite,
          allocated_bytes_after_warmup: r.allocatedBytes.afterWarmup,
          allocated_bytes_after_reps: r.allocatedBytes.afterReps,
          ...(r.steady ? { steady_warmup: { rounds: r.steady.rounds, wall_ms: r.steady.wallMs, first_round_ms: r.steady.firstMs, last_round_ms: r.steady.lastMs, settled: r.steady.settled } } : {}),
          ...(s ? { startup: { warm_start_cpu_s: s.warm_start_cpu_s, warm_second_call_s: s.warm_second_call_s, cold: s.cold, warm: s.warm } } : {}),
        };
      }),
    };
    return { rows, json };
  };
  // Written after every workload too, so a run cut short (a time limit) keeps what it measured.
  const partial = (): void => {
    if (opts.json) writeJson(opts.json, report_().json);
  };
  const failures: { workload: string; dtype: DType; error: string }[] = [];
  const startups = new Map<string, StartupResult>();
  const forcedFailures = new Set((getOption('KILN_BENCH_FAIL') ?? '').split(',').filter((n) => n !== ''));
  withFreshCache(() => {
    for (const [i, { dtype, spec }] of runs.entries()) {
      progress.update(i, spec.name, 'building', 0, opts.warmup + opts.reps);
      let w: ReturnType<WorkloadSpec['build']> | undefined;
      try {
        const t0 = performance.now();
        w = spec.build({ size: opts.size, device: opts.device, dtype, seed: opts.seed });
        const buildS = (performance.now() - t0) / 1000;
        if (forcedFailures.has(spec.name)) throw new Error(`KILN_BENCH_FAIL: forced failure of ${spec.name}`);
        // The harness runs eager once and compiles (cold) before its first tick.
        progress.update(i, spec.name, 'compiling', 0, opts.warmup + opts.reps);
        const r = benchWorkload(w, {
          reps: opts.reps,
          warmup: opts.warmup,
          onProgress: (done, total) => progress.update(i, spec.name, done <= opts.warmup ? 'warm-up' : 'timing', done, total),
        });
        results.push(r);
        progress.line(
          `bench: ${spec.name} ${r.row.eager_ms.toFixed(3)} ms eager, ${r.row.compiled_ms?.toFixed(3) ?? '-'} ms compiled, ${dtype} (median of ${opts.reps}; built in ${buildS.toFixed(1)} s)`,
        );
      } catch (e) {
        // One failing workload must not lose the others' results: report it and go on (the exit
        // status says so at the end).
        failures.push({ workload: spec.name, dtype, error: (e as Error).message });
        progress.line(`bench: ${spec.name} ${dtype} FAILED: ${(e as Error).message.split('\n')[0]}`);
      } finally {
        w?.dispose();
      }
      partial();
      if (opts.startup) {
        const s = measureStartup(target(opts, spec.name, dtype), opts.startupRuns, (done, total) => progress.update(i, spec.name, 'startup', done, total));
        startups.set(`${spec.name}/${dtype}`, s);
        progress.line(
          `bench: ${spec.name} start ${s.cold_start_s.toFixed(3)} s cold, ${s.warm_start_s.toFixed(3)} s warm ` +
            `(${s.warm_start_cpu_s.toFixed(3)} s CPU; the run alone ${s.warm_second_call_s.toFixed(3)} s; ${s.warm.counters.diskHits} disk hits, ${s.warm.pool.tasks} pool tasks)`,
        );
      }
    }
  });
  if (opts.compileReport) {
    const p = new Progress(opts.progress, 1);
    report = compileReport(target(opts, opts.reportWorkload, opts.dtype), opts.startupRuns, (done, total) => p.update(0, opts.reportWorkload, 'compile report', done, total));
    p.line(`bench: compile report for ${opts.reportWorkload} done`);
  }
  const { rows, json } = report_();
  // A terminal's width fits the tables; piped output keeps full lines.
  const columns = process.stdout.isTTY ? process.stdout.columns : undefined;
  console.log(formatTable(rows, columns));
  if (report) console.log(`\ncold compile of ${opts.reportWorkload}, compile worker pool vs one worker (median of ${opts.startupRuns}):\n${formatCompileReport(report, columns)}`);
  if (opts.json) {
    writeJson(opts.json, json);
    progress.line(`bench: wrote ${opts.json}`);
  }
  if (failures.length > 0) {
    // On stderr even with --no-progress: a run with a failed workload is not a complete result,
    // and scripts that time-limit and merge runs must see it in the exit status.
    console.error(`bench: ${failures.length} of ${runs.length} workload runs failed: ${failures.map((f) => `${f.workload} ${f.dtype}`).join(', ')}`);
    return 1;
  }
  return 0;
}

function writeJson(file: string, json: unknown): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
}

function target(opts: BenchCliOptions, workload: string, dtype: DType): { workload: string; size: string; device: string; dtype: string; seed: number } {
  return { workload, size: opts.size, device: opts.device, dtype, seed: opts.seed };
}
