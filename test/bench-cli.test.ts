/**
 * `kiln bench` end to end: spawns the built CLI at the tiny size with --json and checks the table
 * on stdout and the JSON report's schema; the default quick subset; --startup (a second process
 * with the cache a cold one filled loads its program from disk and compiles nothing in the pool)
 * and --compile-report; bad options exit non-zero with a message, and so does a run in which a
 * workload fails (forced with the KILN_BENCH_FAIL test hook), after measuring the others.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { HANG_GUARD_MS } from './helpers/limits.js';

const here = path.dirname(fileURLToPath(import.meta.url));
// Compiled tests run from dist/test; the CLI is dist/src/cli/main.js.
const MAIN = path.join(here, '../src/cli/main.js');
const NAMES = ['elementwise-4096', 'elementwise-1024', 'mlp-2048x4096', 'mlp-64x512', 'transformer-block', 'conv-stack', 'qwen3-0.6b-forward'];
const ROW_KEYS = ['framework', 'workload', 'device', 'dtype', 'size', 'eager_ms', 'compiled_ms', 'speedup', 'compile_s', 'max_abs_diff'];
const QUICK = ['elementwise-1024', 'mlp-64x512', 'transformer-block', 'conv-stack'];

function kiln(args: string[], timeout = HANG_GUARD_MS, env: NodeJS.ProcessEnv = process.env): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', timeout, env });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

type Json = Record<string, unknown>;

test('kiln bench --size tiny --json: table and report', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-'));
  try {
    const file = path.join(dir, 'sub', 'out.json');
    const r = kiln(['bench', '--device', 'cpu', '--all', '--size', 'tiny', '--reps', '3', '--warmup', '1', '--json', file]);
    assert.equal(r.status, 0, r.stderr);
    // Table: header, rule, one line per workload with eager and compiled columns.
    const lines = r.stdout.trim().split('\n');
    assert.match(lines[0]!, /^workload\s+device\s+dtype\s+eager ms\s+compiled ms\s+speedup\s+compile s\s+max \|diff\|$/);
    assert.equal(lines.length, 2 + NAMES.length);
    for (const [i, name] of NAMES.entries()) assert.match(lines[2 + i]!, new RegExp(`^${name}\\s+cpu\\s+float32\\s+\\d+\\.\\d{3}\\s+\\d+\\.\\d{3}\\s+\\d+\\.\\d{2}x\\s+\\d+\\.\\d{2}\\s+\\S+$`));
    // Progress goes to stderr, not stdout.
    assert.match(r.stderr, /bench: conv-stack [\d.]+ ms/);
    assert.match(r.stderr, /wrote /);

    const report = JSON.parse(fs.readFileSync(file, 'utf8')) as { meta: Json; results: Json[]; details: Json[] };
    const meta = report.meta;
    const machine = meta.machine as Json;
    assert.equal(typeof machine.os, 'string');
    assert.equal(typeof machine.cpu_model, 'string');
    assert.equal(machine.cores, os.cpus().length);
    assert.equal(machine.memory_bytes, os.totalmem());
    const device = meta.device as Json;
    assert.equal(device.device, 'cpu');
    assert.equal(typeof (device.properties as Json).name, 'string');
    assert.equal(typeof meta.date, 'string');
    assert.equal(new Date(meta.date as string).toISOString(), meta.date);
    assert.ok(Math.abs(Date.now() - Date.parse(meta.date as string)) < HANG_GUARD_MS, 'the date is of this run');
    assert.match(meta.kiln_version as string, /^\d+\.\d+\.\d+/);
    const command = meta.command as string[];
    assert.ok(Array.isArray(command) && command.includes('bench') && command.includes(file));

    assert.deepEqual(report.results.map((row) => row.workload), NAMES);
    for (const row of report.results) {
      assert.deepEqual(Object.keys(row), ROW_KEYS);
      assert.equal(row.framework, 'kiln');
      assert.equal(row.device, 'cpu');
      assert.equal(row.dtype, 'float32');
      assert.equal(row.size, 'tiny');
      assert.ok(typeof row.eager_ms === 'number' && row.eager_ms > 0);
      for (const k of ['compiled_ms', 'speedup', 'compile_s']) assert.ok(typeof row[k] === 'number' && (row[k] as number) > 0, `${String(row.workload)}.${k}`);
      assert.ok(typeof row.max_abs_diff === 'number' && row.max_abs_diff <= 1e-4, `${String(row.workload)}: max |compiled - eager| ${String(row.max_abs_diff)}`);
    }
    assert.equal(report.details.length, NAMES.length);
    for (const d of report.details) {
      assert.equal((d.times_ms as number[]).length, 3);
      assert.equal(d.output_finite, true);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('kiln bench: one workload in bfloat16, and option errors', () => {
  const r = kiln(['bench', '--device', 'cpu', '--size', 'tiny', '--dtype', 'bfloat16', '--workload', 'mlp-64x512', '--reps', '2', '--warmup', '0', '--no-progress']);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 3);
  assert.match(lines[2]!, /^mlp-64x512\s+cpu\s+bfloat16\s+\d+\.\d{3}\s/);
  assert.equal(r.stderr, '', '--no-progress writes nothing on stderr');

  const bad = kiln(['bench', '--size', 'huge']);
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /--size must be one of full, cpu, tiny, got 'huge'/);
  const unknown = kiln(['bench', '--workload', 'resnet']);
  assert.equal(unknown.status, 1);
  assert.match(unknown.stderr, /unknown workload 'resnet'/);

  const help = kiln(['help']);
  assert.equal(help.status, 0);
  assert.match(help.stdout, /bench \[options\]/);
  assert.match(help.stdout, /info \[--json\]/);
  const benchHelp = kiln(['bench', '--help']);
  assert.equal(benchHelp.status, 0);
  assert.match(benchHelp.stdout, /--include-slow/);
});

test('kiln bench: a failed workload is reported, the others still measured, and the exit status is 1', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-'));
  try {
    const file = path.join(dir, 'out.json');
    const args = ['bench', '--device', 'cpu', '--size', 'tiny', '--workload', 'elementwise-1024,mlp-64x512', '--reps', '1', '--warmup', '0', '--no-progress', '--json', file];
    const r = kiln(args, HANG_GUARD_MS, { ...process.env, KILN_BENCH_FAIL: 'mlp-64x512' });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /1 of 2 workload runs failed: mlp-64x512 float32/);
    const names = r.stdout.trim().split('\n').slice(2).map((l) => l.split(/\s+/)[0]);
    assert.deepEqual(names, ['elementwise-1024'], 'the other workload is still in the table');
    const report = JSON.parse(fs.readFileSync(file, 'utf8')) as { meta: Json; results: Json[] };
    assert.equal(report.meta.complete, true, 'complete: every run was attempted (failures lists the failed ones)');
    assert.deepEqual((report.meta.failures as Json[]).map((f) => [f.workload, f.dtype]), [['mlp-64x512', 'float32']]);
    assert.match((report.meta.failures as Json[])[0]!.error as string, /KILN_BENCH_FAIL: forced failure of mlp-64x512/);
    assert.deepEqual(report.results.map((row) => row.workload), ['elementwise-1024']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('kiln bench with no workload runs the quick subset', () => {
  const r = kiln(['bench', '--device', 'cpu', '--size', 'tiny', '--reps', '1', '--warmup', '0', '--no-progress']);
  assert.equal(r.status, 0, r.stderr);
  const names = r.stdout.trim().split('\n').slice(2).map((l) => l.split(/\s+/)[0]);
  assert.deepEqual(names, QUICK);
});

test('kiln bench --startup: a warm second process loads the program from disk and compiles nothing in the pool', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-'));
  try {
    const file = path.join(dir, 'startup.json');
    const r = kiln(['bench', '--device', 'cpu', '--size', 'tiny', '--workload', 'transformer-block', '--reps', '1', '--warmup', '0', '--startup', '--startup-runs', '1', '--json', file]);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.match(lines[0]!, /max \|diff\|\s+cold start s\s+warm start s$/);
    assert.match(lines[2]!, /^transformer-block\s.*\s\d+\.\d{3}\s+\d+\.\d{3}$/);
    const report = JSON.parse(fs.readFileSync(file, 'utf8')) as { meta: Json; results: Json[]; details: Json[] };
    const row = report.results[0]!;
    assert.ok(typeof row.cold_start_s === 'number' && row.cold_start_s > 0);
    assert.ok(typeof row.warm_start_s === 'number' && row.warm_start_s > 0);
    type Sample = { counters: Json; pool: Json; output: Json };
    const { cold, warm } = report.details[0]!.startup as { cold: Sample; warm: Sample };
    assert.deepEqual([cold.counters.diskHits, cold.counters.diskMisses], [0, 1], 'cold: built and stored');
    assert.ok((cold.pool.tasks as number) > 0, 'cold: kernels validated in the pool');
    assert.deepEqual([warm.counters.diskHits, warm.counters.diskMisses], [1, 0], 'warm: loaded from disk');
    assert.equal(warm.pool.tasks, 0, 'warm: no pool compilation');
    assert.equal(warm.pool.workers, 0, 'warm: no worker started');
    assert.equal(warm.output.sum, cold.output.sum, 'the loaded program computes the same output');
    assert.equal(warm.output.abs_sum, cold.output.abs_sum);
    // The eager checksum of the same workload in the parent: the child's compiled output agrees.
    const eagerSum = report.details[0]!.checksum_sum as number;
    assert.ok(Math.abs((warm.output.sum as number) - eagerSum) <= 1e-4 * Math.max(1, (report.details[0]!.checksum_abs_sum as number)));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('kiln bench --compile-report: pool at its default size vs one worker vs in-process, in the JSON meta', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-'));
  try {
    const file = path.join(dir, 'report.json');
    const r = kiln(['bench', '--device', 'cpu', '--size', 'tiny', '--workload', 'mlp-64x512', '--reps', '1', '--warmup', '0', '--compile-report', '--startup-runs', '1', '--no-progress', '--json', file]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /cold compile of transformer-block/);
    const rows = (JSON.parse(fs.readFileSync(file, 'utf8')) as { meta: { compile_report: Json[] } }).meta.compile_report;
    assert.deepEqual(rows.map((x) => x.workers_setting), ['default', '1', '0']);
    assert.equal(rows[1]!.pool_size, 1);
    assert.equal(rows[2]!.pool_size, 0);
    assert.ok((rows[0]!.pool_size as number) >= 1);
    for (const x of rows) {
      assert.equal(x.workload, 'transformer-block');
      assert.ok(typeof x.compile_s === 'number' && x.compile_s > 0);
      assert.equal(x.kernels_compiled, 1, 'one program built per run');
    }
    assert.ok((rows[0]!.pool_tasks as number) > 0 && (rows[1]!.pool_tasks as number) > 0, 'with workers, kernels were validated in the pool (cold)');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
