/**
 * conv-stack layer by layer, Kiln native vs onnxruntime-node, at 1 and 2 threads: where the
 * conv-stack gap (issue #7) sits. Runs in the peers directory that scripts/bench-cpu-peers.sh
 * fills (bare imports resolve to its node_modules; Kiln from $KILN_DIST):
 *
 *   KILN_DIST=<kiln>/dist node bench-cpu-conv-layers.mjs [--reps 40] [--block 10] [--out file.json]
 *
 * Rows, for each layer of the workload (stem = Conv 7x7 s2 p3 + BN + ReLU on [2, 3, 64, 64],
 * body = Conv 3x3 p1 + BN + ReLU on [2, 64, 32, 32]) and for the whole stack:
 *   - `kiln op`: kiln.nn.functional.conv2dBatchNorm eagerly on channels_last tensors (dispatch,
 *     output allocation and the BN fold's per-call scale/shift included): what the compiled program runs;
 *   - `kiln compiled` (stack only): kiln.compile of the workload;
 *   - `onnxruntime`: a session holding just that layer (Conv -> BatchNormalization -> Relu), NCHW.
 * Each at 1 and 2 threads (Kiln: setNativeThreads; onnxruntime: one session per thread count).
 * Blocks as bench-cpu-ort-models.mjs: per engine an idle gap (300 ms: onnxruntime's workers spin
 * ~30-45 ms after a run), one untimed call, then --block timed calls; engines alternate.
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
const REPS = Number(opt('reps', '40'));
const BLOCK = Number(opt('block', '10'));
const GAP_MS = Number(opt('gap-ms', '300'));
const OUT = opt('out', '');
const ONLY = opt('only', '');
const THREADS = opt('threads', '1,2').split(',').map(Number);
/** This process's scheduling, for the results file (/proc/self/stat fields 19 nice, 40 rt priority, 41 policy). */
function scheduling() {
  try {
    const f = fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
    const policy = ['SCHED_OTHER', 'SCHED_FIFO', 'SCHED_RR', 'SCHED_BATCH', '', 'SCHED_IDLE'][Number(f[38])] ?? `policy ${f[38]}`;
    return policy === 'SCHED_OTHER' ? `${policy}, nice ${f[16]}` : `${policy}, rt priority ${f[37]}`;
  } catch {
    return 'unknown';
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const dist = process.env.KILN_DIST;
if (!dist) throw new Error('KILN_DIST must point at Kiln\'s dist directory');
const kiln = await import(path.join(dist, 'src/index.js'));
const { WORKLOADS } = await import(path.join(dist, 'src/bench/workloads.js'));
const native = await import(path.join(dist, 'src/kernels/cpu/native/index.js'));
const require = createRequire(path.join(process.cwd(), 'package.json'));
const ort = require('onnxruntime-node');

// ---- minimal ONNX protobuf encoder (as bench-cpu-ort-models.mjs) ----
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
function initializer(name, shape, values) {
  const raw = Buffer.from(Float32Array.from(values).buffer);
  return [...shape.flatMap((d) => intField(1, d)), ...intField(2, 1), ...strField(8, name), ...bytesField(9, [...raw])];
}
const attrInts = (name, xs) => [...strField(1, name), ...xs.flatMap((x) => intField(8, x)), ...intField(20, 7)];
const attrFloat = (name, x) => [...strField(1, name), ...floatField(2, x), ...intField(20, 1)];
function node(op, inputs, outputs, attrs = []) {
  return [...inputs.flatMap((i) => strField(1, i)), ...outputs.flatMap((o) => strField(2, o)), ...strField(4, op), ...attrs.flatMap((a) => bytesField(5, a))];
}
function model(nodes, inShape, output, outShape, inits) {
  const graph = [
    ...nodes.flatMap((n) => bytesField(1, n)),
    ...strField(2, 'g'),
    ...inits.flatMap((t) => bytesField(5, initializer(...t))),
    ...bytesField(11, valueInfo('x', inShape)),
    ...bytesField(12, valueInfo(output, outShape)),
  ];
  return Uint8Array.from([...intField(1, 8), ...strField(2, 'kiln-peers'), ...bytesField(7, graph), ...bytesField(8, [...strField(1, ''), ...intField(2, 17)])]);
}
const vals = (t) => t.toFlatArray();

/** Conv -> BatchNormalization -> Relu for the given layers ([conv, bn, stride, pad] each). */
function layersModel(layers, inShape, outShape) {
  const inits = [];
  const nodes = [];
  let cur = 'x';
  layers.forEach(([conv, bn, s, p], i) => {
    inits.push([`w${i}`, [...conv.weight.shape], vals(conv.weight)], [`c${i}`, [...conv.bias.shape], vals(conv.bias)]);
    inits.push([`g${i}`, [...bn.weight.shape], vals(bn.weight)], [`be${i}`, [...bn.bias.shape], vals(bn.bias)]);
    inits.push([`m${i}`, [...bn.runningMean.shape], vals(bn.runningMean)], [`v${i}`, [...bn.runningVar.shape], vals(bn.runningVar)]);
    const k = conv.weight.shape[2];
    nodes.push(node('Conv', [cur, `w${i}`, `c${i}`], [`cv${i}`], [attrInts('kernel_shape', [k, k]), attrInts('strides', [s, s]), attrInts('pads', [p, p, p, p])]));
    nodes.push(node('BatchNormalization', [`cv${i}`, `g${i}`, `be${i}`, `m${i}`, `v${i}`], [`bn${i}`], [attrFloat('epsilon', bn.eps)]));
    nodes.push(node('Relu', [`bn${i}`], [`r${i}`]));
    cur = `r${i}`;
  });
  return model(nodes, inShape, cur, outShape, inits);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

native.setCpuPath('native');
const w = WORKLOADS.find((x) => x.name === 'conv-stack').build({ size: 'cpu' });
const m = w.module;
const x0 = w.inputs[0];
const x1 = kiln.noGrad(() => kiln.relu(m.bn1.forward(m.conv1.forward(x0))));
const layerDefs = [
  ['stem', [[m.conv1, m.bn1, 2, 3]], x0, [...x1.shape]],
  ['body', [[m.conv2, m.bn2, 1, 1]], x1, [...w.outputShape]],
  ['stack', [[m.conv1, m.bn1, 2, 3], [m.conv2, m.bn2, 1, 1]], x0, [...w.outputShape]],
].filter(([n]) => ONLY === '' || ONLY.split(',').includes(n));
const convBn = (x, conv, bn, s, p) => kiln.nn.functional.conv2dBatchNorm(x, conv.weight, conv.bias, bn, { stride: s, padding: p, relu: true });
const compiled = kiln.compile(w.forward, { name: 'conv-stack layers' });

const rows = [];
for (const [name, layers, xin, outShape] of layerDefs) {
  const feed = { x: new ort.Tensor('float32', Float32Array.from(kiln.contiguous(xin).toFlatArray()), [...xin.shape]) };
  const variants = {};
  for (const t of THREADS) {
    const sess = await ort.InferenceSession.create(layersModel(layers, [...xin.shape], outShape), { executionProviders: ['cpu'], intraOpNumThreads: t, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
    const kilnOp = () => {
      native.setNativeThreads(t);
      // void: a tensor returned from the scope outlives it, and its fresh buffer costs page faults each call.
      kiln.scope(() => void kiln.noGrad(() => layers.reduce((h, [conv, bn, s, p]) => convBn(h, conv, bn, s, p), xin)));
    };
    variants[`kiln op ${t}t`] = kilnOp;
    if (name === 'stack') variants[`kiln compiled ${t}t`] = () => {
      native.setNativeThreads(t);
      kiln.scope(() => void kiln.noGrad(() => compiled(xin)));
    };
    variants[`onnxruntime ${t}t`] = async () => void (await sess.run(feed));
    if (t === THREADS[0]) {
      // Correctness check of the layer: Kiln's op vs onnxruntime on the same weights.
      const ref = kiln.scope(() => Float32Array.from(kiln.contiguous(kiln.noGrad(() => layers.reduce((h, [conv, bn, s, p]) => convBn(h, conv, bn, s, p), xin))).toFlatArray()));
      const got = (await sess.run(feed))[sess.outputNames[0]].data;
      let diff = 0;
      for (let i = 0; i < ref.length; i++) diff = Math.max(diff, Math.abs(ref[i] - got[i]));
      console.log(`${name}: max |onnxruntime - kiln| ${diff.toExponential(2)}`);
    }
  }
  const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  for (let done = 0; done < REPS; done += BLOCK) {
    for (const [k, f] of Object.entries(variants)) {
      await sleep(GAP_MS);
      await f();
      for (let i = 0; i < Math.min(BLOCK, REPS - done); i++) {
        const t0 = performance.now();
        await f();
        times[k].push(performance.now() - t0);
      }
    }
  }
  for (const [k, ts] of Object.entries(times)) {
    const row = { layer: name, engine: k, medianMs: median(ts), minMs: Math.min(...ts) };
    rows.push(row);
    console.log(`${name.padEnd(6)} ${k.padEnd(20)} ${row.medianMs.toFixed(3).padStart(8)} ms  (min ${row.minMs.toFixed(3)})`);
  }
}
native.setNativeThreads(undefined);
const load = os.loadavg().map((v) => v.toFixed(2)).join(' ');
console.log(`reps ${REPS}; blocks of ${BLOCK}; gap ${GAP_MS} ms; ${scheduling()}; load average after ${load}`);
if (OUT) {
  fs.writeFileSync(OUT, JSON.stringify({ date: new Date().toISOString(), command: `node bench-cpu-conv-layers.mjs ${argv.join(' ')}`, reps: REPS, block: BLOCK, gapMs: GAP_MS, scheduling: scheduling(), loadAverage: os.loadavg(), cpu: os.cpus()[0]?.model, cores: os.availableParallelism(), onnxruntime: require('onnxruntime-node/package.json').version, rows }, null, 2));
  console.log(`wrote ${OUT}`);
}
