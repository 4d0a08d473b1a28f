/**
 * The benchmark harness: every workload runs at the tiny size through benchWorkload (float32 and
 * bfloat16) with finite outputs of the expected shape and flat memory; elementwise and MLP match
 * naive float64 references; the transformer block is causal; option parsing and the table.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { benchWorkload, median, summarize } from '../src/bench/harness.js';
import { roundsSettled, warmUntilSteady } from '../src/bench/steady.js';
import { type BuiltWorkload, Mlp, TransformerBlock, WORKLOADS, WORKLOAD_NAMES, getWorkload } from '../src/bench/workloads.js';
import { QUICK_WORKLOADS, formatTable, parseBenchArgs } from '../src/cli/bench.js';
import { Generator } from '../src/tensor/random.js';
import { assertThrowsWith } from './helpers/assert.js';

const ROW_KEYS = ['framework', 'workload', 'device', 'dtype', 'size', 'eager_ms', 'compiled_ms', 'speedup', 'compile_s', 'max_abs_diff'];

function withBuilt<T>(name: string, fn: (w: BuiltWorkload) => T, dtype: kiln.DType = 'float32', seed = 0): T {
  const w = getWorkload(name).build({ size: 'tiny', dtype, seed });
  try {
    return fn(w);
  } finally {
    w.dispose();
  }
}

test('the workload list is the guide\'s, in order', () => {
  assert.deepEqual(WORKLOAD_NAMES, ['elementwise-4096', 'elementwise-1024', 'mlp-2048x4096', 'mlp-64x512', 'transformer-block', 'conv-stack', 'qwen3-0.6b-forward']);
  for (const w of WORKLOADS) assert.equal(w.slowOnCpu, w.name === 'qwen3-0.6b-forward', w.name);
});

for (const dtype of ['float32', 'bfloat16'] as const) {
  test(`every workload runs at the tiny size through the harness (${dtype})`, () => {
    for (const spec of WORKLOADS) {
      withBuilt(
        spec.name,
        (w) => {
          let calls = 0;
          const r = benchWorkload(w, { reps: 3, warmup: 1, onProgress: () => calls++ });
          assert.equal(calls, 4, `${spec.name}: progress calls`);
          assert.deepEqual(Object.keys(r.row), ROW_KEYS, spec.name);
          assert.equal(r.row.framework, 'kiln');
          assert.equal(r.row.workload, spec.name);
          assert.equal(r.row.device, 'cpu');
          assert.equal(r.row.dtype, dtype);
          assert.equal(r.row.size, 'tiny');
          assert.ok(r.row.eager_ms > 0 && Number.isFinite(r.row.eager_ms), `${spec.name}: eager_ms ${r.row.eager_ms}`);
          assert.equal(r.row.eager_ms, median(r.timesMs));
          // The compiled forward runs side by side: positive timings and eager parity (bfloat16: eager
          // rounds every intermediate to bf16, the fused kernel keeps float32, so up to ~1 bf16 ulp).
          for (const k of ['compiled_ms', 'speedup', 'compile_s'] as const) assert.ok((r.row[k] ?? -1) > 0, `${spec.name}.${k} = ${r.row[k]}`);
          assert.ok((r.row.max_abs_diff ?? Infinity) <= (dtype === 'float32' ? 1e-4 : 0.1), `${spec.name}: max |compiled - eager| ${r.row.max_abs_diff}`);
          assert.equal(r.timesMs.length, 3);
          assert.deepEqual(r.checksum.shape, [...w.outputShape], `${spec.name}: output shape`);
          assert.ok(r.checksum.finite, `${spec.name}: output not finite`);
          assert.ok(r.checksum.absSum > 0, `${spec.name}: output is all zeros`);
          // Every rep runs in a scope: nothing accumulates between the warm-up and the last rep.
          assert.equal(r.allocatedBytes.afterReps, r.allocatedBytes.afterWarmup, `${spec.name}: memory grew`);
          // The eager output itself.
          const y = w.run();
          assert.equal(y.dtype, dtype, `${spec.name}: output dtype`);
          assert.deepEqual([...y.shape], [...w.outputShape]);
          assert.ok(y.toFlatArray().every(Number.isFinite));
          y.dispose();
        },
        dtype,
      );
    }
  });
}

test('builds are deterministic in the seed and the same across dtypes', () => {
  const sum = (seed: number, dtype: kiln.DType = 'float32'): number => withBuilt('mlp-64x512', (w) => kiln.scope(() => summarize(w.run()).sum), dtype, seed);
  assert.equal(sum(3), sum(3));
  assert.notEqual(sum(3), sum(4));
  const a = sum(5);
  const b = sum(5, 'bfloat16');
  assert.ok(Math.abs(a - b) <= 0.05 * Math.abs(a) + 0.5, `float32 ${a} vs bfloat16 ${b}`);
});

test('build keeps only the workload\'s tensors and dispose releases them', () => {
  const allocated = (): number => kiln.memoryStats('cpu').allocatedBytes;
  for (const spec of WORKLOADS) {
    const before = allocated();
    const w = spec.build({ size: 'tiny' });
    let own = 0;
    const seen = new Set<kiln.Tensor>();
    const count = (t: kiln.Tensor): void => {
      if (!seen.has(t)) own += t.numel() * t.elementSize();
      seen.add(t);
    };
    w.inputs.forEach(count);
    for (const [, t] of Object.entries(w.module?.stateDict() ?? {})) count(t);
    // The initialisers' temporaries are gone (the garbage collector may also free older ones).
    assert.ok(allocated() - before <= own, `${spec.name}: ${allocated() - before} bytes held after build, ${own} owned`);
    // The forward's temporaries and output die with the scope.
    kiln.scope(() => assert.ok(Number.isFinite(w.run().toFlatArray()[0]!)));
    w.dispose();
    assert.ok(allocated() <= before, `${spec.name}: ${allocated() - before} bytes left after dispose`);
    assert.ok(w.inputs.every((t) => t.isDisposed));
  }
});

test('harness rejects bad rep counts', () => {
  withBuilt('elementwise-1024', (w) => {
    assertThrowsWith(() => benchWorkload(w, { reps: 0 }), 'reps', '0');
    assertThrowsWith(() => benchWorkload(w, { warmup: -1 }), 'warmup', '-1');
  });
  assertThrowsWith(() => getWorkload('mlp-9'), "'mlp-9'", 'elementwise-4096');
});

test('median', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.ok(Number.isNaN(median([])));
});

// ---------------------------------------------------------------------------------------------
// float64 references

/** erf to ~1e-15 (Taylor series for |x| < 3, continued fraction for the tail). */
function erf64(x: number): number {
  const ax = Math.abs(x);
  if (ax < 3) {
    let term = ax;
    let s = ax;
    for (let n = 1; n < 200; n++) {
      term *= (-ax * ax) / n;
      const add = term / (2 * n + 1);
      s += add;
      if (Math.abs(add) < 1e-17 * Math.abs(s)) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * s;
  }
  // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...))))
  let f = ax;
  for (let n = 60; n >= 1; n--) f = ax + n / 2 / f;
  const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}

test('erf64 reference sanity', () => {
  assert.ok(Math.abs(erf64(0.5) - 0.5204998778130465) < 1e-14);
  assert.ok(Math.abs(erf64(-1.5) + 0.9661051464753108) < 1e-14);
  assert.ok(Math.abs(erf64(3.5) - 0.9999992569016276) < 1e-14);
});

function elementwiseRef(x: number): number {
  let y = x * 1.5 + 0.5;
  y = Math.max(y, 0) * (1 / (1 + Math.exp(-x)));
  y = y + Math.tanh(x * 0.5);
  y = y - Math.exp(-x * x) * 0.1;
  return y * 2 - 1;
}

function assertNear(got: readonly number[], want: readonly number[], atol: number, rtol: number, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < got.length; i++) {
    const d = Math.abs(got[i]! - want[i]!);
    assert.ok(d <= atol + rtol * Math.abs(want[i]!), `${what}[${i}]: got ${got[i]} want ${want[i]} (|diff| ${d})`);
  }
}

for (const name of ['elementwise-4096', 'elementwise-1024']) {
  test(`${name} matches a float64 reference (tiny)`, () => {
    withBuilt(name, (w) => {
      const x = w.inputs[0]!;
      // Spread the inputs over the interesting range (relu's kink, exp(-x^2)'s bump, saturation).
      const xs = x.toFlatArray();
      assert.ok(xs.some((v) => v < -1) && xs.some((v) => v > 1), 'inputs cover both signs');
      const want = xs.map(elementwiseRef);
      assertNear(w.run().toFlatArray(), want, 1e-5, 1e-5, name);
    });
    withBuilt(
      name,
      (w) => {
        const want = w.inputs[0]!.toFlatArray().map(elementwiseRef);
        assertNear(w.run().toFlatArray(), want, 3e-2, 3e-2, `${name} bfloat16`);
      },
      'bfloat16',
    );
  });
}

/** y = x W^T + b, naive, float64. */
function linearRef(x: number[], rows: number, inF: number, w: number[], b: number[], outF: number): number[] {
  const y = new Array<number>(rows * outF);
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < outF; o++) {
      let s = b[o]!;
      for (let i = 0; i < inF; i++) s += x[r * inF + i]! * w[o * inF + i]!;
      y[r * outF + o] = s;
    }
  }
  return y;
}

for (const name of ['mlp-2048x4096', 'mlp-64x512']) {
  test(`${name} matches a float64 reference (tiny)`, () => {
    for (const dtype of ['float32', 'bfloat16'] as const) {
      withBuilt(
        name,
        (w) => {
          const m = w.module as Mlp;
          assert.ok(m instanceof Mlp);
          const x = w.inputs[0]!;
          const [rows, f] = x.shape as [number, number];
          const h = linearRef(x.toFlatArray(), rows, f, m.fc1.weight.toFlatArray(), m.fc1.bias!.toFlatArray(), f);
          // bfloat16 rounds the hidden activation between the layers, as eager does; float32 keeps it.
          const round = dtype === 'bfloat16' ? (v: number): number => kiln.tensor([v]).to('bfloat16').toFlatArray()[0]! : (v: number): number => v;
          const g = h.map((v) => round(0.5 * v * (1 + erf64(v / Math.SQRT2))));
          const want = linearRef(g, rows, f, m.fc2.weight.toFlatArray(), m.fc2.bias!.toFlatArray(), f);
          const tol = dtype === 'float32' ? 1e-5 : 3e-2;
          assertNear(w.run().toFlatArray(), want, tol, tol, `${name} ${dtype}`);
        },
        dtype,
      );
    }
  });
}

test('transformer-block is causal and pre-LN residual (tiny)', () => {
  withBuilt('transformer-block', (w) => {
    const block = w.module as TransformerBlock;
    assert.ok(block instanceof TransformerBlock);
    const x = w.inputs[0]!;
    const [B, T, C] = x.shape as [number, number, number];
    const y0 = w.run().toFlatArray();
    // Change the last token only: every earlier position's output must stay the same.
    const x2 = kiln.noGrad(() => {
      const t = x.clone();
      t.select(1, T - 1).copy_(kiln.randn([B, C], { generator: new Generator(9) }));
      return t;
    });
    const y1 = kiln.noGrad(() => block.forward(x2)).toFlatArray();
    let lastChanged = false;
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < T; t++) {
        for (let c = 0; c < C; c++) {
          const i = (b * T + t) * C + c;
          if (t < T - 1) assert.equal(y1[i], y0[i], `position ${t} changed`);
          else if (y1[i] !== y0[i]) lastChanged = true;
        }
      }
    }
    assert.ok(lastChanged, 'the changed token\'s output did not change');
  });
});

test('conv-stack takes channels_last input and ends in ReLU (tiny)', () => {
  withBuilt('conv-stack', (w) => {
    const x = w.inputs[0]!;
    assert.ok(x.isContiguous('channelsLast'), 'input is channels_last');
    const y = w.run().toFlatArray();
    assert.ok(y.every((v) => v >= 0));
    assert.ok(y.some((v) => v > 0));
  });
});

// ---------------------------------------------------------------------------------------------
// CLI options and table

test('bench options: defaults, slow workloads, errors', () => {
  const d = parseBenchArgs([]);
  assert.ok(d !== 'help');
  // The default device is the first usable GPU accelerator, else cpu (the size follows the device).
  const gpu = kiln.probeAccelerators().find((r) => r.available && r.type !== 'cpu');
  assert.equal(d.device, gpu ? `${gpu.type}:0` : 'cpu');
  assert.equal(d.size, gpu ? 'full' : 'cpu');
  assert.equal(d.dtype, 'float32');
  assert.deepEqual(d.skipped, []);
  assert.deepEqual(d.workloads.map((w) => w.name), QUICK_WORKLOADS, 'no --workload: the quick subset');
  assert.ok(QUICK_WORKLOADS.every((n) => WORKLOAD_NAMES.includes(n)));
  assert.deepEqual([d.startup, d.compileReport, d.startupRuns], [false, false, 3]);
  for (const all of [['--all'], ['--workload', 'all']]) {
    const a = parseBenchArgs([...all, '--device', 'cpu']); // slow workloads are skipped on cpu only
    assert.ok(a !== 'help');
    assert.deepEqual(a.workloads.map((w) => w.name), WORKLOAD_NAMES.slice(0, 6), `${all.join(' ')}: every workload but the slow one`);
    assert.deepEqual(a.skipped, ['qwen3-0.6b-forward']);
  }
  const flags = parseBenchArgs(['--startup', '--startup-runs', '5', '--compile-report']);
  assert.ok(flags !== 'help');
  assert.deepEqual([flags.startup, flags.compileReport, flags.startupRuns], [true, true, 5]);
  assertThrowsWith(() => parseBenchArgs(['--startup-runs', '0']), '--startup-runs', "'0'");
  const slow = parseBenchArgs(['--all', '--include-slow', '--size', 'full', '--reps', '4', '--warmup', '0']);
  assert.ok(slow !== 'help');
  assert.deepEqual(slow.workloads.map((w) => w.name), WORKLOAD_NAMES);
  assert.equal(slow.size, 'full');
  assert.equal(slow.reps, 4);
  assert.equal(slow.warmup, 0);
  const picked = parseBenchArgs(['--workload', 'mlp-64x512,conv-stack', '--workload', 'qwen3-0.6b-forward', '--dtype', 'bfloat16']);
  assert.ok(picked !== 'help');
  assert.deepEqual(picked.workloads.map((w) => w.name), ['mlp-64x512', 'conv-stack', 'qwen3-0.6b-forward']);
  assert.equal(picked.dtype, 'bfloat16');
  const tiny = parseBenchArgs(['--size', 'tiny', '--all']);
  assert.ok(tiny !== 'help');
  assert.equal(tiny.workloads.length, WORKLOADS.length, 'tiny runs the slow workload too');
  assert.equal(parseBenchArgs(['--help']), 'help');
  assertThrowsWith(() => parseBenchArgs(['--size', 'huge']), '--size', "'huge'");
  assertThrowsWith(() => parseBenchArgs(['--dtype', 'float64']), '--dtype', "'float64'");
  assertThrowsWith(() => parseBenchArgs(['--reps', '0']), '--reps', "'0'");
  assertThrowsWith(() => parseBenchArgs(['--workload', 'nope']), "'nope'");
  assertThrowsWith(() => parseBenchArgs(['mlp-64x512']), "'mlp-64x512'");
});

test('table: one line per row, dashes for nulls', () => {
  const row = { framework: 'kiln' as const, workload: 'mlp-64x512', device: 'cpu', dtype: 'float32' as const, size: 'cpu' as const, eager_ms: 1.23456, compiled_ms: null, speedup: null, compile_s: null, max_abs_diff: null };
  const lines = formatTable([row, { ...row, workload: 'conv-stack', compiled_ms: 0.5, speedup: 2.469, compile_s: 1.5, max_abs_diff: 1.5e-6 }]).split('\n');
  assert.equal(lines.length, 4);
  assert.match(lines[0]!, /workload\s+device\s+dtype\s+eager ms\s+compiled ms\s+speedup\s+compile s\s+max \|diff\|/);
  assert.match(lines[2]!, /^mlp-64x512\s+cpu\s+float32\s+1\.235\s+-\s+-\s+-\s+-$/);
  assert.match(lines[3]!, /^conv-stack\s+cpu\s+float32\s+1\.235\s+0\.500\s+2\.47x\s+1\.50\s+1\.50e-6$/);
  const withStartup = formatTable([{ ...row, cold_start_s: 0.81234, warm_start_s: 0.3 }, row]).split('\n');
  assert.match(withStartup[0]!, /max \|diff\|\s+cold start s\s+warm start s$/);
  assert.match(withStartup[2]!, /\s+0\.812\s+0\.300$/);
  assert.match(withStartup[3]!, /-\s+-\s+-$/, 'a row without start times shows dashes');
});

test('the steady warm-up stops once the last 300 ms of rounds are no faster than the rounds before', () => {
  const at = (ms: number[], step = 20) => ms.map((m, i) => ({ ms: m, at: (i + 1) * step }));
  // A clock climbing slowly: each 20 ms round 1.5% faster than the last, never settled.
  const climbing = at(Array.from({ length: 60 }, (_, i) => 10 * 0.985 ** i));
  assert.equal(roundsSettled(climbing, 300, 0.02), false);
  // The same climb, then 40 rounds (800 ms) flat within 1%: settled.
  const flat = [...climbing.map((r) => r.ms), ...Array.from({ length: 40 }, (_, i) => 10 * 0.985 ** 59 * (1 + 0.01 * (i % 2)))];
  assert.equal(roundsSettled(at(flat), 300, 0.02), true);
  // Flat, but too short to have rounds on both sides of the window.
  assert.equal(roundsSettled(at([4, 4, 4, 4]), 300, 0.02), false);
  // A recent round 5% faster than all before: still climbing.
  assert.equal(roundsSettled(at([...Array(30).fill(4), 3.8]), 300, 0.02), false);
  assert.equal(roundsSettled(at([...Array(30).fill(4), 3.8]), 300, 0.06), true);
});

test('the steady warm-up runs every function each round and stops at its time limit', () => {
  const calls = [0, 0];
  const r = warmUntilSteady('cpu', [() => void calls[0]!++, () => void calls[1]!++], { minMs: 0, maxMs: 0 });
  assert.equal(r.rounds, 1);
  assert.equal(r.settled, false);
  assert.deepEqual(calls, [1, 1]);
  assert.ok(Number.isFinite(r.firstMs) && r.firstMs === r.lastMs);
});
