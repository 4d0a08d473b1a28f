#!/usr/bin/env node
/* global process */
/**
 * Issue #20 helper of wg-rowbench.mjs: the WGSL Kiln itself renders for a decode step's one-row
 * kernels, with their dispatch records, so the microbenchmark can time Kiln's real kernels beside
 * hand-written ones. Runs Kiln on the configured backend (KILN_WEBGPU_BACKEND; the device's own
 * features decide subgroups and shader-f16, as in a real run), records every kernel source and
 * every dispatch (buffer capacities, metadata words, grid) of:
 *   - the compiled residual add + RMSNorm over [1, N] (kiln.compile: one fused 'workgroup' kernel);
 *   - the eager llm.rmsNorm over [1, N];
 *   - llm.qkNormRotaryCache at Qwen3-0.6B's decode shapes (q 16 x 128, k and v 8 x 128, one slot);
 * each for float16 and float32, and writes them as JSON to the path given (default stdout).
 * Options are read from the environment as Kiln reads them (e.g. KILN_WEBGPU_REDUCE_UNROLL).
 *
 *   node scripts/device/wg-rowbench-dump.mjs [OUT.json] [--n 1024] [--dist dist]
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const value = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const outPath = args[0] && !args[0].startsWith('--') ? args[0] : undefined;
const N = Number(value('--n', '1024'));
const root = path.resolve(value('--dist', 'dist'));
const kiln = await import(pathToFileURL(path.join(root, 'src/index.js')).href);
const acc = kiln.getAccelerator('webgpu');
const dev = 'webgpu';

/** Runs f, returning the kernels dispatched (source, buffers' capacities and which, meta words, grid). */
function capture(f) {
  const sources = new Map();
  const origKernel = acc.kernel.bind(acc);
  const origDispatch = acc.dispatch.bind(acc);
  const dispatches = [];
  acc.kernel = (source, label) => {
    const k = origKernel(source, label);
    sources.set(k.id, { source, label });
    return k;
  };
  const ids = new Map();
  acc.dispatch = (kernel, buffers, meta, groups) => {
    dispatches.push({
      kernel: kernel.id,
      label: sources.get(kernel.id)?.label,
      source: kernel.source ?? sources.get(kernel.id)?.source,
      buffers: buffers.map((b) => {
        if (!ids.has(b)) ids.set(b, ids.size);
        return { id: ids.get(b), capacity: b.capacity };
      }),
      meta: Array.from(meta),
      groups: [...groups],
    });
    return origDispatch(kernel, buffers, meta, groups);
  };
  try {
    kiln.noGrad(() => f());
    kiln.synchronize(dev);
  } finally {
    acc.kernel = origKernel;
    acc.dispatch = origDispatch;
  }
  return dispatches;
}

const out = { backend: acc.bridge.adapter.backend, features: acc.bridge.adapter.features, n: N, kernels: {} };
for (const dtype of ['float16', 'float32']) {
  kiln.manualSeed(1);
  const x = kiln.randn([1, N], { device: dev }).to(dtype);
  const r = kiln.randn([1, N], { device: dev }).to(dtype);
  const w = kiln.randn([N], { device: dev }).to(dtype);
  const f = kiln.compile((p, q, g) => {
    const s = kiln.add(p, q);
    return [kiln.nn.functional.rmsNorm(s, [N], g, 1e-6), s];
  });
  f(x, r, w); // the first call traces and compiles
  const compiled = capture(() => f(x, r, w));
  const eager = capture(() => kiln.llm.rmsNorm(x, w, 1e-6));
  // The compiled step may launch copies or other kernels: keep the reduce kernels (one row of N).
  const pick = (ds) => ds.filter((d) => d.source && /workgroupBarrier/.test(d.source));
  out.kernels[`addRmsNorm ${dtype}`] = pick(compiled);
  out.kernels[`rmsNorm ${dtype}`] = pick(eager);
  // llm.qkNormRotaryCache at Qwen3-0.6B's decode shapes (webgpu-decode-kernels.ts's row).
  const D = 128;
  const qkv = kiln.randn([1, 32 * D], { device: dev }).to(dtype);
  const q = qkv.narrow(-1, 0, 16 * D).view([1, 16, D]);
  const k = qkv.narrow(-1, 16 * D, 8 * D).view([1, 8, D]);
  const v = qkv.narrow(-1, 24 * D, 8 * D).view([1, 8, D]);
  const [qw, kw] = [kiln.randn([D], { device: dev }).to(dtype), kiln.randn([D], { device: dev }).to(dtype)];
  const [cos, sin] = [kiln.randn([1, 1, D], { device: dev }).to(dtype), kiln.randn([1, 1, D], { device: dev }).to(dtype)];
  const kc = kiln.randn([64, 16, 8, D], { device: dev }).to(dtype);
  const vc = kiln.randn([64, 16, 8, D], { device: dev }).to(dtype);
  const slots = kiln.tensor([300], { dtype: 'int32', device: dev });
  out.kernels[`qkNormRotaryCache ${dtype}`] = capture(() => kiln.llm.qkNormRotaryCache(q, k, v, qw, kw, 1e-6, cos, sin, true, kc, vc, slots));
}
const text = JSON.stringify(out, null, 1);
if (outPath) fs.writeFileSync(outPath, text);
else process.stdout.write(text);
process.exit(0);
