/**
 * The Wasm cpu path against the TypeScript/Wasm peers on every benchmark workload, side by side in
 * one run (scripts/bench-wasm-peers.sh copies this file into the peers' directory, so bare imports
 * resolve there; Kiln comes from $KILN_DIST). float32, the guide's cpu sizes:
 *   matmul-1024, elementwise-1024 / -4096, mlp-64x512, mlp-2048x4096 (x [256, 1024]),
 *   transformer-block (x [1, 128, 512], 8 heads, MLP 2048), conv-stack (x [2, 3, 64, 64]).
 * Engines:
 *   - Kiln with KILN_CPU_PATH forced to wasm, eager and kiln.compile'd, --threads threads;
 *   - TensorFlow.js on its wasm backend (XNNPACK; 1 thread: its threaded build needs a
 *     cross-origin-isolated browser);
 *   - jax-js on its wasm device, jit, with --threads Web Workers: Node 20 has no Web Worker global,
 *     so without the small worker_threads shim (web-worker-shim.mjs) jax-js silently runs single threaded.
 * Every engine gets the same weights and inputs (Kiln's seeded workload builders, exported as
 * Float32Arrays). Variants run interleaved rep by rep so machine load hits them alike; each
 * reports its median and min wall time and max |difference| from Kiln's first row (eager; a fast
 * wrong answer shows). The 1-minute load average is printed before and after.
 *
 *   node bench-wasm-peers.mjs [--reps 11] [--threads 2] [--only a,b] [--eager-all] [--out file.json]
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
const REPS = Number(opt('reps', '11'));
const THREADS = Number(opt('threads', '2'));
const ONLY = opt('only', '');
const OUT = opt('out', '');
const dist = process.env.KILN_DIST;
if (!dist) throw new Error("KILN_DIST must point at Kiln's dist directory (scripts/bench-wasm-peers.sh sets it)");
const kiln = await import(path.join(dist, 'src/index.js'));
const native = await import(path.join(dist, 'src/kernels/cpu/native/index.js'));
const wasmRun = await import(path.join(dist, 'src/kernels/cpu/wasm-sgemm-run.js'));
const { getWorkload } = await import(path.join(dist, 'src/bench/workloads.js'));
const require = createRequire(path.join(process.cwd(), 'package.json'));

native.setCpuPath('wasm');
native.setNativeThreads(THREADS);
await wasmRun.warmWasmThreads(THREADS);

// jax-js's Web Workers: ./web-worker-shim.mjs (copied beside this file by bench-wasm-peers.sh).

const f32 = (t) => Float32Array.from(t.toFlatArray());

// ---- workloads: Kiln builds them (weights + inputs); peers get the same arrays ----
function randomArray(n, seed, scale) {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 4294967296 - 0.5) * scale;
  }
  return out;
}

function workload(name) {
  if (name === 'matmul-1024') {
    const N = 1024;
    const a = kiln.tensor(Array.from(randomArray(N * N, 1, 4)), { dtype: 'float32' }).reshape([N, N]);
    const b = kiln.tensor(Array.from(randomArray(N * N, 2, 1)), { dtype: 'float32' }).reshape([N, N]);
    return { name, flops: 2 * N ** 3, inputs: [a, b], forward: (x, y) => kiln.matmul(x, y), params: {} };
  }
  const w = getWorkload(name).build({ size: 'cpu', seed: 0 });
  const m = w.module;
  const params = {};
  if (m) for (const [k, v] of m.namedParameters()) params[k] = { data: f32(v), shape: [...v.shape] };
  if (m) for (const [k, v] of m.namedBuffers()) params[k] = { data: f32(v), shape: [...v.shape] };
  return { name, flops: 0, inputs: w.inputs, forward: w.forward, params, module: m };
}

function kilnEngines(wl) {
  const ins = wl.inputs;
  const eager = () => kiln.noGrad(() => wl.forward(...ins));
  const compiled = kiln.compile((...xs) => wl.forward(...xs));
  const grab = (fn) => (check) => {
    const t = kiln.noGrad(() => fn());
    const v = check ? f32(t) : null;
    t.dispose();
    return v;
  };
  // Eager pointwise on the wasm path is the JS kernels (~1 s for elementwise-1024's chain under
  // load, 16x that at 4096): the eager row is left out there unless --eager-all.
  const withEager = wl.name !== 'elementwise-4096' || argv.includes('--eager-all');
  return [
    ...(withEager ? [{ name: 'kiln wasm eager', run: grab(eager) }] : []),
    { name: 'kiln wasm compiled', run: grab(() => compiled(...ins)) },
  ];
}

// ---- TensorFlow.js (wasm backend) ----
let tf;
async function tfjsInit() {
  tf = require('@tensorflow/tfjs');
  const wasm = require('@tensorflow/tfjs-backend-wasm');
  wasm.setWasmPaths(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm')) + path.sep);
  await tf.setBackend('wasm');
  await tf.ready();
  return tf.version.tfjs;
}

function tfjsEngine(wl) {
  const P = Object.fromEntries(Object.entries(wl.params).map(([k, v]) => [k, tf.tensor(v.data, v.shape)]));
  // Linear weights pre-transposed to [in, out] outside the timed region: tfjs-wasm's matMul with
  // transposeB = true measured 470 ms for [256, 1024] x [1024, 1024]^T against 24 ms pre-transposed.
  for (const k of Object.keys(P)) if (k.endsWith('.weight') && wl.params[k].shape.length === 2) P[`${k}T`] = tf.transpose(P[k]);
  const x0 = f32(wl.inputs[0]);
  const shape0 = [...wl.inputs[0].shape];
  const gelu = (h) => h.mul(0.5).mul(tf.erf(h.mul(Math.SQRT1_2)).add(1));
  const linear = (x, pre) => tf.matMul(x, P[`${pre}.weightT`]).add(P[`${pre}.bias`]);
  const mlp = (x, pre) => linear(gelu(linear(x, `${pre}fc1`)), `${pre}fc2`);
  const ln = (x, pre) => {
    const { mean, variance } = tf.moments(x, -1, true);
    return x.sub(mean).div(variance.add(1e-5).sqrt()).mul(P[`${pre}.weight`]).add(P[`${pre}.bias`]);
  };
  let fn;
  let inputs;
  if (wl.name === 'matmul-1024') {
    inputs = [tf.tensor(x0, shape0), tf.tensor(f32(wl.inputs[1]), [...wl.inputs[1].shape])];
    fn = (a, b) => tf.matMul(a, b);
  } else if (wl.name.startsWith('elementwise')) {
    inputs = [tf.tensor(x0, shape0)];
    fn = (x) => {
      let y = x.mul(1.5).add(0.5);
      y = tf.relu(y).mul(tf.sigmoid(x));
      y = y.add(tf.tanh(x.mul(0.5)));
      y = y.sub(tf.exp(tf.neg(x.mul(x))).mul(0.1));
      return y.mul(2).sub(1);
    };
  } else if (wl.name.startsWith('mlp')) {
    inputs = [tf.tensor(x0, shape0)];
    fn = (x) => mlp(x, '');
  } else if (wl.name === 'transformer-block') {
    const [B, T, C] = shape0;
    const H = wl.module.heads;
    const D = C / H;
    const mask = tf.tensor(Float32Array.from({ length: T * T }, (_, i) => (i % T > Math.floor(i / T) ? -Infinity : 0)), [T, T]);
    inputs = [tf.tensor(x0, shape0)];
    fn = (x) => {
      const qkv = tf.transpose(tf.reshape(linear(ln(x, 'ln1'), 'qkv'), [B, T, 3, H, D]), [2, 0, 3, 1, 4]);
      const [q, k, v] = tf.unstack(qkv, 0);
      // k transposed explicitly (see the weights above: matMul's transposeB path is slow)
      const att = tf.softmax(tf.matMul(q, tf.transpose(k, [0, 1, 3, 2])).mul(1 / Math.sqrt(D)).add(mask));
      const o = tf.reshape(tf.transpose(tf.matMul(att, v), [0, 2, 1, 3]), [B, T, C]);
      const h = x.add(linear(o, 'proj'));
      return h.add(mlp(ln(h, 'ln2'), 'mlp.'));
    };
  } else if (wl.name === 'conv-stack') {
    // NHWC input (channels_last), HWIO filters.
    const [N, Cin, Hh, Ww] = shape0;
    const nhwc = new Float32Array(x0.length);
    for (let n = 0; n < N; n++) for (let c = 0; c < Cin; c++) for (let h = 0; h < Hh; h++) for (let w = 0; w < Ww; w++) nhwc[((n * Hh + h) * Ww + w) * Cin + c] = x0[((n * Cin + c) * Hh + h) * Ww + w];
    inputs = [tf.tensor(nhwc, [N, Hh, Ww, Cin])];
    const hwio = (pre) => tf.transpose(P[`${pre}.weight`], [2, 3, 1, 0]);
    const W1 = hwio('conv1');
    const W2 = hwio('conv2');
    const block = (x, W, pre, bn, stride, pad) => {
      const y = tf.conv2d(x, W, stride, [[0, 0], [pad, pad], [pad, pad], [0, 0]]).add(P[`${pre}.bias`]);
      return tf.relu(tf.batchNorm(y, P[`${bn}.runningMean`], P[`${bn}.runningVar`], P[`${bn}.bias`], P[`${bn}.weight`], 1e-5));
    };
    fn = (x) => block(block(x, W1, 'conv1', 'bn1', 2, 3), W2, 'conv2', 'bn2', 1, 1);
  } else throw new Error(`tfjs: no ${wl.name}`);
  return {
    name: 'tfjs-wasm',
    run: (check) => {
      const t = tf.tidy(() => fn(...inputs));
      let v = t.dataSync();
      if (check && wl.name === 'conv-stack') v = nhwcToNchw(v, t.shape);
      t.dispose();
      return check ? Float32Array.from(v) : null;
    },
  };
}

function nhwcToNchw(v, [N, H, W, C]) {
  const out = new Float32Array(v.length);
  for (let n = 0; n < N; n++) for (let h = 0; h < H; h++) for (let w = 0; w < W; w++) for (let c = 0; c < C; c++) out[((n * C + c) * H + h) * W + w] = v[((n * H + h) * W + w) * C + c];
  return out;
}

// ---- jax-js (wasm device, jit) ----
let jax;
async function jaxInit() {
  installWebWorkers(THREADS);
  jax = await import('@jax-js/jax');
  const devices = await jax.init();
  if (devices.includes?.('wasm')) jax.defaultDevice('wasm');
  return JSON.parse(fs.readFileSync(path.join(process.cwd(), 'node_modules/@jax-js/jax/package.json'), 'utf8')).version;
}

function jaxEngine(wl) {
  const { numpy: np, nn, lax, jit } = jax;
  const P = Object.fromEntries(Object.entries(wl.params).map(([k, v]) => [k, np.array(v.data).reshape(v.shape)]));
  // Linear weights pre-transposed to [in, out] (outside the timed region, as a user would store them).
  for (const k of Object.keys(P)) if (k.endsWith('.weight') && wl.params[k].shape.length === 2) P[`${k}T`] = np.array(transpose2(wl.params[k].data, wl.params[k].shape)).reshape([wl.params[k].shape[1], wl.params[k].shape[0]]);
  const names = Object.keys(P);
  const inputs = wl.inputs.map((t) => np.array(f32(t)).reshape([...t.shape]));
  let body;
  const linear = (x, p, pre) => np.matmul(x, p[`${pre}.weightT`]).add(p[`${pre}.bias`]);
  const mlp = (x, p, pre) => linear(nn.gelu(linear(x, p, `${pre}fc1`), { approximate: false }), p, `${pre}fc2`);
  const ln = (x, p, pre) => nn.standardize(x, -1, { epsilon: 1e-5 }).mul(p[`${pre}.weight`]).add(p[`${pre}.bias`]);
  if (wl.name === 'matmul-1024') body = (p, a, b) => np.matmul(a, b);
  else if (wl.name.startsWith('elementwise')) {
    body = (p, x) => {
      let y = x.ref.mul(1.5).add(0.5);
      y = np.maximum(y, 0).mul(nn.sigmoid(x.ref));
      y = y.add(np.tanh(x.ref.mul(0.5)));
      y = y.sub(np.exp(x.ref.mul(x.ref).mul(-1)).mul(0.1));
      x.dispose();
      return y.mul(2).sub(1);
    };
  } else if (wl.name.startsWith('mlp')) body = (p, x) => mlp(x, p, '');
  else if (wl.name === 'transformer-block') {
    const [B, T, C] = wl.inputs[0].shape;
    const H = wl.module.heads;
    const D = C / H;
    // Attention spelled out with matmul: nn.dotProductAttention goes through einsum, whose parser
    // needs iterator helpers that Node 20 lacks.
    P.mask = np.array(Float32Array.from({ length: T * T }, (_, i) => (i % T > Math.floor(i / T) ? -Infinity : 0))).reshape([T, T]);
    names.push('mask');
    body = (p, x) => {
      const qkv = np.transpose(linear(ln(x.ref, p, 'ln1'), p, 'qkv').reshape([B, T, 3, H, D]), [2, 0, 3, 1, 4]);
      const [q, k, v] = np.split(qkv, 3, 0).map((t) => t.reshape([B, H, T, D]));
      const att = nn.softmax(np.matmul(q, np.transpose(k, [0, 1, 3, 2])).mul(1 / Math.sqrt(D)).add(p.mask), -1);
      const o = np.transpose(np.matmul(att, v), [0, 2, 1, 3]).reshape([B, T, C]);
      const h = x.add(linear(o, p, 'proj'));
      return h.ref.add(mlp(ln(h, p, 'ln2'), p, 'mlp.'));
    };
  } else if (wl.name === 'conv-stack') {
    const bnScaleShift = (bn) => {
      const g = wl.params[`${bn}.weight`].data;
      const b = wl.params[`${bn}.bias`].data;
      const mu = wl.params[`${bn}.runningMean`].data;
      const v = wl.params[`${bn}.runningVar`].data;
      const s = g.map((gi, i) => gi / Math.sqrt(v[i] + 1e-5));
      return [np.array(s).reshape([1, g.length, 1, 1]), np.array(b.map((bi, i) => bi - mu[i] * s[i])).reshape([1, g.length, 1, 1])];
    };
    const [s1, t1] = bnScaleShift('bn1');
    const [s2, t2] = bnScaleShift('bn2');
    const cb = (pre) => np.array(wl.params[`${pre}.bias`].data).reshape([1, wl.params[`${pre}.bias`].shape[0], 1, 1]);
    Object.assign(P, { s1, t1, s2, t2, cb1: cb('conv1'), cb2: cb('conv2') });
    names.push('s1', 't1', 's2', 't2', 'cb1', 'cb2');
    body = (p, x) => {
      let y = lax.convGeneralDilated(x, p['conv1.weight'], [2, 2], [[3, 3], [3, 3]]).add(p.cb1);
      y = nn.relu(y.mul(p.s1).add(p.t1));
      y = lax.convGeneralDilated(y, p['conv2.weight'], [1, 1], [[1, 1], [1, 1]]).add(p.cb2);
      return nn.relu(y.mul(p.s2).add(p.t2));
    };
  } else throw new Error(`jax-js: no ${wl.name}`);
  // Parameters are jit arguments (owned, per jax-js's reference counting): the body reads each
  // through .ref (the proxy), and every argument is released once at the end.
  const f = jit((...args) => {
    const raw = args.slice(0, names.length);
    const p = new Proxy({}, { get: (_, k) => raw[names.indexOf(k)].ref });
    const out = body(p, ...args.slice(names.length));
    for (const r of raw) r.dispose();
    return out;
  });
  return {
    name: 'jax-js',
    run: async (check) => {
      const out = f(...names.map((k) => P[k].ref), ...inputs.map((t) => t.ref));
      const v = await out.data();
      return check ? Float32Array.from(v) : null;
    },
  };
}

function transpose2(d, [r, c]) {
  const out = new Float32Array(d.length);
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) out[j * r + i] = d[i * c + j];
  return out;
}

// ---- run ----
const versions = {};
const errors = {};
async function tryInit(name, init) {
  try {
    versions[name] = await init();
  } catch (e) {
    errors[name] = String(e?.stack ?? e).split('\n').slice(0, 3).join(' | ');
    console.log(`${name}: unavailable: ${errors[name]}`);
  }
}
await tryInit('tfjs-wasm', tfjsInit);
await tryInit('jax-js', jaxInit);

const ALL = ['matmul-1024', 'elementwise-1024', 'elementwise-4096', 'mlp-64x512', 'mlp-2048x4096', 'transformer-block', 'conv-stack'];
const names = ONLY ? ONLY.split(',') : ALL;
const results = [];
const load0 = os.loadavg();
console.log(`threads ${THREADS}; Kiln wasm: ${JSON.stringify(wasmRun.wasmSgemmInfo())}; load average ${load0.map((x) => x.toFixed(2)).join(' ')}`);
for (const name of names) {
  const wl = workload(name);
  const vs = [];
  const add = (make, label) => {
    try {
      vs.push(...[make(wl)].flat());
    } catch (e) {
      console.log(`${name.padEnd(18)} ${label.padEnd(20)} error: ${String(e?.message ?? e).slice(0, 200)}`);
      results.push({ workload: name, engine: label, error: String(e?.message ?? e) });
    }
  };
  add(kilnEngines, 'kiln');
  if (versions['tfjs-wasm']) add(tfjsEngine, 'tfjs-wasm');
  if (versions['jax-js']) add(jaxEngine, 'jax-js');
  // The reference is Kiln's first variant (eager, or compiled where eager is left out).
  const reference = await vs[0].run(true);
  for (const v of vs) {
    v.times = [];
    try {
      const out = await v.run(true); // warm-up, compile, result check
      let d = 0;
      for (let i = 0; i < out.length; i++) d = Math.max(d, Math.abs(out[i] - reference[i]));
      v.maxAbsDiff = out.length === reference.length ? d : `length ${out.length} vs ${reference.length}`;
      await v.run(false);
    } catch (e) {
      v.error = String(e?.message ?? e).slice(0, 300);
    }
  }
  const reps = name === 'elementwise-4096' ? Math.max(3, Math.ceil(REPS / 2)) : REPS;
  for (let r = 0; r < reps; r++) {
    for (const v of vs) {
      if (v.error) continue;
      const t0 = performance.now();
      await v.run(false);
      v.times.push(performance.now() - t0);
    }
  }
  for (const v of vs) {
    const s = [...v.times].sort((p, q) => p - q);
    const ms = s.length ? s[s.length >> 1] : null;
    const row = { workload: name, engine: v.name, medianMs: ms, minMs: s[0] ?? null, reps: s.length, gflops: ms && wl.flops ? wl.flops / (ms * 1e6) : null, maxAbsDiffVsKilnFirst: v.maxAbsDiff ?? null, error: v.error ?? null };
    results.push(row);
    console.log(`${name.padEnd(18)} ${v.name.padEnd(20)} ${v.error ? `error: ${v.error}` : `${ms.toFixed(2).padStart(9)} ms (min ${s[0].toFixed(2)})${row.gflops ? `  ${row.gflops.toFixed(1).padStart(6)} GFLOP/s` : ''}  max|diff| ${Number(v.maxAbsDiff).toExponential(2)}`}`);
  }
}
const load1 = os.loadavg();
if (versions['jax-js']) versions['jax-js'] += ` (${ShimWorker.started} Web Workers started)`;
console.log(`versions ${JSON.stringify(versions)}`);
console.log(`load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')}`);
if (OUT) {
  fs.writeFileSync(OUT, `${JSON.stringify({ date: new Date().toISOString(), command: `KILN_CPU_PATH=${process.env.KILN_CPU_PATH ?? ""} node bench-wasm-peers.mjs ${process.argv.slice(2).join(" ")}`, reps: REPS, threads: THREADS, engineThreads: { kiln: THREADS, "tfjs-wasm": 1, "jax-js": THREADS }, jaxWebWorkersStarted: ShimWorker.started, cpu: os.cpus()[0]?.model, cpus: os.availableParallelism(), node: process.version, loadavgBefore: load0, loadavgAfter: load1, kilnWasm: wasmRun.wasmSgemmInfo(), versions, errors, results }, null, 2)}\n`);
  console.log(`wrote ${OUT}`);
}
process.exit(0);
