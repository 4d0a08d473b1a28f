#!/usr/bin/env node
/* global process, performance, console */
/**
 * Times webgpu matmul through the public API and prints one JSON row per workload:
 * `{framework: "kiln", workload: "matmul", device, dtype, m, n, k, tflops, ...}`, the default rows
 * being float32 4096^3 and float16 8192^3 (float16 runs on the subgroup matrix GEMM where the device
 * has it; the row says which kernel with `kernel`). Time is the median over reps of kiln.Event pairs
 * around a batch of back-to-back products: device timestamps where the adapter has timestamp-query
 * (`timing: "device"`), else host time with a synchronize (`timing: "host"`). `kernel` is the GEMM
 * pipeline the row compiled (gemm-codegen / gemm-subgroup-matrix / -staged keys: KILN_WEBGPU_SM_KERNEL
 * picks the float16 one); with --check, `max_rel_err` checks 16 sampled outputs against float64 dot products
 * (relative to sum |a_k b_k|: ~1e-3 for float16 rounding, O(1) for a wrong kernel).
 *
 *   node scripts/bench-webgpu-matmul.mjs [dist] [--quick] [--check] [--shapes dtype:m:n:k,...]
 *
 * (dist defaults to ./dist; --quick runs 512^3 shapes, for SwiftShader.) Run on the GPU machine with
 * the Vulkan backend, e.g. KILN_WEBGPU_BACKEND=vulkan; Kiln's Dawn toggles (dawn-options.ts) expose
 * shader-f16, subgroup matrices and unquantized timestamps on NVIDIA.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const value = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const positional = args.filter((a, i) => !a.startsWith('--') && !(i > 0 && args[i - 1] === '--shapes'));
const root = path.resolve(positional[0] ?? 'dist');
const kiln = await import(pathToFileURL(path.join(root, 'src/index.js')).href);
const { gemmPipelineKeys, subgroupMatrixPlan } = await import(pathToFileURL(path.join(root, 'src/kernels/webgpu/linalg.js')).href);

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const parse = (s) =>
  s.split(',').map((row) => {
    const [dtype, m, n, k] = row.split(':');
    return { dtype, m: Number(m), n: Number(n), k: Number(k) };
  });
const shapes = value('--shapes')
  ? parse(value('--shapes'))
  : flag('--quick')
    ? parse('float32:512:512:512,float16:512:512:512')
    : parse('float32:4096:4096:4096,float16:8192:8192:8192');

const acc = kiln.getAccelerator('webgpu');
const props = acc.properties(0);
const device = `webgpu ${props.name ?? ''} (${acc.bridge.adapter.backend})`.replace(/\s+/g, ' ').trim();
const timing = acc.deviceTimestamps ? 'device' : 'host';
const plan = subgroupMatrixPlan();

for (const { dtype, m, n, k } of shapes) {
  const aHost = kiln.randn([m, k]).to(dtype);
  const bHost = kiln.randn([k, n]).to(dtype);
  const a = aHost.to('webgpu');
  const b = bHost.to('webgpu');
  const flops = 2 * m * n * k;
  // Enough products per timed batch for ~50 ms at 100 TFLOP/s, at least 2, at most 20.
  const inner = Math.max(2, Math.min(20, Math.ceil((0.05 * 100e12) / flops)));
  const reps = flag('--quick') ? 3 : 7;
  const before = new Set(gemmPipelineKeys());
  const first = kiln.matmul(a, b);
  kiln.synchronize('webgpu');
  // The GEMM pipeline this product compiled (a later row of the same kernel compiles none: then the plan's guess).
  const compiled = gemmPipelineKeys().filter((x) => !before.has(x));
  // 16 sampled elements against float64 dot products of the same rounded inputs: the largest
  // error relative to sum |a||b| (a wrong kernel shows as O(1), rounding as ~1e-3 for float16).
  // Only with --check: at 8192^3 the host side of the check outlasted a 50 s cap on the H200.
  let maxRelErr = flag('--check') ? 0 : null;
  for (let s = 0; s < (flag('--check') ? 16 : 0); s++) {
    const i = (s * 7919) % m;
    const j = (s * 104729 + 13) % n;
    const row = aHost.narrow(0, i, 1).to('float64').toFlatArray();
    const col = bHost.narrow(1, j, 1).to('float64').toFlatArray();
    let want = 0;
    let mag = 0;
    for (let x = 0; x < k; x++) {
      want += row[x] * col[x];
      mag += Math.abs(row[x] * col[x]);
    }
    const got = first.narrow(0, i, 1).narrow(1, j, 1).to('cpu').to('float64').toFlatArray()[0];
    maxRelErr = Math.max(maxRelErr, Math.abs(got - want) / (mag + 1e-30));
  }
  first.dispose();
  const ms = [];
  for (let r = 0; r < reps; r++) {
    const outs = [];
    const t0 = performance.now();
    const start = new kiln.Event('webgpu').record();
    for (let i = 0; i < inner; i++) outs.push(kiln.matmul(a, b));
    const end = new kiln.Event('webgpu').record();
    end.synchronize();
    const host = performance.now() - t0;
    ms.push((timing === 'device' ? start.elapsedTime(end) : host) / inner);
    for (const o of outs) o.dispose();
  }
  const t = median(ms);
  const guess = dtype === 'float16' && acc.hasFeature('shader-f16') && process.env.KILN_WEBGPU_SUBGROUP_MATRIX !== '0' && !('reason' in plan) ? `subgroup-matrix ${plan.m}x${plan.n}x${plan.k}` : 'tiled-fma';
  const kernel = compiled.length > 0 ? compiled.join(' ') : guess;
  console.log(JSON.stringify({ framework: 'kiln', workload: 'matmul', device, dtype, m, n, k, tflops: Number((flops / (t * 1e-3) / 1e12).toPrecision(4)), ms: Number(t.toFixed(4)), timing, kernel, max_rel_err: maxRelErr === null ? null : Number(maxRelErr.toPrecision(3)), reps, inner }));
  a.dispose();
  b.dispose();
  aHost.dispose();
  bHost.dispose();
}
process.exit(0);
