/**
 * Kiln vs onnxruntime-node on the model workloads mlp-64x512 and conv-stack (CPU sizes), side by
 * side in one process. Runs in the peers directory that scripts/bench-cpu-peers.sh fills (bare
 * imports resolve to its node_modules; Kiln from $KILN_DIST):
 *
 *   KILN_DIST=<kiln>/dist node bench-cpu-ort-models.mjs [--reps 30] [--threads 2] [--out file.json]
 *
 * The ONNX graphs are encoded here from the very weights Kiln's workload builder draws (so the max
 * |difference| between the engines is a correctness check): mlp = Gemm(transB) -> GELU(erf, as
 * Div/Erf/Add/Mul/Mul: opset 17 has no Gelu op) -> Gemm; conv-stack = Conv(7x7, s2, p3) ->
 * BatchNormalization -> Relu -> Conv(3x3, p1) -> BatchNormalization -> Relu on NCHW input
 * (onnxruntime picks its own internal layout). Kiln runs eager and kiln.compile on its native path
 * (conv-stack also compiled without the conv + BatchNorm fold, `passes: { foldConvBn: false }`).
 * Engines alternate rep by rep; medians are reported.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : dflt;
};
const REPS = Number(opt('reps', '30'));
const THREADS = Number(opt('threads', String(os.availableParallelism())));
const OUT = opt('out', '');
const dist = process.env.KILN_DIST;
if (!dist) throw new Error('KILN_DIST must point at Kiln\'s dist directory');
const kiln = await import(path.join(dist, 'src/index.js'));
const { WORKLOADS } = await import(path.join(dist, 'src/bench/workloads.js'));
const native = await import(path.join(dist, 'src/kernels/cpu/native/index.js'));
const require = createRequire(path.join(process.cwd(), 'package.json'));
const ort = require('onnxruntime-node');

// ---- minimal ONNX protobuf encoder ----
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
const floatField = (field, v) => {
  const f = Buffer.alloc(4);
  f.writeFloatLE(v);
  return [...key(field, 5), ...f];
};
function valueInfo(name, shape) {
  const dims = shape.flatMap((d) => bytesField(1, intField(1, d)));
  return [...strField(1, name), ...bytesField(2, bytesField(1, [...intField(1, 1), ...bytesField(2, dims)]))];
}
/** TensorProto: dims (1), data_type float (2), name (8), raw_data (9). */
function initializer(name, shape, values) {
  const raw = Buffer.from(Float32Array.from(values).buffer);
  return [...shape.flatMap((d) => intField(1, d)), ...intField(2, 1), ...strField(8, name), ...bytesField(9, [...raw])];
}
/** AttributeProto: name (1), type (20); ints (8) or i (3) or f (2). */
const attrInts = (name, xs) => [...strField(1, name), ...xs.flatMap((x) => intField(8, x)), ...intField(20, 7)];
const attrInt = (name, x) => [...strField(1, name), ...intField(3, x), ...intField(20, 2)];
const attrFloat = (name, x) => [...strField(1, name), ...floatField(2, x), ...intField(20, 1)];
function node(op, inputs, outputs, attrs = []) {
  return [...inputs.flatMap((i) => strField(1, i)), ...outputs.flatMap((o) => strField(2, o)), ...strField(4, op), ...attrs.flatMap((a) => bytesField(5, a))];
}
function model(nodes, input, inShape, output, outShape, inits) {
  const graph = [
    ...nodes.flatMap((n) => bytesField(1, n)),
    ...strField(2, 'g'),
    ...inits.flatMap((t) => bytesField(5, initializer(...t))),
    ...bytesField(11, valueInfo(input, inShape)),
    ...bytesField(12, valueInfo(output, outShape)),
  ];
  return Uint8Array.from([...intField(1, 8), ...strField(2, 'kiln-peers'), ...bytesField(7, graph), ...bytesField(8, [...strField(1, ''), ...intField(2, 17)])]);
}
const vals = (t) => t.toFlatArray();

function mlpModel(w) {
  const m = w.module;
  const [rows, f] = w.inputs[0].shape;
  const inits = [
    ['w1', [...m.fc1.weight.shape], vals(m.fc1.weight)], ['b1', [...m.fc1.bias.shape], vals(m.fc1.bias)],
    ['w2', [...m.fc2.weight.shape], vals(m.fc2.weight)], ['b2', [...m.fc2.bias.shape], vals(m.fc2.bias)],
    ['sqrt2', [], [Math.SQRT2]], ['one', [], [1]], ['half', [], [0.5]],
  ];
  const nodes = [
    node('Gemm', ['x', 'w1', 'b1'], ['h'], [attrInt('transB', 1)]),
    node('Div', ['h', 'sqrt2'], ['h1']), node('Erf', ['h1'], ['h2']), node('Add', ['h2', 'one'], ['h3']), node('Mul', ['h', 'h3'], ['h4']), node('Mul', ['h4', 'half'], ['g']),
    node('Gemm', ['g', 'w2', 'b2'], ['y'], [attrInt('transB', 1)]),
  ];
  return model(nodes, 'x', [rows, f], 'y', [rows, f], inits);
}

function convModel(w) {
  const m = w.module;
  const inits = [];
  const nodes = [];
  let cur = 'x';
  [[m.conv1, m.bn1, 2, 3], [m.conv2, m.bn2, 1, 1]].forEach(([conv, bn, s, p], i) => {
    inits.push([`w${i}`, [...conv.weight.shape], vals(conv.weight)], [`c${i}`, [...conv.bias.shape], vals(conv.bias)]);
    inits.push([`g${i}`, [...bn.weight.shape], vals(bn.weight)], [`be${i}`, [...bn.bias.shape], vals(bn.bias)]);
    inits.push([`m${i}`, [...bn.runningMean.shape], vals(bn.runningMean)], [`v${i}`, [...bn.runningVar.shape], vals(bn.runningVar)]);
    const k = conv.weight.shape[2];
    nodes.push(node('Conv', [cur, `w${i}`, `c${i}`], [`cv${i}`], [attrInts('kernel_shape', [k, k]), attrInts('strides', [s, s]), attrInts('pads', [p, p, p, p])]));
    nodes.push(node('BatchNormalization', [`cv${i}`, `g${i}`, `be${i}`, `m${i}`, `v${i}`], [`bn${i}`], [attrFloat('epsilon', bn.eps)]));
    nodes.push(node('Relu', [`bn${i}`], [`r${i}`]));
    cur = `r${i}`;
  });
  return model(nodes, 'x', [...w.inputs[0].shape], cur, [...w.outputShape], inits);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
native.setCpuPath('native');
native.setNativeThreads(THREADS);
const rows = [];
for (const [name, build] of [['mlp-64x512', mlpModel], ['conv-stack', convModel]]) {
  const w = WORKLOADS.find((x) => x.name === name).build({ size: 'cpu' });
  const sess = await ort.InferenceSession.create(build(w), { executionProviders: ['cpu'], intraOpNumThreads: THREADS, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
  const xin = w.inputs[0];
  const feed = { x: new ort.Tensor('float32', Float32Array.from(kiln.contiguous(xin).toFlatArray()), [...xin.shape]) };
  const compiled = kiln.compile(w.forward, { name });
  // conv-stack also without the conv + BatchNorm + ReLU fold (the pointwise kernels it replaces).
  const unfolded = name === 'conv-stack' ? kiln.compile(w.forward, { name: `${name} unfolded`, passes: { foldConvBn: false } }) : null;
  const variants = {
    'kiln eager': () => kiln.scope(() => void w.run()),
    'kiln compiled': () => kiln.scope(() => void kiln.noGrad(() => compiled(...w.inputs))),
    ...(unfolded ? { 'kiln compiled, no fold': () => kiln.scope(() => void kiln.noGrad(() => unfolded(...w.inputs))) } : {}),
    'onnxruntime-node': async () => void (await sess.run(feed)),
  };
  const ref = kiln.scope(() => Float32Array.from(kiln.contiguous(w.run()).toFlatArray()));
  const got = (await sess.run(feed))[sess.outputNames[0]].data;
  let diff = 0;
  for (let i = 0; i < ref.length; i++) diff = Math.max(diff, Math.abs(ref[i] - got[i]));
  const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  for (let r = 0; r < REPS + 5; r++) {
    for (const [k, f] of Object.entries(variants)) {
      const t0 = performance.now();
      await f();
      if (r >= 5) times[k].push(performance.now() - t0);
    }
  }
  for (const [k, ts] of Object.entries(times)) {
    const row = { workload: name, engine: k, medianMs: median(ts), minMs: Math.min(...ts), maxAbsDiffOrtVsKilnEager: diff };
    rows.push(row);
    console.log(`${name.padEnd(12)} ${k.padEnd(18)} ${row.medianMs.toFixed(3).padStart(9)} ms  (min ${row.minMs.toFixed(3)})`);
  }
  console.log(`${name.padEnd(12)} max |onnxruntime - kiln eager| ${diff.toExponential(2)}`);
  w.dispose();
}
const load = os.loadavg().map((x) => x.toFixed(2)).join(' ');
console.log(`threads ${THREADS}; reps ${REPS}; load average after ${load}`);
if (OUT) {
  fs.writeFileSync(OUT, JSON.stringify({ date: new Date().toISOString(), threads: THREADS, reps: REPS, loadAverage: os.loadavg(), cpu: os.cpus()[0]?.model, onnxruntime: require('onnxruntime-node/package.json').version, rows }, null, 2));
  console.log(`wrote ${OUT}`);
}
