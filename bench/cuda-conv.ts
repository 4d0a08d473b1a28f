/**
 * Eager conv2d on cuda, Kiln vs PyTorch, on the two convolutions of the conv-stack workload
 * (x [16, 3, 224, 224] -> Conv2d(3, 64, 7, s2, p3) and [16, 64, 112, 112] -> Conv2d(64, 64, 3, p1)).
 * Each call is timed with CUDA events (median of REPS after warm-up), the same way
 * scripts/bench_conv_torch.py times torch. Rows: channels_last in float32 on TF32 (both defaults),
 * exact float32 (kiln.backends.cuda.allowTf32Conv = false vs torch allow_tf32 = False), float16 and
 * bfloat16; NCHW rows in float32/bfloat16, where Kiln also reports a copy to channels_last
 * followed by the vector loader (`kiln_copy_ms`) against the default direct NCHW read. `kiln_im2col_ms` is the previous
 * im2col + cuBLASLt path on the same call.
 *
 *   python3 scripts/bench_conv_torch.py > /tmp/torch-conv.json
 *   node dist/bench/cuda-conv.js /tmp/torch-conv.json [out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { convImpl, runIgemm } from '../src/kernels/cuda/conv-igemm.js';
import { IGEMM_TILES, type IgemmTileName } from '../src/kernels/cuda/conv-igemm-source.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DType } from '../src/tensor/dtype.js';

const REPS = 100;
const WARMUP = 10;

interface TorchRow {
  conv: string;
  layout: 'nhwc' | 'nchw';
  dtype: DType;
  tf32: boolean | null;
  torch_ms: number;
}

const CONVS: { name: string; x: number[]; w: number[]; stride: number; pad: number }[] = [
  { name: 'stem 3->64 7x7 s2', x: [16, 3, 224, 224], w: [64, 3, 7, 7], stride: 2, pad: 3 },
  { name: 'body 64->64 3x3', x: [16, 64, 112, 112], w: [64, 64, 3, 3], stride: 1, pad: 1 },
];

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function timeMs(fn: () => Tensor): number {
  for (let i = 0; i < WARMUP; i++) fn().dispose();
  kiln.synchronize('cuda');
  const ts: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const s = new kiln.Event('cuda');
    const e = new kiln.Event('cuda');
    s.record();
    const y = fn();
    e.record();
    ts.push(s.elapsedTime(e));
    y.dispose();
  }
  return median(ts);
}

const f = (v: unknown, d = 3): string => (typeof v === 'number' ? v.toFixed(d) : '-');
const printRow = (r: Record<string, unknown>): void =>
  console.log(
    `${String(r.shape).padEnd(48)} ${String(r.dtype).padEnd(9)} ${String(r.tf32 ?? '-').padEnd(5)} ${f(r.torch_ms).padStart(8)} ${f(r.kiln_ms).padStart(8)} ${f(r.speedup, 2).padStart(8)} ${f(r.kiln_tflops, 1).padStart(8)} ${f(r.kiln_im2col_ms).padStart(10)} ${f(r.kiln_copy_ms).padStart(10)}  ${Object.values(r.kiln_tile_ms as Record<string, number>).map((v) => f(v)).join('/')}`,
  );
console.log(`${'shape'.padEnd(48)} ${'dtype'.padEnd(9)} tf32  torch_ms  kiln_ms  speedup  TFLOP/s  im2col_ms  copy_ms  tiles ${Object.keys(IGEMM_TILES).join('/')}`);
const torchRows = JSON.parse(fs.readFileSync(process.argv[2] ?? '/tmp/torch-conv.json', 'utf8')) as TorchRow[];
const rows: Record<string, unknown>[] = [];
const gen = kiln.manualSeed(0);
void gen;
for (const t of torchRows) {
  const c = CONVS.find((x) => x.name === t.conv)!;
  const fmt = t.layout === 'nhwc' ? 'channelsLast' : 'contiguous';
  let x = kiln.randn(c.x, { dtype: t.dtype, device: 'cuda' });
  let w = kiln.mul(kiln.randn(c.w, { dtype: t.dtype, device: 'cuda' }), 0.05);
  const b = kiln.randn([c.w[0]!], { dtype: t.dtype, device: 'cuda' });
  x = kiln.contiguous(x, fmt);
  w = kiln.contiguous(w, fmt);
  const tf32 = t.tf32 !== false;
  kiln.backends.cuda.allowTf32Conv = tf32;
  const conv = (): Tensor => kiln.nn.functional.conv2d(x, w, b, c.stride, c.pad);
  const kilnMs = timeMs(conv);
  // Every block tile on the channels_last tensor-core rows (the tile rule comes from these).
  const tileMs: Partial<Record<IgemmTileName, number>> = {};
  // (R2 also swept the NCHW rows; the final run keeps to channels_last to stay inside its time limit.)
  if (t.layout === 'nhwc' && tf32 && t.dtype !== 'float16') {
    for (const tile of Object.keys(IGEMM_TILES) as IgemmTileName[]) {
      convImpl.tile = tile;
      tileMs[tile] = timeMs(conv);
    }
    convImpl.tile = null;
  }
  convImpl.mode = 'im2col';
  const im2colMs = timeMs(conv);
  convImpl.mode = 'auto';
  let copyMs: number | null = null;
  if (t.layout === 'nchw') {
    const ref = conv();
    copyMs = timeMs(() => {
      const out = kiln.empty([...ref.shape], { dtype: t.dtype, device: 'cuda' });
      return runIgemm({ input: x, weight: w, bias: b, out, stride: [c.stride, c.stride], padding: [c.pad, c.pad, c.pad, c.pad], dilation: [1, 1], groups: 1, nchw: 'copy' });
    });
    ref.dispose();
  }
  const oh = Math.floor((c.x[2]! + 2 * c.pad - c.w[2]!) / c.stride) + 1;
  const flops = 2 * c.x[0]! * oh * oh * c.w[0]! * c.w[1]! * c.w[2]! * c.w[3]!;
  rows.push({
    op: 'conv2d',
    shape: `${c.name} x[${c.x.join(',')}] ${t.layout}`,
    dtype: t.dtype,
    tf32: t.dtype === 'float32' ? tf32 : null,
    torch_ms: t.torch_ms,
    kiln_ms: kilnMs,
    speedup: t.torch_ms / kilnMs,
    kiln_tflops: flops / (kilnMs * 1e-3) / 1e12,
    kiln_im2col_ms: im2colMs,
    kiln_copy_ms: copyMs,
    kiln_tile_ms: tileMs,
  });
  printRow(rows[rows.length - 1]!);
  // Rows so far, so a time limit still leaves a file.
  if (process.argv[3]) fs.writeFileSync(process.argv[3], JSON.stringify(rows, null, 1));
  for (const z of [x, w, b]) z.dispose();
}
kiln.backends.cuda.allowTf32Conv = true;
