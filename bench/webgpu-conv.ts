/**
 * Eager conv2d on webgpu, the implicit GEMM (conv-gemm.ts) against the direct kernel
 * (KILN_WEBGPU_CONV_GEMM on and off in one process), on the two convolutions of the conv-stack
 * workload: x [16, 3, 224, 224] -> Conv2d(3, 64, 7, s2, p3) and [16, 64, 112, 112] ->
 * Conv2d(64, 64, 3, p1), channels_last, float32 and float16. Per row: the forward, and the forward
 * plus backward (weight gradient, and the input gradient for the 3x3 conv, whose input is an
 * activation; the stem's input is data), each the median of REPS calls timed with webgpu events
 * (device-timed where the adapter has timestamp queries). `--size small` runs batch 1 at a quarter of
 * the spatial size (for SwiftShader, where the full shapes take minutes).
 *
 *   node dist/bench/webgpu-conv.js [--size full|small] [--out out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import type { Tensor } from '../src/tensor/tensor.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const small = arg('size', 'full') === 'small';
const out = arg('out', '');
const REPS = small ? 2 : 10;
const WARMUP = small ? 1 : 2;
const [batch, side] = small ? [1, 56] : [16, 224];

const CONVS = [
  { name: 'stem 3->64 7x7 s2', x: [batch, 3, side, side], w: [64, 3, 7, 7], stride: 2, pad: 3, inputGrad: false },
  { name: 'body 64->64 3x3', x: [batch, 64, side / 2, side / 2], w: [64, 64, 3, 3], stride: 1, pad: 1, inputGrad: true },
];

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function timeMs(fn: () => void): number {
  for (let i = 0; i < WARMUP; i++) fn();
  kiln.synchronize('webgpu');
  const ts: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const s = new kiln.Event('webgpu').record();
    fn();
    const e = new kiln.Event('webgpu').record();
    e.synchronize();
    ts.push(s.elapsedTime(e));
  }
  return median(ts);
}

const rows: Record<string, unknown>[] = [];
console.log(`${'conv'.padEnd(20)} ${'dtype'.padEnd(8)} ${'kernel'.padEnd(7)} ${'fwd ms'.padStart(9)} ${'TFLOP/s'.padStart(8)} ${'fwd+bwd ms'.padStart(11)}`);
for (const dtype of ['float32', 'float16'] as const) {
  for (const c of CONVS) {
    const x = kiln.randn(c.x).to(dtype).to('webgpu').contiguous('channelsLast');
    const w = kiln.randn(c.w).mul(0.1).to(dtype).to('webgpu');
    const [n, , h, wd] = c.x as [number, number, number, number];
    const [o, ci, kh, kw] = c.w as [number, number, number, number];
    const oh = Math.floor((h + 2 * c.pad - kh) / c.stride) + 1;
    const ow = Math.floor((wd + 2 * c.pad - kw) / c.stride) + 1;
    const flops = 2 * n * oh * ow * o * ci * kh * kw;
    for (const gemm of [true, false]) {
      setOption('KILN_WEBGPU_CONV_GEMM', gemm);
      const fwd = timeMs(() => kiln.conv2d(x, w, null, c.stride, c.pad).dispose());
      const xg = c.inputGrad ? x.detach().requiresGrad_() : x;
      const wg = w.detach().requiresGrad_();
      const both = timeMs(() => {
        const y: Tensor = kiln.conv2d(xg, wg, null, c.stride, c.pad);
        y.backward(kiln.onesLike(y));
        xg.grad = null;
        wg.grad = null;
      });
      const row = { conv: c.name, x: c.x, dtype, kernel: gemm ? 'gemm' : 'direct', fwd_ms: fwd, tflops: flops / (fwd * 1e-3) / 1e12, fwd_bwd_ms: both, reps: REPS };
      rows.push(row);
      console.log(`${c.name.padEnd(20)} ${dtype.padEnd(8)} ${row.kernel.padEnd(7)} ${fwd.toFixed(3).padStart(9)} ${row.tflops.toFixed(3).padStart(8)} ${both.toFixed(3).padStart(11)}`);
    }
    setOption('KILN_WEBGPU_CONV_GEMM', undefined);
  }
}
if (out) fs.writeFileSync(out, JSON.stringify({ rows }, null, 2));
process.exit(0);
