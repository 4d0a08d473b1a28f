/**
 * `kiln bench`: runs the benchmark workloads (src/bench/workloads.ts) through the harness, prints
 * a table on stdout, a progress bar on stderr, and with --json writes
 * `{ meta: { machine, device, date, kiln_version, command }, results: [rows], details: [...] }`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as kiln from '../index.js';
import type { DType } from '../index.js';
import { type BenchResult, type BenchRow, benchWorkload } from '../bench/harness.js';
import { BENCH_SIZES, type BenchSize, WORKLOADS, type WorkloadSpec, getWorkload } from '../bench/workloads.js';

export const BENCH_USAGE = `Usage: kiln bench [options]

Options:
  --device <d>          device to run on (default: the first GPU accelerator, else cpu)
  --dtype <t>           float32 (default) or bfloat16
  --size <s>            full | cpu | tiny (default: cpu on the cpu device, full elsewhere)
  --workload <w>        a workload to run (repeatable, or comma-separated; default: all)
  --reps <n>            timed runs per workload (default: 10 on cpu, 50 elsewhere)
  --warmup <n>          untimed runs first (default: 3 on cpu, 10 elsewhere)
  --include-slow        also run the slow workloads on cpu (qwen3-0.6b-forward)
  --seed <n>            seed for weights and inputs (default 0)
  --json <file>         also write the results and machine details as JSON
  --no-progress         no progress bar on stderr

Workloads: ${WORKLOADS.map((w) => w.name).join(', ')}`;

const DTYPES: readonly DType[] = ['float32', 'bfloat16'];

export interface BenchCliOptions {
  device: string;
  dtype: DType;
  size: BenchSize;
  workloads: WorkloadSpec[];
  skipped: string[];
  reps: number;
  warmup: number;
  seed: number;
  json: string | null;
  progress: boolean;
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
      dtype: { type: 'string', default: 'float32' },
      size: { type: 'string' },
      workload: { type: 'string', multiple: true },
      reps: { type: 'string' },
      warmup: { type: 'string' },
      seed: { type: 'string' },
      'include-slow': { type: 'boolean', default: false },
      json: { type: 'string' },
      'no-progress': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return 'help';
  if (positionals.length > 0) throw new Error(`bench: unexpected argument '${positionals[0]}' (workloads go after --workload)`);
  const device = kiln.Device.from(pickDevice(values.device)).toString();
  const onCpu = device === 'cpu';
  const dtype = values.dtype as DType;
  if (!DTYPES.includes(dtype)) throw new Error(`bench: --dtype must be one of ${DTYPES.join(', ')}, got '${values.dtype}'`);
  const size = (values.size ?? (onCpu ? 'cpu' : 'full')) as BenchSize;
  if (!BENCH_SIZES.includes(size)) throw new Error(`bench: --size must be one of ${BENCH_SIZES.join(', ')}, got '${values.size}'`);
  const names = (values.workload ?? []).flatMap((w) => w.split(',')).map((w) => w.trim()).filter((w) => w.length > 0);
  const requested = names.length > 0 ? names.map(getWorkload) : [...WORKLOADS];
  const includeSlow = values['include-slow'] ?? false;
  // Slow workloads are skipped on the cpu at the real sizes unless asked for (by flag or by name).
  const skip = (w: WorkloadSpec): boolean => w.slowOnCpu && onCpu && size !== 'tiny' && !includeSlow && names.length === 0;
  return {
    device,
    dtype,
    size,
    workloads: requested.filter((w) => !skip(w)),
    skipped: requested.filter(skip).map((w) => w.name),
    reps: intOption('reps', values.reps, onCpu ? 10 : 50, 1),
    warmup: intOption('warmup', values.warmup, onCpu ? 3 : 10, 0),
    seed: intOption('seed', values.seed, 0, 0),
    json: values.json ?? null,
    progress: !(values['no-progress'] ?? false),
  };
}

// ---------------------------------------------------------------------------------------------
// progress bar (stderr)

class Progress {
  private last = '';
  private readonly tty: boolean;

  constructor(
    private readonly enabled: boolean,
    private readonly count: number,
  ) {
    this.tty = process.stderr.isTTY === true;
  }

  update(index: number, name: string, phase: string, done: number, total: number): void {
    if (!this.enabled || !this.tty) return;
    const width = 24;
    const frac = total > 0 ? done / total : 0;
    const filled = Math.round(frac * width);
    const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${index + 1}/${this.count} ${name} ${phase} ${done}/${total}`;
    if (line === this.last) return;
    this.last = line;
    process.stderr.write(`\r${line.padEnd(100)}`.slice(0, 101));
  }

  /** A finished workload: one permanent line. */
  line(text: string): void {
    if (!this.enabled) return;
    if (this.tty) process.stderr.write(`\r${' '.repeat(101)}\r`);
    process.stderr.write(`${text}\n`);
    this.last = '';
  }
}

// ---------------------------------------------------------------------------------------------
// table and JSON

const fmt = (v: number | null, digits: number): string => (v === null || !Number.isFinite(v) ? '-' : v.toFixed(digits));

export function formatTable(rows: readonly BenchRow[]): string {
  const header = ['workload', 'device', 'dtype', 'eager ms', 'compiled ms', 'speedup', 'compile s', 'max |diff|'];
  const body = rows.map((r) => [
    r.workload,
    r.device,
    r.dtype,
    fmt(r.eager_ms, 3),
    fmt(r.compiled_ms, 3),
    r.speedup === null ? '-' : `${r.speedup.toFixed(2)}x`,
    fmt(r.compile_s, 2),
    r.max_abs_diff === null ? '-' : r.max_abs_diff.toExponential(2),
  ]);
  const all = [header, ...body];
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => (i < 3 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

export function machineInfo(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    os: `${os.type()} ${os.release()} (${process.platform}-${process.arch})`,
    cpu_model: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memory_bytes: os.totalmem(),
    node: process.version,
  };
}

export function deviceInfo(device: string): Record<string, unknown> {
  const d = kiln.Device.from(device);
  const props = kiln.getAccelerator(d.type).properties(d.index ?? 0);
  return { device: d.toString(), type: d.type, properties: props };
}

// ---------------------------------------------------------------------------------------------

export function runBench(argv: string[]): number {
  const opts = parseBenchArgs(argv);
  if (opts === 'help') {
    console.log(BENCH_USAGE);
    return 0;
  }
  const progress = new Progress(opts.progress, opts.workloads.length);
  if (opts.skipped.length > 0) progress.line(`bench: skipping ${opts.skipped.join(', ')} on cpu (slow; --include-slow runs it)`);
  const results: BenchResult[] = [];
  for (const [i, spec] of opts.workloads.entries()) {
    progress.update(i, spec.name, 'building', 0, opts.warmup + opts.reps);
    const t0 = performance.now();
    const w = spec.build({ size: opts.size, device: opts.device, dtype: opts.dtype, seed: opts.seed });
    const buildS = (performance.now() - t0) / 1000;
    try {
      const r = benchWorkload(w, {
        reps: opts.reps,
        warmup: opts.warmup,
        onProgress: (done, total) => progress.update(i, spec.name, done <= opts.warmup ? 'warm-up' : 'timing', done, total),
      });
      results.push(r);
      progress.line(`bench: ${spec.name} ${r.row.eager_ms.toFixed(3)} ms (median of ${opts.reps}; built in ${buildS.toFixed(1)} s)`);
    } finally {
      w.dispose();
    }
  }
  const rows = results.map((r) => r.row);
  console.log(formatTable(rows));
  if (opts.json) {
    const report = {
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
      },
      results: rows,
      details: results.map((r) => ({
        workload: r.row.workload,
        times_ms: r.timesMs,
        min_ms: r.minMs,
        output_shape: r.checksum.shape,
        checksum_sum: r.checksum.sum,
        checksum_abs_sum: r.checksum.absSum,
        output_finite: r.checksum.finite,
        allocated_bytes_after_warmup: r.allocatedBytes.afterWarmup,
        allocated_bytes_after_reps: r.allocatedBytes.afterReps,
      })),
    };
    fs.mkdirSync(path.dirname(path.resolve(opts.json)), { recursive: true });
    fs.writeFileSync(opts.json, `${JSON.stringify(report, null, 2)}\n`);
    progress.line(`bench: wrote ${opts.json}`);
  }
  return 0;
}
