/**
 * Where llm.moeSum's time goes on cuda, and which kernel shape is fastest: an A/B bench for issue
 * #6's moeSum rows (x [T, K, H] summed over K). For each case it reports
 *   - per call: events around one kiln.llm.moeSum call, median (as bench/llm-moe-cuda.ts times it,
 *     so the host's dispatch and launch latency are inside the interval);
 *   - device: `runs` calls queued behind a spin kernel between two events (host gaps hidden);
 *   - host: microseconds of host time per call (a small case, 2000 calls queued, no sync);
 * and, for each candidate kernel source, its device time launched raw (no dispatch).
 *
 *   node dist/bench/cuda-moe-sum.js [--reps 100] [--runs 20] [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { deviceMsBehindSpin, perCallMs } from './cuda-spin.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel } from '../src/runtime/cuda/launch.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { getAccelerator } from '../src/runtime/registry.js';
import { moeSumSource } from '../src/kernels/cuda/codegen/llm-moe.js';
import { gridFor, ptrOf } from '../src/kernels/cuda/device.js';
import type { DType } from '../src/tensor/dtype.js';
import { itemSize } from '../src/tensor/dtype.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const reps = Number(flag('--reps') ?? 100);
const runs = Number(flag('--runs') ?? 20);

const acc = getAccelerator('cuda') as unknown as CudaAccelerator;
const stream = acc.defaultStream(0);

const perCall = (fn: () => void): number => perCallMs(fn, reps);

const deviceMs = (fn: () => void): number => deviceMsBehindSpin(fn, { runs, batches: 7 });

/** Float32 candidates with moeSum's parameter list (x, out, T, K, H, sx0, sx1, sx2); contiguous x. */
interface Variant {
  name: string;
  source: string;
  fn: string;
  /** Threads per block and vec4 chunks per thread. */
  block: number;
  per: number;
  oneShot: boolean;
}
const P = `const float* __restrict__ x, float* __restrict__ out, long long T, int K, long long H, long long sx0, long long sx1, long long sx2`;
function oneShot(name: string, load: string, per: number, block: number): Variant {
  const fn = `moe_${name.replace(/\W/g, '_')}`;
  const source = `
extern "C" __global__ void __launch_bounds__(${block}) ${fn}(${P}) {
  const int hv4 = (int)(H / 4);
  const int i = blockIdx.x * ${block} + threadIdx.x;
  const int n = (int)(T * hv4 / ${per});
  if (i >= n) return;
  const int cols = hv4 / ${per};
  const int tok = i / cols, c = (i - tok * cols) * ${per};
  const float4* xb = reinterpret_cast<const float4*>(x + tok * sx0) + c;
  float4 acc[${per}];
#pragma unroll
  for (int u = 0; u < ${per}; u++) acc[u] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
  for (int j = 0; j < K; j++) {
#pragma unroll
    for (int u = 0; u < ${per}; u++) {
      const float4 a = ${load.replace('PTR', `xb + j * (sx1 / 4) + u`)};
      acc[u].x += a.x; acc[u].y += a.y; acc[u].z += a.z; acc[u].w += a.w;
    }
  }
#pragma unroll
  for (int u = 0; u < ${per}; u++) reinterpret_cast<float4*>(out + tok * H)[c + u] = acc[u];
}`;
  return { name, source, fn, block, per, oneShot: true };
}
const VARIANTS: Variant[] = [
  oneShot('oneshot-b256', '*(PTR)', 1, 256),
  oneShot('oneshot-b512', '*(PTR)', 1, 512),
  oneShot('oneshot-b128', '*(PTR)', 1, 128),
  oneShot('oneshot-cs', '__ldcs(PTR)', 1, 256),
  oneShot('oneshot-ldg', '__ldg(PTR)', 1, 256),
  oneShot('oneshot-2vec', '*(PTR)', 2, 256),
  oneShot('oneshot-2vec-cs', '__ldcs(PTR)', 2, 256),
];

interface Row {
  dtype: DType;
  shape: number[];
  gbytes: number;
  call_ms: number;
  device_ms: number;
  host_us?: number;
  raw: Record<string, number>;
}
const rows: Row[] = [];
const SHAPES: [number, number, number][] = [
  [1, 8, 4096],
  [64, 8, 4096],
  [1024, 8, 4096],
];
for (const dtype of ['float32', 'bfloat16'] as DType[]) {
  for (const shape of SHAPES) {
    const [T, K, H] = shape;
    const x = kiln.randn(shape, { dtype: 'float32' }).to(dtype).to('cuda');
    const gbytes = ((T * K * H + T * H) * itemSize(dtype)) / 1e9;
    const op = (): void => void kiln.noGrad(() => kiln.llm.moeSum(x));
    for (let i = 0; i < 10; i++) kiln.scope(op);
    kiln.synchronize('cuda');
    const row: Row = { dtype, shape, gbytes, call_ms: perCall(op), device_ms: deviceMs(op), raw: {} };
    if (T === 1) {
      const n = 2000;
      const t0 = performance.now();
      for (let i = 0; i < n; i++) kiln.scope(op);
      row.host_us = ((performance.now() - t0) * 1000) / n;
      kiln.synchronize('cuda');
    }
    const out = kiln.empty([T, H], { dtype, device: 'cuda' });
    const args = [ptrOf(x), ptrOf(out), T, K, H, K * H, H, 1];
    const cur = moeSumSource(dtype, 16 / itemSize(dtype));
    const curK = kernelFromSource(0, cur.source, cur.name, cur.params);
    const kernels: [string, CudaKernel, number, number][] = [['current', curK, 256, gridFor(0, (T * H) / (16 / itemSize(dtype)), 256)]];
    if (dtype === 'float32') {
      for (const v of VARIANTS) {
        const k = kernelFromSource(0, v.source, v.fn, cur.params);
        kernels.push([v.name, k, v.block, Math.ceil((T * H) / 4 / v.per / v.block)]);
      }
    }
    for (const [name, k, block, grid] of kernels) {
      const run = (): void => launch(k, args, { grid, block }, stream);
      run();
      kiln.synchronize('cuda');
      // Each candidate must compute the sum (checked against the op's own result).
      const want = kiln.noGrad(() => kiln.llm.moeSum(x)).to('float32').toFlatArray();
      const got = out.to('float32').toFlatArray();
      let bad = 0;
      for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) bad++;
      row.raw[name] = bad === 0 ? deviceMs(run) : Number.NaN;
      row.raw[`${name}:call`] = perCall(run);
    }
    out.dispose();
    x.dispose();
    rows.push(row);
  }
}

console.log('dtype     shape            call ms  device ms  TB/s(dev)  host us | raw device ms per kernel');
for (const r of rows) {
  const raw = Object.entries(r.raw)
    .filter(([k]) => !k.endsWith(':call'))
    .map(([k, v]) => `${k} ${v.toFixed(4)}`)
    .join('  ');
  console.log(
    `${r.dtype.padEnd(9)} ${JSON.stringify(r.shape).padEnd(15)} ${r.call_ms.toFixed(4).padStart(8)} ${r.device_ms.toFixed(4).padStart(10)} ${(r.gbytes / r.device_ms).toFixed(2).padStart(10)} ${(r.host_us ?? Number.NaN).toFixed(1).padStart(8)} | ${raw}`,
  );
}
const outPath = flag('--json');
if (outPath) {
  const meta = { date: new Date().toISOString(), host: os.hostname(), command: `node dist/bench/cuda-moe-sum.js ${argv.join(' ')}`.trim(), reps, runs };
  fs.writeFileSync(outPath, JSON.stringify({ meta, rows }, null, 1));
}
