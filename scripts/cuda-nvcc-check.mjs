#!/usr/bin/env node
// Dev check without a GPU: generates every pointwise expression of the cuda kernel catalog (rotating
// through storage dtypes and the contiguous/vectorised/strided/64-bit paths), the scan kernels
// and the sort/topk kernels (bitonic, register lists, warp, radix select) in every dtype,
// wraps each in its own namespace in one .cu file, and compiles it with `nvcc -arch=sm_90 -cubin`,
// so syntax and type errors show up before any device time is spent.
//   npm run build && node scripts/cuda-nvcc-check.mjs [--keep]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const imp = (p) => import(pathToFileURL(path.join(root, 'dist', p)).href);
await imp('src/index.js');
const { expressionCatalog } = await imp('src/kernels/cuda/pointwise.js');
const { generatePointwise } = await imp('src/kernels/cuda/codegen/pointwise.js');
const { generateScan } = await imp('src/kernels/cuda/codegen/scan.js');

const sources = [];
const storageFor = { float32: ['float32', 'float16', 'bfloat16'], float64: ['float64'], int32: ['int32', 'uint8', 'bool'], int64: ['int64'] };
const paths = [
  { rank: 0, vec: 1, index64: false },
  { rank: 0, vec: 4, index64: false },
  { rank: 3, vec: 1, index64: false },
  { rank: 2, vec: 1, index64: true },
];
let i = 0;
for (const e of expressionCatalog()) {
  const dt = storageFor[e.compute][i % storageFor[e.compute].length];
  const p = paths[i % paths.length];
  const kinds = ['tensor', 'bcast', 'scalar'];
  const operands = Array.from({ length: e.arity }, (_, k) => ({ kind: p.rank === 0 && p.vec > 1 ? (k === 2 ? 'scalar' : 'tensor') : kinds[(i + k) % 3], dtype: dt }));
  if (e.arity > 0 && i % 5 === 0) operands[0].roundThrough = e.compute === 'float32' ? 'float16' : undefined;
  sources.push(generatePointwise({ op: e.op, expr: e.expr, operands, nParams: e.nParams, compute: e.compute, out: e.op.startsWith('add_bool') ? 'bool' : dt, ...p }));
  i++;
}
// Scans (cumsum / cumprod) are the hand-written row kernels left; reductions, softmax and norms are
// rendered by the fused-group renderer: scripts/cuda-reduce-emu.mjs --nvcc compiles (and runs) them.
const scanDtypes = ['float32', 'float16', 'bfloat16', 'float64', 'int32', 'int64', 'bool'];
let j = 0;
for (const kind of ['cumsum', 'cumprod']) {
  for (const d of scanDtypes) {
    const float = d.startsWith('float') || d === 'bfloat16';
    sources.push(generateScan({ kind, inDtype: d, outDtype: float ? d : 'int64', tpr: [32, 64, 128, 256][j++ % 4] }));
  }
}
const { gatherRowsSource, gatherSource } = await imp('src/kernels/cuda/indexing.js');
for (const [v, ix] of [['float32', 'int64'], ['bfloat16', 'int32'], ['float16', 'int64']]) sources.push(gatherRowsSource(v, ix), gatherSource(v, ix, 3));
const { im2colSource } = await imp('src/kernels/cuda/nn.js');
for (const d of ['float32', 'bfloat16', 'float16', 'float64']) sources.push(im2colSource(d));
const { poolSource } = await imp('src/kernels/cuda/pool.js');
for (const d of ['float32', 'bfloat16', 'int64']) sources.push(poolSource('max', d, true), poolSource('max', d, false), poolSource('avg', d, false));
const { bitonicSource, selectSource, warpSelectSource, pickSource } = await imp('src/kernels/cuda/codegen/sort.js');
const { radixHistSource, radixCollectSource, radixFinishSource } = await imp('src/kernels/cuda/codegen/topk-radix.js');
for (const d of ['float32', 'bfloat16', 'float16', 'float64', 'int32', 'int64', 'uint8', 'bool']) {
  sources.push(bitonicSource(d), selectSource(d, 16), warpSelectSource(d, 4), radixHistSource(d), radixCollectSource(d), radixFinishSource(d));
}
sources.push(pickSource());
const text = sources.map((s, k) => `namespace k${k} {\n${s.source}\n}\n`).join('\n');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-nvcc-'));
const file = path.join(dir, 'all.cu');
fs.writeFileSync(file, text);
const t0 = Date.now();
try {
  execFileSync('nvcc', ['-arch=sm_90', '-cubin', '-std=c++17', '-o', path.join(dir, 'all.cubin'), file], { stdio: 'inherit' });
} catch {
  console.error(`nvcc failed on ${file} (${sources.length} kernels)`);
  process.exit(1);
}
console.log(`nvcc -arch=sm_90 -cubin: ${sources.length} generated kernels compiled in ${((Date.now() - t0) / 1000).toFixed(1)} s (${file})`);
if (!process.argv.includes('--keep')) fs.rmSync(dir, { recursive: true, force: true });
