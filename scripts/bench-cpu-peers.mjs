/**
 * Runs inside the temporary peers directory (scripts/bench-cpu-peers.sh copies it there, so bare
 * imports resolve to the peers' node_modules; Kiln comes from $KILN_DIST). Workloads, float32:
 *   matmul-1024:      [1024, 1024] @ [1024, 1024]
 *   elementwise-1024: the guide's chain on x [1024, 1024] (y = x*1.5+0.5; y = relu(y)*sigmoid(x);
 *                     y = y + tanh(x*0.5); y = y - exp(-x*x)*0.1; return y*2-1)
 * Engines: Kiln native path (eager matmul, compiled elementwise), Kiln wasm path, onnxruntime-node
 * (CPU EP, intra-op threads = --threads, ONNX models encoded here), tfjs on its wasm backend, and
 * jax-js (wasm device; jit for elementwise). Threads: --threads for Kiln (both paths), onnxruntime
 * and jax-js (its Web Workers through ./web-worker-shim.mjs: without it jax-js runs single threaded
 * under Node); tfjs-wasm runs 1 (its threaded build needs a cross-origin-isolated browser). Each
 * engine's count is in the JSON ("threads" per engine; jax-js's workers started are counted). All variants run interleaved, rep by rep, so machine
 * load hits them alike, with an idle gap before each call (--gap-ms, default 10: onnxruntime's
 * workers spin for a few milliseconds after a run and would share the cores with whatever runs
 * next, see bench-cpu-ort-models.mjs); each reports the median wall time, and the max |difference| from Kiln's
 * float64-checked eager result (native path) so a fast wrong answer shows. An engine that fails to
 * load or run is recorded with its error instead of stopping the run.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { ShimWorker, installWebWorkers } from './web-worker-shim.mjs';

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : dflt;
};
const REPS = Number(opt('reps', '15'));
const THREADS = Number(opt('threads', String(os.availableParallelism())));
const OUT = opt('out', '');
const GAP_MS = Number(opt('gap-ms', '10'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const N = 1024;
const dist = process.env.KILN_DIST;
if (!dist) throw new Error('KILN_DIST must point at Kiln\'s dist directory (scripts/bench-cpu-peers.sh sets it)');
const kiln = await import(path.join(dist, 'src/index.js'));
const native = await import(path.join(dist, 'src/kernels/cpu/native/index.js'));
const require = createRequire(path.join(process.cwd(), 'package.json'));

function randomArray(n, seed) {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 4294967296 - 0.5) * 4;
  }
  return out;
}
const A = randomArray(N * N, 1);
const B = randomArray(N * N, 2).map((v) => v / 4);

// ---- minimal ONNX protobuf encoder (ModelProto with one graph) ----
function varint(n) {
  const out = [];
  let v = BigInt(n);
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return out;
}
const key = (field, wire) => varint((field << 3) | wire);
const bytesField = (field, bytes) => [...key(field, 2), ...varint(bytes.length), ...bytes];
const strField = (field, s) => bytesField(field, [...Buffer.from(s, 'utf8')]);
const intField = (field, n) => [...key(field, 0), ...varint(n)];
function valueInfo(name, shape) {
  const dims = shape.flatMap((d) => bytesField(1, intField(1, d)));
  const tensorType = [...intField(1, 1), ...bytesField(2, dims)];
  return [...strField(1, name), ...bytesField(2, bytesField(1, tensorType))];
}
function scalar(name, v) {
  const f = Buffer.alloc(4);
  f.writeFloatLE(v);
  return [...intField(2, 1), ...bytesField(4, [...f]), ...strField(8, name)];
}
function node(op, inputs, outputs) {
  return [...inputs.flatMap((i) => strField(1, i)), ...outputs.flatMap((o) => strField(2, o)), ...strField(4, op)];
}
function model(nodes, inputs, output, consts) {
  const graph = [
    ...nodes.flatMap((n) => bytesField(1, n)),
    ...strField(2, 'g'),
    ...Object.entries(consts).flatMap(([k, v]) => bytesField(5, scalar(k, v))),
    ...inputs.flatMap((i) => bytesField(11, valueInfo(i, [N, N]))),
    ...bytesField(12, valueInfo(output, [N, N])),
  ];
  return Uint8Array.from([...intField(1, 8), ...strField(2, 'kiln-peers'), ...bytesField(7, graph), ...bytesField(8, [...strField(1, ''), ...intField(2, 17)])]);
}
const matmulModel = model([node('MatMul', ['a', 'b'], ['c'])], ['a', 'b'], 'c', {});
const ewModel = model(
  [
    node('Mul', ['x', 'k1_5'], ['t0']), node('Add', ['t0', 'k0_5'], ['t1']), node('Relu', ['t1'], ['t2']), node('Sigmoid', ['x'], ['t3']),
    node('Mul', ['t2', 't3'], ['t4']), node('Mul', ['x', 'k0_5'], ['t5']), node('Tanh', ['t5'], ['t6']), node('Add', ['t4', 't6'], ['t7']),
    node('Mul', ['x', 'x'], ['t8']), node('Neg', ['t8'], ['t9']), node('Exp', ['t9'], ['t10']), node('Mul', ['t10', 'k0_1'], ['t11']),
    node('Sub', ['t7', 't11'], ['t12']), node('Mul', ['t12', 'k2'], ['t13']), node('Sub', ['t13', 'k1'], ['y']),
  ],
  ['x'], 'y', { k1_5: 1.5, k0_5: 0.5, k0_1: 0.1, k2: 2, k1: 1 },
);

// ---- engines: each returns { matmul: () => Float32Array, elementwise: () => Float32Array } ----
const elementwiseKiln = (x) => {
  let y = kiln.add(kiln.mul(x, 1.5), 0.5);
  y = kiln.mul(kiln.relu(y), kiln.sigmoid(x));
  y = kiln.add(y, kiln.tanh(kiln.mul(x, 0.5)));
  y = kiln.sub(y, kiln.mul(kiln.exp(kiln.neg(kiln.mul(x, x))), 0.1));
  return kiln.sub(kiln.mul(y, 2), 1);
};
function kilnEngine(cpuPath) {
  const ta = kiln.tensor(Array.from(A), { dtype: 'float32' }).reshape([N, N]);
  const tb = kiln.tensor(Array.from(B), { dtype: 'float32' }).reshape([N, N]);
  native.setCpuPath(cpuPath);
  const ew = kiln.compile(elementwiseKiln);
  native.setCpuPath(undefined);
  // The values are read out only for the result check (timed runs leave them in the tensor, as the
  // peers' outputs stay in their typed arrays).
  const on = (fn) => (check) => {
    native.setCpuPath(cpuPath);
    try {
      const t = fn();
      const v = check ? Float32Array.from(t.toFlatArray()) : null;
      t.dispose();
      return v;
    } finally {
      native.setCpuPath(undefined);
    }
  };
  native.setNativeThreads(THREADS);
  return { matmul: on(() => kiln.matmul(ta, tb)), elementwise: on(() => ew(ta)) };
}
async function ortEngine() {
  const ort = require('onnxruntime-node');
  const opts = { executionProviders: ['cpu'], intraOpNumThreads: THREADS, interOpNumThreads: 1, graphOptimizationLevel: 'all' };
  const mm = await ort.InferenceSession.create(matmulModel, opts);
  const ew = await ort.InferenceSession.create(ewModel, opts);
  const a = new ort.Tensor('float32', A, [N, N]);
  const b = new ort.Tensor('float32', B, [N, N]);
  return {
    version: require('onnxruntime-node/package.json').version,
    matmul: async () => (await mm.run({ a, b })).c.data,
    elementwise: async () => (await ew.run({ x: a })).y.data,
  };
}
async function tfjsWasmEngine() {
  const tf = require('@tensorflow/tfjs');
  const wasm = require('@tensorflow/tfjs-backend-wasm');
  wasm.setWasmPaths(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm')) + path.sep);
  await tf.setBackend('wasm');
  await tf.ready();
  const a = tf.tensor2d(A, [N, N]);
  const b = tf.tensor2d(B, [N, N]);
  const ew = (x) => tf.tidy(() => {
    let y = x.mul(1.5).add(0.5);
    y = tf.relu(y).mul(tf.sigmoid(x));
    y = y.add(tf.tanh(x.mul(0.5)));
    y = y.sub(tf.exp(tf.neg(x.mul(x))).mul(0.1));
    return y.mul(2).sub(1);
  });
  const grab = (t) => {
    const v = t.dataSync();
    t.dispose();
    return v;
  };
  return { version: tf.version.tfjs, matmul: () => grab(tf.matMul(a, b)), elementwise: () => grab(ew(a)) };
}
async function jaxEngine() {
  // jax-js probes navigator.gpu for WebGPU (Node 20 has no navigator; its Wasm device needs none)
  // and sizes its Wasm worker pool from navigator.hardwareConcurrency.
  installWebWorkers(THREADS);
  const jax = await import('@jax-js/jax');
  const { numpy: np, jit, init, defaultDevice } = jax;
  const devices = await init();
  if (devices.includes?.('wasm')) defaultDevice('wasm');
  const a = np.array(A).reshape([N, N]);
  const b = np.array(B).reshape([N, N]);
  const ew = jit((x) => {
    let y = x.ref.mul(1.5).add(0.5);
    y = np.maximum(y, 0).mul(np.reciprocal(np.exp(x.ref.mul(-1)).add(1)));
    y = y.add(np.tanh(x.ref.mul(0.5)));
    y = y.sub(np.exp(x.ref.mul(x.ref).mul(-1)).mul(0.1));
    x.dispose();
    return y.mul(2).sub(1);
  });
  const grab = async (t) => Float32Array.from(await t.data());
  return {
    version: JSON.parse(fs.readFileSync(path.join(process.cwd(), 'node_modules/@jax-js/jax/package.json'), 'utf8')).version,
    device: devices,
    matmul: () => grab(np.matmul(a.ref, b.ref)),
    elementwise: () => grab(ew(a.ref)),
  };
}

const engines = [];
const errors = {};
async function add(name, make) {
  try {
    engines.push({ name, ...(await make()) });
  } catch (e) {
    errors[name] = String(e?.stack ?? e).split('\n').slice(0, 3).join(' | ');
    console.log(`${name}: unavailable: ${errors[name]}`);
  }
}
await add('kiln native', async () => kilnEngine('native'));
await add('kiln wasm', async () => kilnEngine('wasm'));
await add('onnxruntime-node', ortEngine);
await add('tfjs-wasm', tfjsWasmEngine);
await add('jax-js', jaxEngine);
// The threads each engine runs with (tfjs-wasm: its single-threaded build, the only one Node loads).
const ENGINE_THREADS = { 'kiln native': THREADS, 'kiln wasm': THREADS, 'onnxruntime-node': THREADS, 'tfjs-wasm': 1, 'jax-js': THREADS };

const workloads = [
  { name: 'matmul-1024', key: 'matmul', flops: 2 * N ** 3 },
  { name: 'elementwise-1024', key: 'elementwise', flops: 0 },
];
const reference = {};
const results = [];
const load0 = os.loadavg();
for (const w of workloads) {
  const vs = engines.map((e) => ({ engine: e.name, run: e[w.key], times: [], error: null, maxAbsDiff: null }));
  for (const v of vs) {
    try {
      const out = await v.run(true); // warm-up (and the result check)
      reference[w.name] ??= out;
      let d = 0;
      for (let i = 0; i < out.length; i++) d = Math.max(d, Math.abs(out[i] - reference[w.name][i]));
      v.maxAbsDiff = out.length === reference[w.name].length ? d : `length ${out.length}`;
    } catch (e) {
      v.error = String(e?.message ?? e);
    }
  }
  for (let r = 0; r < REPS; r++) {
    for (const v of vs) {
      if (v.error) continue;
      if (GAP_MS > 0) await sleep(GAP_MS);
      const t0 = performance.now();
      await v.run(false);
      v.times.push(performance.now() - t0);
    }
  }
  for (const v of vs) {
    const sorted = [...v.times].sort((p, q) => p - q);
    const ms = sorted.length ? sorted[Math.floor(sorted.length / 2)] : null;
    const row = { workload: w.name, engine: v.engine, threads: ENGINE_THREADS[v.engine] ?? null, medianMs: ms, minMs: sorted[0] ?? null, gflops: ms && w.flops ? w.flops / (ms * 1e6) : null, maxAbsDiffVsKilnNative: v.maxAbsDiff, error: v.error };
    results.push(row);
    console.log(`${w.name.padEnd(18)} ${v.engine.padEnd(18)} ${v.error ? `error: ${v.error}` : `${ms.toFixed(2).padStart(8)} ms${row.gflops ? `  ${row.gflops.toFixed(1).padStart(6)} GFLOP/s` : ''}  max|diff| ${Number(v.maxAbsDiff).toExponential(2)}`}`);
  }
}
const load1 = os.loadavg();
console.log(`threads ${THREADS}; gap ${GAP_MS} ms; load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')}`);
if (OUT) {
  const versions = Object.fromEntries(engines.filter((e) => e.version).map((e) => [e.name, e.version]));
  fs.writeFileSync(OUT, `${JSON.stringify({ date: new Date().toISOString(), reps: REPS, threads: THREADS, gapMs: GAP_MS, cpu: os.cpus()[0]?.model, cpus: os.availableParallelism(), loadavgBefore: load0, loadavgAfter: load1, engineThreads: ENGINE_THREADS, jaxWebWorkersStarted: ShimWorker.started, kilnCpuPath: native.cpuPathInfo(), versions, errors, results }, null, 2)}\n`);
  console.log(`wrote ${OUT}`);
}
process.exit(0);
