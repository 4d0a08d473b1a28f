#!/usr/bin/env node
// Dev check without a GPU: generates the implicit-GEMM conv2d kernel for every (dtype, math, A
// loader, epilogue) variant on the conv-stack shapes plus odd/strided/dilated ones, and the weight
// prep kernels, and compiles each with `nvcc -arch=sm_90 -cubin -Xptxas -v` (registers, spills).
//   npx tsc -p tsconfig.json && node scripts/cuda-conv-nvcc.mjs [--keep]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { igemmSource, weightPrepSource, IGEMM_TILES, simtTile } = await import(pathToFileURL(path.join(root, 'dist/src/kernels/cuda/conv-igemm-source.js')).href);

const base = { cg: 64, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, dh: 1, dw: 1, h: 112, w: 112, oh: 112, ow: 112, cout: 64, bias: false, affine: true, relu: true, pairStore: true, wide: false };
const cl = (c, h, w) => [h * w * c, 1, w * c, c];
const specs = [];
for (const [dtype, maths] of [['bfloat16', ['mma16']], ['float16', ['mma16']], ['float32', ['tf32', 'simt']]]) {
  for (const math of maths) {
    for (const tile of Object.keys(IGEMM_TILES).filter((t) => math !== 'simt' || simtTile(t))) {
      if (dtype === 'float16' && tile !== 'm128w32') continue;
      specs.push({ ...base, dtype, math, tile, aLoader: 'vec', xs: cl(64, 112, 112), os: cl(64, 112, 112) });
      specs.push({ ...base, dtype, math, tile, aLoader: 'scalar', cg: 3, kh: 7, kw: 7, sh: 2, sw: 2, pt: 3, pl: 3, h: 224, w: 224, xs: cl(3, 224, 224), os: cl(64, 112, 112), bias: true, affine: false, relu: false });
      if (tile === 'm128w32') specs.push({ ...base, dtype, math, tile, aLoader: 'scalar', cg: 5, cout: 7, h: 13, w: 11, oh: 6, ow: 5, sh: 2, sw: 2, dh: 2, dw: 2, xs: [5 * 13 * 11, 13 * 11, 11, 1], os: [7 * 30, 30, 5, 1], bias: true, affine: false, relu: false, pairStore: false, wide: true });
    }
  }
}
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-conv-nvcc-'));
let failed = 0;
const units = [...specs.map((s) => igemmSource(s)), ...['float32', 'float16', 'bfloat16'].map((d) => weightPrepSource(d, d === 'float32'))];
for (const [i, u] of units.entries()) {
  const file = path.join(dir, `u${i}.cu`);
  fs.writeFileSync(file, u.source);
  // ptxas -v reports on stderr.
  const r = spawnSync(process.env.KILN_NVCC ?? 'nvcc', ['-arch=sm_90', '-cubin', '-Xptxas', '-v', '-o', path.join(dir, `u${i}.cubin`), file], { encoding: 'utf8' });
  if (r.status !== 0) {
    failed++;
    console.log(`FAIL ${u.name}\n${r.stderr}`);
    continue;
  }
  const regs = /Used (\d+) registers/.exec(r.stderr)?.[1];
  const spill = /(\d+) bytes spill stores/.exec(r.stderr)?.[1];
  const smem = /(\d+) bytes smem/.exec(r.stderr)?.[1] ?? '0';
  console.log(`${u.name.slice(0, 60).padEnd(60)} regs ${regs} spill ${spill} smem ${smem}`);
}
if (!process.argv.includes('--keep')) fs.rmSync(dir, { recursive: true, force: true });
else console.log(`sources in ${dir}`);
console.log(failed ? `${failed} of ${units.length} failed` : `all ${units.length} compiled`);
process.exit(failed ? 1 : 0);
