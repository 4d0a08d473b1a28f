/**
 * Kiln vs onnxruntime-node on the workloads mlp-64x512, mlp-2048x4096 (x [256, 1024] at CPU size),
 * transformer-block, conv-stack and elementwise-4096 (CPU sizes), side by side in one process. Runs in the peers directory that scripts/bench-cpu-peers.sh fills (bare
 * imports resolve to its node_modules; Kiln from $KILN_DIST):
 *
 *   KILN_DIST=<kiln>/dist node bench-cpu-ort-models.mjs [--reps 30] [--threads 2] [--out file.json]
 *     [--only mlp-64x512,transformer-block] [--gap-ms 10] [--block 5] [--warmup 10] [--note 'how it was run']
 *
 * The ONNX graphs are encoded here from the very weights Kiln's workload builder draws (so the max
 * |difference| between the engines is a correctness check): mlp = Gemm(transB) -> GELU(erf, as
 * Div/Erf/Add/Mul/Mul: opset 17 has no Gelu op) -> Gemm; conv-stack = Conv(7x7, s2, p3) ->
 * BatchNormalization -> Relu -> Conv(3x3, p1) -> BatchNormalization -> Relu on NCHW input
 * (onnxruntime picks its own internal layout). Kiln runs eager and kiln.compile on its native path.
 * Engines alternate rep by rep, with an idle gap (--gap-ms, default 10) before each call:
 * onnxruntime's intra-op workers keep spinning for a few milliseconds after a run (measured: ~1.2
 * cores busy for 2 ms, ~0.3 over 10 ms), so without the gap the engine that runs next shares its
 * two cores with that spinner (Kiln's OpenMP workers sleep at once, so the harm was one-sided);
 * medians are reported. The spinning actually lasts ~30-45 ms (process ~1 core busy 10 ms after a
 * run, 0.64 over 50 ms, 0.23 over 200 ms), so `--block N` measures steady state without it: per
 * engine an idle gap (default then 300 ms), one untimed call, N timed calls back to back, engines
 * alternating block by block.
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
const ONLY = opt('only', '');
const BLOCK = Number(opt('block', '0'));
const NOTE = opt('note', '');
const GAP_MS = Number(opt('gap-ms', BLOCK > 0 ? '300' : '10'));
// Untimed calls per engine before any timing: Kiln's JavaScript host code is still being optimised
// by V8 over its first tens of calls (conv-stack compiled: 4.1, 3.1, 2.8 ms in the first timed
// block, ~1.8 after), which the first of 4 blocks otherwise puts into the median.
const WARMUP = Number(opt('warmup', '10'));
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
const loadBefore = os.loadavg();
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
function initializer(name, shape, values, dtype = 'float32') {
  const int = dtype === 'int64';
  const raw = Buffer.from((int ? BigInt64Array.from(values, (v) => BigInt(v)) : Float32Array.from(values)).buffer);
  return [...shape.flatMap((d) => intField(1, d)), ...intField(2, int ? 7 : 1), ...strField(8, name), ...bytesField(9, [...raw])];
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

/** Gemm(transB) -> GELU(erf) -> Gemm(transB) from `input` to `output`; names prefixed with `p`. */
function mlpNodes(m, input, output, p = '') {
  const inits = [
    [`${p}w1`, [...m.fc1.weight.shape], vals(m.fc1.weight)], [`${p}b1`, [...m.fc1.bias.shape], vals(m.fc1.bias)],
    [`${p}w2`, [...m.fc2.weight.shape], vals(m.fc2.weight)], [`${p}b2`, [...m.fc2.bias.shape], vals(m.fc2.bias)],
    [`${p}sqrt2`, [], [Math.SQRT2]], [`${p}one`, [], [1]], [`${p}half`, [], [0.5]],
  ];
  const nodes = [
    node('Gemm', [input, `${p}w1`, `${p}b1`], [`${p}h`], [attrInt('transB', 1)]),
    node('Div', [`${p}h`, `${p}sqrt2`], [`${p}h1`]), node('Erf', [`${p}h1`], [`${p}h2`]), node('Add', [`${p}h2`, `${p}one`], [`${p}h3`]),
    node('Mul', [`${p}h`, `${p}h3`], [`${p}h4`]), node('Mul', [`${p}h4`, `${p}half`], [`${p}g`]),
    node('Gemm', [`${p}g`, `${p}w2`, `${p}b2`], [output], [attrInt('transB', 1)]),
  ];
  return { nodes, inits };
}

function mlpModel(w) {
  const [rows, f] = w.inputs[0].shape;
  const { nodes, inits } = mlpNodes(w.module, 'x', 'y');
  return model(nodes, 'x', [rows, f], 'y', [rows, f], inits);
}

/** The pre-LN block of workloads.ts on x [B, T, C] (Gemm needs 2-D operands: the block runs on [B*T, C]). */
function blockModel(w) {
  const m = w.module;
  const [B, T, C] = w.inputs[0].shape;
  const H = m.heads;
  const D = C / H;
  const mask = new Float32Array(T * T);
  for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) mask[i * T + j] = -Infinity;
  const mlp = mlpNodes(m.mlp, 'n2', 'mo', 'mlp_');
  const inits = [
    ['ln1w', [C], vals(m.ln1.weight)], ['ln1b', [C], vals(m.ln1.bias)], ['ln2w', [C], vals(m.ln2.weight)], ['ln2b', [C], vals(m.ln2.bias)],
    ['wqkv', [...m.qkv.weight.shape], vals(m.qkv.weight)], ['bqkv', [3 * C], vals(m.qkv.bias)],
    ['wo', [...m.proj.weight.shape], vals(m.proj.weight)], ['bo', [C], vals(m.proj.bias)],
    ['rows', [2], [B * T, C], 'int64'], ['heads5', [5], [B, T, 3, H, D], 'int64'], ['back3', [3], [B, T, C], 'int64'], ['zero', [1], [0], 'int64'],
    ['scale', [], [1 / Math.sqrt(D)]], ['mask', [T, T], mask],
    ...mlp.inits,
  ];
  const nodes = [
    node('Reshape', ['x', 'rows'], ['x2']),
    node('LayerNormalization', ['x2', 'ln1w', 'ln1b'], ['n1'], [attrFloat('epsilon', m.ln1.eps)]),
    node('Gemm', ['n1', 'wqkv', 'bqkv'], ['qkv'], [attrInt('transB', 1)]),
    node('Reshape', ['qkv', 'heads5'], ['qkv5']),
    node('Transpose', ['qkv5'], ['qkvT'], [attrInts('perm', [2, 0, 3, 1, 4])]),
    node('Split', ['qkvT'], ['q1', 'k1', 'v1'], [attrInt('axis', 0)]),
    node('Squeeze', ['q1', 'zero'], ['q']), node('Squeeze', ['k1', 'zero'], ['k']), node('Squeeze', ['v1', 'zero'], ['v']),
    node('Transpose', ['k'], ['kT'], [attrInts('perm', [0, 1, 3, 2])]),
    node('MatMul', ['q', 'kT'], ['s0']), node('Mul', ['s0', 'scale'], ['s1']), node('Add', ['s1', 'mask'], ['s2']),
    node('Softmax', ['s2'], ['pr'], [attrInt('axis', 3)]),
    node('MatMul', ['pr', 'v'], ['o']),
    node('Transpose', ['o'], ['oT'], [attrInts('perm', [0, 2, 1, 3])]),
    node('Reshape', ['oT', 'rows'], ['o2']),
    node('Gemm', ['o2', 'wo', 'bo'], ['pj'], [attrInt('transB', 1)]),
    node('Add', ['x2', 'pj'], ['h']),
    node('LayerNormalization', ['h', 'ln2w', 'ln2b'], ['n2'], [attrFloat('epsilon', m.ln2.eps)]),
    ...mlp.nodes,
    node('Add', ['h', 'mo'], ['y2']),
    node('Reshape', ['y2', 'back3'], ['y']),
  ];
  return model(nodes, 'x', [B, T, C], 'y', [B, T, C], inits);
}

/** The guide's elementwise chain on x [n, n] (as scripts/bench-cpu-peers.mjs encodes it). */
function elementwiseModel(w) {
  const shape = [...w.inputs[0].shape];
  const inits = [['k1_5', [], [1.5]], ['k0_5', [], [0.5]], ['k0_1', [], [0.1]], ['k2', [], [2]], ['k1', [], [1]]];
  const nodes = [
    node('Mul', ['x', 'k1_5'], ['t0']), node('Add', ['t0', 'k0_5'], ['t1']), node('Relu', ['t1'], ['t2']), node('Sigmoid', ['x'], ['t3']),
    node('Mul', ['t2', 't3'], ['t4']), node('Mul', ['x', 'k0_5'], ['t5']), node('Tanh', ['t5'], ['t6']), node('Add', ['t4', 't6'], ['t7']),
    node('Mul', ['x', 'x'], ['t8']), node('Neg', ['t8'], ['t9']), node('Exp', ['t9'], ['t10']), node('Mul', ['t10', 'k0_1'], ['t11']),
    node('Sub', ['t7', 't11'], ['t12']), node('Mul', ['t12', 'k2'], ['t13']), node('Sub', ['t13', 'k1'], ['y']),
  ];
  return model(nodes, 'x', shape, 'y', shape, inits);
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
const MODELS = [['mlp-64x512', mlpModel], ['mlp-2048x4096', mlpModel], ['transformer-block', blockModel], ['conv-stack', convModel], ['elementwise-4096', elementwiseModel]];
for (const [name, build] of MODELS.filter(([n]) => ONLY === '' || ONLY.split(',').includes(n))) {
  const w = WORKLOADS.find((x) => x.name === name).build({ size: 'cpu' });
  const sess = await ort.InferenceSession.create(build(w), { executionProviders: ['cpu'], intraOpNumThreads: THREADS, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
  const xin = w.inputs[0];
  const feed = { x: new ort.Tensor('float32', Float32Array.from(kiln.contiguous(xin).toFlatArray()), [...xin.shape]) };
  const compiled = kiln.compile(w.forward, { name });
  // elementwise-4096 eagerly is ~15 single-op passes over 64 MiB: seconds per rep, and not the question.
  const big = name === 'elementwise-4096';
  // conv-stack also without the conv + BatchNorm + ReLU fold (the pointwise kernels it replaces).
  const unfolded = name === 'conv-stack' ? kiln.compile(w.forward, { name: `${name} unfolded`, passes: { foldConvBn: false } }) : null;
  const variants = {
    ...(big ? {} : { 'kiln eager': () => kiln.scope(() => void w.run()) }),
    'kiln compiled': () => kiln.scope(() => void kiln.noGrad(() => compiled(...w.inputs))),
    ...(unfolded ? { 'kiln compiled, no fold': () => kiln.scope(() => void kiln.noGrad(() => unfolded(...w.inputs))) } : {}),
    'onnxruntime-node': async () => void (await sess.run(feed)),
  };
  const ref = kiln.scope(() => Float32Array.from(kiln.contiguous(w.run()).toFlatArray()));
  const got = (await sess.run(feed))[sess.outputNames[0]].data;
  let diff = 0;
  for (let i = 0; i < ref.length; i++) diff = Math.max(diff, Math.abs(ref[i] - got[i]));
  for (const f of Object.values(variants)) for (let i = 0; i < (big ? 1 : WARMUP); i++) await f();
  const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  // Per engine: times by position in the block (0 = first timed call after the idle gap), and
  // Kiln's shared thread-pool counters over its timed calls (how many items the worker ran, how
  // late it joined, how often it had gone to sleep): the diagnosis of a median far above the min.
  const byPos = Object.fromEntries(Object.keys(variants).map((k) => [k, Array.from({ length: BLOCK }, () => [])]));
  const pool = Object.fromEntries(Object.keys(variants).map((k) => [k, { jobs: 0, itemsCaller: 0, itemsWorkers: 0, joins: 0, joinNs: 0, sleeps: 0 }]));
  const poolStats = () => native.sharedPoolStats?.() ?? null;
  const reps = big ? Math.min(REPS, 10) : REPS;
  if (BLOCK > 0) {
    // Blocks: per engine, an idle gap, one untimed call, then BLOCK timed calls back to back.
    for (let done = 0; done < reps; done += BLOCK) {
      for (const [k, f] of Object.entries(variants)) {
        if (GAP_MS > 0) await sleep(GAP_MS);
        await f();
        for (let i = 0; i < Math.min(BLOCK, reps - done); i++) {
          const s0 = poolStats();
          const t0 = performance.now();
          await f();
          const dt = performance.now() - t0;
          const s1 = poolStats();
          times[k].push(dt);
          byPos[k][i].push(dt);
          if (s0 && s1) for (const q of Object.keys(pool[k])) pool[k][q] += s1[q] - s0[q];
        }
      }
    }
  } else {
    for (let r = 0; r < reps + 5; r++) {
      for (const [k, f] of Object.entries(variants)) {
        if (GAP_MS > 0) await sleep(GAP_MS);
        const t0 = performance.now();
        await f();
        if (r >= 5) times[k].push(performance.now() - t0);
      }
    }
  }
  for (const [k, ts] of Object.entries(times)) {
    const row = { workload: name, engine: k, medianMs: median(ts), minMs: Math.min(...ts), maxAbsDiffOrtVsKilnEager: diff };
    if (BLOCK > 0) row.medianMsByBlockPosition = byPos[k].filter((v) => v.length > 0).map(median);
    const ps = pool[k];
    if (k.startsWith('kiln') && ps.jobs > 0) {
      row.pool = { ...ps, workerItemShare: ps.itemsWorkers / Math.max(1, ps.itemsWorkers + ps.itemsCaller), meanJoinUs: ps.joins > 0 ? ps.joinNs / ps.joins / 1000 : null };
    }
    rows.push(row);
    const posText = row.medianMsByBlockPosition ? `  by position ${row.medianMsByBlockPosition.map((x) => x.toFixed(2)).join(' ')}` : '';
    const poolText = row.pool ? `  pool: worker ran ${(100 * row.pool.workerItemShare).toFixed(0)}% of items, join ${row.pool.meanJoinUs?.toFixed(0) ?? '-'} us, ${row.pool.sleeps} sleeps / ${row.pool.jobs} jobs` : '';
    console.log(`${name.padEnd(12)} ${k.padEnd(18)} ${row.medianMs.toFixed(3).padStart(9)} ms  (min ${row.minMs.toFixed(3)})${posText}${poolText}`);
  }
  console.log(`${name.padEnd(12)} max |onnxruntime - kiln eager| ${diff.toExponential(2)}`);
  w.dispose();
}
const load = os.loadavg().map((x) => x.toFixed(2)).join(' ');
console.log(`threads ${THREADS}; reps ${REPS}; warmup ${WARMUP}; gap ${GAP_MS} ms; ${BLOCK > 0 ? `blocks of ${BLOCK}` : 'rep by rep'}; load average after ${load}`);
if (OUT) {
  fs.writeFileSync(OUT, JSON.stringify({ date: new Date().toISOString(), ...(NOTE ? { note: NOTE } : {}), command: `node bench-cpu-ort-models.mjs ${argv.join(' ')}`, machine: `${os.hostname()}, ${os.availableParallelism()} cpus, node ${process.version}`, threads: THREADS, reps: REPS, warmup: WARMUP, gapMs: GAP_MS, block: BLOCK, scheduling: scheduling(), loadAverageBefore: loadBefore, loadAverage: os.loadavg(), cpu: os.cpus()[0]?.model, onnxruntime: require('onnxruntime-node/package.json').version, rows }, null, 2));
  console.log(`wrote ${OUT}`);
}
