#!/usr/bin/env node
/* global process, console, performance */
/**
 * Sweep of the staged float16 subgroup-matrix GEMM's plans (issue #20: float16 8192^3 on webgpu,
 * Dawn/Vulkan on the H200, towards 150 TFLOP/s). One process, one device: for each plan
 * (KILN_WEBGPU_SM_PLAN syntax, gemm-subgroup-matrix-staged.ts; "default" = the planner's plan) it
 *   1. checks numbers: matmul in the four operand layouts on a whole-tile shape (256^3) and a
 *      ragged one (264 x 136 x 520), a bias linear and a beta addmm, all against float64 on the host;
 *      then CHECK^3 (2048) against the reference plan's product over every element and against
 *      float64 on 32 sampled elements;
 *   2. times TIME^3 products (4096, 8192): device timestamps (kiln.Event) around back-to-back
 *      products, the median of 5 batches;
 * and appends one JSON row per plan to --out (status ok / wrong / skip / error / killed / no-time).
 * Before each plan it appends a 'start' row, so a rerun (after a crash or a shell timeout) marks the
 * plan that was running as killed and goes on with the rest. A row's `ran` says the plan's own
 * kernel ran (a stages-0 plan falls back to the planner's on shapes that are not whole tiles).
 *
 *   node scripts/device/wggemm-sweep.mjs --out FILE.jsonl [--tag T] [--plans "p1;p2;..."]
 *        [--top N --from-tag T0] [--deadline EPOCH_S] [--time 4096,8192] [--check 2048]
 *        [--small 256:256:256,264:136:520] [--reference PLAN] [--emulate m,n,k,sg] [--epilogues 0|1] [--dist DIR]
 *   node scripts/device/wggemm-sweep.mjs --table FILE.jsonl      (the short table of all tags)
 *
 * --top N --from-tag T0: the plans are "default" and the N fastest ok plans of tag T0 in --out
 * (a second pass under other Dawn toggles, e.g. KILN_WEBGPU_DAWN_TOGGLES=disable_robustness).
 * --emulate runs the emulated kernel (no subgroup matrices; SwiftShader) to test this script.
 * scripts/device/wggemm-sweep.sh runs the passes on the device.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const value = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};

/** The plans, fastest-to-decide first (a pass may run out of time). Each "sgm,sgn,tm,tn,ks[,stages=S][,group=G]". */
const PLANS = [
  'default', // the planner's: 2,2,4,4,2 on the H200 (103 TFLOP/s in session 13)
  '2,2,4,4,2,stages=2',
  '2,2,4,4,1,stages=2',
  '2,2,4,4,1,stages=0',
  '4,2,2,4,2',
  '2,4,4,2,2',
  '2,4,4,4,1',
  '4,2,4,4,1',
  '2,2,4,4,1',
  '2,2,4,4,4',
  '2,4,4,4,2',
  '4,2,4,4,2',
  '2,4,4,4,1,stages=2',
  '4,2,4,4,1,stages=2',
  '4,2,2,4,2,stages=2',
  '4,2,2,4,1,stages=2',
  '4,4,2,2,2',
  '2,4,4,4,1,stages=0',
  '4,2,2,4,1,stages=0',
  '2,2,2,4,1,stages=0',
  '2,2,4,4,2,stages=0',
  '2,2,4,4,2,group=8',
  '2,2,4,4,1,stages=2,group=8',
  '2,4,4,4,1,group=8',
  '2,2,4,8,1',
  '2,2,8,4,1',
  '2,2,2,4,2',
];

function table(file) {
  const rows = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
  const devices = rows.filter((r) => r.kind === 'device');
  for (const d of devices) console.log(`# ${d.tag}: ${d.device} toggles=${JSON.stringify(d.toggles)} limits: ${d.limits?.maxComputeWorkgroupStorageSize} B workgroup memory, ${d.limits?.maxComputeInvocationsPerWorkgroup} invocations; base ${JSON.stringify(d.base)}${d.error ? ` ERROR ${d.error}` : ''}`);
  const res = rows.filter((r) => r.kind === 'variant');
  const sizes = [...new Set(res.flatMap((r) => Object.keys(r.time ?? {})))].sort((a, b) => Number(a) - Number(b));
  const big = sizes[sizes.length - 1];
  const tf = (r, s) => r.time?.[s]?.tflops ?? -1;
  res.sort((a, b) => tf(b, big) - tf(a, big));
  console.log(['tag', 'plan', 'status', 'err', ...sizes.map((s) => `TF@${s}`), 'ran', 'note'].join('\t'));
  for (const r of res) {
    const err = r.check ? `${r.check.small_tol.toFixed(2)}/${r.check.vs_ref.toExponential(1)}` : '-';
    console.log([r.tag, r.plan, r.status, err, ...sizes.map((s) => (r.time?.[s] ? r.time[s].tflops.toFixed(1) : '-')), r.ran ?? '-', (r.reason ?? '').slice(0, 90)].join('\t'));
  }
  const best = res.find((r) => r.status === 'ok' && tf(r, big) > 0);
  if (best) console.log(`BEST at ${big}^3: ${best.tag} KILN_WEBGPU_SM_PLAN="${best.plan === 'default' ? '' : best.plan}" ${tf(best, big)} TFLOP/s (default plan ${res.find((r) => r.plan === 'default' && r.tag === best.tag)?.time?.[big]?.tflops ?? '?'})`);
}

if (value('--table')) {
  table(value('--table'));
  process.exit(0);
}

const out = value('--out');
if (!out) {
  console.error('wggemm-sweep: --out FILE.jsonl is required (or --table FILE.jsonl)');
  process.exit(2);
}
const tag = value('--tag', 'base');
const deadline = Number(value('--deadline', String(Date.now() / 1000 + 1e6)));
const timeSizes = value('--time', '4096,8192').split(',').filter((s) => s !== '').map(Number);
const checkSize = Number(value('--check', '2048'));
const smallShapes = value('--small', '256:256:256,264:136:520').split(',').map((s) => s.split(':').map(Number));
const referencePlan = value('--reference', 'default');
const emulate = value('--emulate');
// 0: no bias / beta checks (local emulation: their ragged shapes fall back to the planner's plan, too big for SwiftShader).
const epilogues = value('--epilogues', '1') !== '0';
const root = path.resolve(value('--dist', 'dist'));
const write = (row) => fs.appendFileSync(out, `${JSON.stringify(row)}\n`);
const previous = fs.existsSync(out) ? fs.readFileSync(out, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l)) : [];

let plans = value('--plans') ? value('--plans').split(';').map((s) => s.trim()).filter((s) => s !== '') : PLANS;
if (value('--top')) {
  const from = value('--from-tag', 'base');
  const ok = previous.filter((r) => r.kind === 'variant' && r.tag === from && r.status === 'ok' && r.time);
  const big = String(Math.max(...timeSizes));
  ok.sort((a, b) => (b.time[big]?.tflops ?? 0) - (a.time[big]?.tflops ?? 0));
  plans = ['default', ...ok.map((r) => r.plan).filter((p) => p !== 'default').slice(0, Number(value('--top')))];
}

const kiln = await import(pathToFileURL(path.join(root, 'src/index.js')).href);
const LA = await import(pathToFileURL(path.join(root, 'src/kernels/webgpu/linalg.js')).href);
const ST = await import(pathToFileURL(path.join(root, 'src/kernels/webgpu/gemm-subgroup-matrix-staged.js')).href);
const { setOption } = await import(pathToFileURL(path.join(root, 'src/runtime/config.js')).href);

if (emulate) {
  const [m, n, k, sg] = emulate.split(',').map(Number);
  LA.emulateSubgroupMatrix({ m, n, k, sg });
}
const acc = kiln.getAccelerator('webgpu');
const adapter = acc.bridge.adapter;
const base = LA.subgroupMatrixPlan();
const deviceRow = {
  kind: 'device',
  tag,
  device: `${acc.properties(0).name ?? ''} (${adapter.backend})`,
  toggles: adapter.toggles,
  features: adapter.features,
  limits: adapter.limits,
  subgroup: [adapter.subgroupMinSize, adapter.subgroupMaxSize],
  configs: adapter.subgroupMatrixConfigs,
  timing: acc.deviceTimestamps ? 'device' : 'host',
  emulate: emulate ?? null,
  base,
};
if ('reason' in base) {
  write({ ...deviceRow, error: base.reason });
  console.error(`wggemm-sweep: no subgroup matrix plan: ${base.reason}`);
  process.exit(2);
}
setOption('KILN_WEBGPU_SM_PLAN', undefined);
deviceRow.planner = LA.stagedSubgroupMatrixPlan(base);
if (!previous.some((r) => r.kind === 'device' && r.tag === tag)) write(deviceRow);
console.log(`[${tag}] ${deviceRow.device} toggles=${JSON.stringify(adapter.toggles)} workgroup memory ${adapter.limits.maxComputeWorkgroupStorageSize}, invocations ${adapter.limits.maxComputeInvocationsPerWorkgroup}, planner ${JSON.stringify(deviceRow.planner)}`);

// Resume: plans done in this tag are skipped; one started but not done was running when the process died.
const done = new Set(previous.filter((r) => r.kind === 'variant' && r.tag === tag).map((r) => r.plan));
for (const r of previous.filter((x) => x.kind === 'start' && x.tag === tag)) {
  if (!done.has(r.plan)) {
    write({ kind: 'variant', tag, plan: r.plan, status: 'killed', reason: 'the process died or timed out while this plan ran' });
    done.add(r.plan);
  }
}
plans = plans.filter((p) => !done.has(p));

const dt = 'float16';
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const host = (shape) => kiln.randn(shape).to(dt);
const onGpu = (x, transposed) => (transposed ? x.t().contiguous().to('webgpu').t() : x.to('webgpu'));
const f64 = (t) => t.to('cpu').to('float64').toFlatArray();
const useKeys = (fn) => {
  const before = new Set(LA.gemmPipelineKeys());
  fn();
  return LA.gemmPipelineKeys().filter((k) => !before.has(k));
};
const withPlan = (text, fn) => {
  setOption('KILN_WEBGPU_SM_PLAN', text === 'default' ? undefined : text);
  try {
    return fn();
  } finally {
    setOption('KILN_WEBGPU_SM_PLAN', undefined);
  }
};
const spec = (aMajor, bMajor, bias = false, beta = false) => ({ a: emulate ? 'f16p' : 'f16', b: emulate ? 'f16p' : 'f16', c: emulate ? 'f16p' : 'f16', aMajor, bMajor, bias, beta });
const keyOf = (plan, s) => ST.stagedKey(s, plan, { emulate: Boolean(emulate) });

// Small shapes: host float16 operands and float64 references (the worst |got - want| / (2e-2 + 4e-3 |want|), as the tests).
kiln.manualSeed(20);
const small = smallShapes.map(([M, N, K]) => {
  const a = host([M, K]);
  const b = host([K, N]);
  return { M, N, K, a, b, want: f64(kiln.matmul(a.to('float64'), b.to('float64'))), ga: [onGpu(a, false), onGpu(a, true)], gb: [onGpu(b, false), onGpu(b, true)] };
});
const [lx, lw, lbias] = [host([40, 56]), host([24, 56]), host([24])];
const linearWant = f64(kiln.nn.functional.linear(lx.to('float64'), lw.to('float64'), lbias.to('float64')));
const [ca, cb, cc] = [host([48, 40]), host([40, 32]), host([48, 32])];
const addmmWant = f64(kiln.addmm(cc.to('float64'), ca.to('float64'), cb.to('float64'), 0.5, 2));
const tol = (got, want) => {
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]) / (2e-2 + 4e-3 * Math.abs(want[i])));
  return worst;
};

// The CHECK^3 product: host operands (for float64 samples) and the reference plan's result.
const A2h = host([checkSize, checkSize]);
const B2h = host([checkSize, checkSize]);
const A2 = A2h.to('webgpu');
const B2 = B2h.to('webgpu');
const samples = Array.from({ length: 32 }, (_, s) => [(s * 7919) % checkSize, (s * 104729 + 13) % checkSize]);
const sampleErr = (c) => {
  let worst = 0;
  for (const [i, j] of samples) {
    const row = A2h.narrow(0, i, 1).to('float64').toFlatArray();
    const col = B2h.narrow(1, j, 1).to('float64').toFlatArray();
    let want = 0;
    let mag = 0;
    for (let x = 0; x < checkSize; x++) {
      want += row[x] * col[x];
      mag += Math.abs(row[x] * col[x]);
    }
    worst = Math.max(worst, Math.abs(c[i * checkSize + j] - want) / (mag + 1e-30));
  }
  return worst;
};
const ref = withPlan(referencePlan, () => f64(kiln.matmul(A2, B2)));
const refSampleErr = sampleErr(ref);
console.log(`[${tag}] reference ${referencePlan} at ${checkSize}^3: sampled error vs float64 ${refSampleErr.toExponential(2)} (relative to sum |a b|; float16 rounding ~1e-3)`);

// Timed operands: a random block repeated (host randn of 8192^2 takes seconds; values do not change the timing).
const timed = timeSizes.map((n) => {
  const rows = Math.min(n, 512);
  const make = () => {
    const blk = kiln.randn([rows, n]).to(dt).to('webgpu');
    if (rows === n) return blk;
    const t = kiln.cat(new Array(n / rows).fill(blk), 0);
    blk.dispose();
    return t;
  };
  return { n, a: make(), b: make() };
});

function timeOne(a, b, n) {
  const flops = 2 * n * n * n;
  kiln.matmul(a, b).dispose();
  kiln.synchronize('webgpu');
  const inner = Math.max(2, Math.min(20, Math.ceil((0.03 * 100e12) / flops)));
  const ms = [];
  for (let r = 0; r < 5; r++) {
    const outs = [];
    const t0 = performance.now();
    const start = new kiln.Event('webgpu').record();
    for (let i = 0; i < inner; i++) outs.push(kiln.matmul(a, b));
    const end = new kiln.Event('webgpu').record();
    end.synchronize();
    const hostMs = performance.now() - t0;
    ms.push((acc.deviceTimestamps ? start.elapsedTime(end) : hostMs) / inner);
    for (const o of outs) o.dispose();
  }
  const t = median(ms);
  return { ms: Number(t.toFixed(4)), tflops: Number((flops / (t * 1e-3) / 1e12).toPrecision(4)), inner };
}

const t0 = Date.now() / 1000;
let deviceBroken = false;
for (const text of plans) {
  const now = Date.now() / 1000;
  if (now > deadline) {
    write({ kind: 'variant', tag, plan: text, status: 'no-time', reason: `the pass's deadline passed (${(now - t0).toFixed(0)} s in)` });
    continue;
  }
  write({ kind: 'start', tag, plan: text });
  const row = { kind: 'variant', tag, plan: text };
  const began = performance.now();
  try {
    const plan = withPlan(text, () => LA.stagedSubgroupMatrixPlan(base));
    if (plan === null) throw new RangeError('no staged plan fits this device');
    row.resolved = plan;
    row.key = keyOf(plan, spec('k', 'n'));
    const keys = useKeys(() =>
      withPlan(text, () => {
        let smallTol = 0;
        for (const s of small) {
          for (const [ta, tb] of [
            [0, 0],
            [1, 0],
            [0, 1],
            [1, 1],
          ]) {
            const c = kiln.matmul(s.ga[ta], s.gb[tb]);
            smallTol = Math.max(smallTol, tol(f64(c), s.want));
            c.dispose();
          }
        }
        if (epilogues) {
          smallTol = Math.max(smallTol, tol(f64(kiln.nn.functional.linear(lx.to('webgpu'), lw.to('webgpu'), lbias.to('webgpu'))), linearWant));
          smallTol = Math.max(smallTol, tol(f64(kiln.addmm(cc.to('webgpu'), ca.to('webgpu'), cb.to('webgpu'), 0.5, 2)), addmmWant));
        }
        const c2 = f64(kiln.matmul(A2, B2));
        let vsRef = 0;
        for (let i = 0; i < ref.length; i++) vsRef = Math.max(vsRef, Math.abs(c2[i] - ref[i]) / (1 + Math.abs(ref[i])));
        row.check = { small_tol: Number(smallTol.toPrecision(3)), vs_ref: Number(vsRef.toPrecision(3)), sampled: Number(sampleErr(c2).toPrecision(3)) };
      }),
    );
    row.ran = keys.includes(row.key) || LA.gemmPipelineKeys().includes(row.key);
    // Wrong: past the tests' tolerance on the small shapes, or 2048^3 off the reference by more than float16 rounding can explain.
    const good = row.check.small_tol <= 1 && row.check.vs_ref <= 2e-2 && row.check.sampled <= 1e-2;
    row.time = {};
    withPlan(text, () => {
      for (const { n, a, b } of timed) {
        if (Date.now() / 1000 > deadline + 20) break;
        row.time[n] = timeOne(a, b, n);
      }
    });
    row.status = good ? 'ok' : 'wrong';
  } catch (e) {
    const msg = String(e?.message ?? e);
    row.status = e instanceof RangeError ? 'skip' : 'error';
    row.reason = msg.slice(0, 2000);
    // A lost device or dead device thread: the next plans need a fresh process (the shell reruns this script).
    if (e?.kind === 'worker' || /device (was )?lost|Device lost|did not answer/i.test(msg)) deviceBroken = true;
  }
  row.seconds = Number(((performance.now() - began) / 1000).toFixed(1));
  write(row);
  console.log(`[${tag}] ${text.padEnd(28)} ${row.status.padEnd(6)} ${row.check ? `tol ${row.check.small_tol} ref ${row.check.vs_ref} f64 ${row.check.sampled}` : ''} ${row.time ? Object.entries(row.time).map(([n, t]) => `${n}: ${t.tflops} TF`).join(', ') : ''} ${row.reason ? row.reason.split('\n')[0].slice(0, 160) : ''} (${row.seconds} s)`);
  if (deviceBroken) {
    console.error(`[${tag}] the device is broken after ${text}; exiting for a fresh process`);
    process.exit(3);
  }
}
process.exit(0);
