/**
 * The norm-prologue GEMV (llm.addRmsNormLinear's cuda kernel, src/kernels/cuda/gemv.ts) against
 * what it replaces in a decode step at batch 1 (issue #17): the residual add + RMSNorm as one
 * kernel (the eager llm.addRmsNorm kernel, a stand-in for the compiled program's generated reduce
 * kernel) followed by the plain or gated GEMV. Qwen3-0.6B's three fused sites: qkv [4096, 1024],
 * gate/up [2 x 3072, 1024] (gated) and the LM head [151936, 1024]. Device time per pair of calls
 * (or per fused call), the host's enqueue gaps hidden behind a spin kernel (cuda-spin.ts), so each
 * row includes the GPU's gap between back-to-back kernels, as inside a CUDA graph; W copies are
 * cycled (at least 256 MB) so W comes from HBM. The last line: the step's 57 sites, fused against
 * unfused.
 *
 *   node dist/bench/cuda-gemv-norm.js [--runs 40] [--batches 7] [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { deviceMsBehindSpin } from './cuda-spin.js';
import { runGemv, runGemvGated, runGemvNorm } from '../src/kernels/cuda/gemv.js';
import { ptrOf } from '../src/kernels/cuda/device.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { getAccelerator } from '../src/runtime/registry.js';
import { getOption } from '../src/runtime/config.js';
import type { Tensor } from '../src/tensor/tensor.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const runs = Number(flag('--runs') ?? 40);
const batches = Number(flag('--batches') ?? 7);
const jsonPath = flag('--json');
const MIN_BYTES = 256 * 2 ** 20;
const K = 1024;
/** [name, output width, gated, sites per step]: 28 qkv (27 after an add + the first layer's plain norm), 28 gate/up, 1 LM head. */
const SHAPES: readonly [string, number, boolean, number][] = [['qkv', 4096, false, 28], ['gate_up', 3072, true, 28], ['lm_head', 151936, false, 1]];

const stream = (getAccelerator('cuda') as unknown as CudaAccelerator).defaultStream(0);
const fast = getOption('KILN_CUDA_FAST_MATH');
interface Row { shape: string; impl: string; us: number }
const rows: Row[] = [];
for (const [name, n, gated, _sites] of SHAPES) {
  const wRows = gated ? 2 * n : n;
  const copies = Math.max(1, Math.min(64, Math.ceil(MIN_BYTES / (wRows * K * 2))));
  const ws: Tensor[] = Array.from({ length: copies }, () => kiln.keep(kiln.mul(kiln.randn([wRows, K], { device: 'cuda' }), 0.02).to('bfloat16')));
  const bf = (shape: number[]): Tensor => kiln.keep(kiln.randn(shape, { device: 'cuda' }).to('bfloat16'));
  const [x, r, g] = [bf([1, K]), bf([1, K]), bf([K])];
  const [y, h, out] = [bf([1, K]), bf([1, K]), bf([1, n])];
  let i = 0;
  const next = (): Tensor => ws[i++ % copies]!;
  const record = (impl: string, fn: () => void): void => {
    for (let j = 0; j < copies + 2; j++) kiln.scope(fn);
    rows.push({ shape: name, impl, us: deviceMsBehindSpin(fn, { runs, batches, spinNs: 5_000_000 }) * 1e3 });
  };
  const plain = (w: Tensor) => ({ m: 1, n, k: K, x: ptrOf(y), ldx: K, w: ptrOf(w), ldw: K, out: ptrOf(out), ldo: n });
  record('add+rmsNorm kernel, then gemv', () => {
    void kiln.llm.addRmsNorm(x, r, g, 1e-6);
    if (gated) runGemvGated(0, stream, plain(next()), fast);
    else runGemv(0, stream, plain(next()));
  });
  record('gemv alone', () => (gated ? runGemvGated(0, stream, plain(next()), fast) : runGemv(0, stream, plain(next()))));
  record('fused (norm in the prologue)', () =>
    runGemvNorm(0, stream, { ...plain(next()), x: ptrOf(x), res: ptrOf(r), ldr: K, gamma: ptrOf(g), eps: 1e-6, hout: ptrOf(h), ldh: K }, gated, fast),
  );
  for (const t of [x, r, g, y, h, out, ...ws]) t.dispose();
}
const pad = (v: string, w: number): string => v.padEnd(w);
console.log(`${pad('shape', 9)}${pad('impl', 32)}us`);
for (const r of rows) console.log(`${pad(r.shape, 9)}${pad(r.impl, 32)}${r.us.toFixed(2)}`);
const us = (shape: string, impl: string): number => rows.find((r) => r.shape === shape && r.impl.startsWith(impl))!.us;
const total = (impl: string): number => SHAPES.reduce((a, [name, , , sites]) => a + sites * us(name, impl), 0);
console.log(`the step's 57 sites: unfused ${(total('add+rmsNorm') / 1e3).toFixed(3)} ms, fused ${(total('fused') / 1e3).toFixed(3)} ms, GEMVs alone ${(total('gemv alone') / 1e3).toFixed(3)} ms`);
if (jsonPath) {
  fs.writeFileSync(jsonPath, JSON.stringify({ bench: 'cuda-gemv-norm', host: os.hostname(), device: deviceInfo(0).name, date: new Date().toISOString(), runs, batches, rows }, null, 2));
  console.log(`wrote ${jsonPath}`);
}
