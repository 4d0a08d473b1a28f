#!/usr/bin/env node
// Dev check without a GPU: generates the tensor-core skinny GEMM (src/kernels/cuda/mma-gemv.ts)
// for every padded row count 8..64 and every configuration the host can pick (plain with 1 or 2
// tiles per warp, gated with and without fast math; k split over 1..8 warps and 1..4 cluster
// blocks), one namespace each in one .cu per row count, compiles them with
// `nvcc -arch=sm_90 -cubin -Xptxas -v` and reports the most registers and any spills.
//   npm run build && node scripts/mma-gemv-nvcc-check.mjs [--keep]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { mmaGemvSource, mmaGemvName } = await import(pathToFileURL(path.join(root, 'dist/src/kernels/cuda/mma-gemv.js')).href);
const nvcc = process.env.KILN_NVCC ?? 'nvcc';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-mma-gemv-'));
const variants = [
  { nt: 1, gated: false, fast: false },
  { nt: 2, gated: false, fast: false },
  { nt: 2, gated: true, fast: false },
  { nt: 2, gated: true, fast: true },
];
let failed = false;
let kernels = 0;
const only = process.argv.includes('--mp') ? [Number(process.argv[process.argv.indexOf('--mp') + 1])] : [8, 16, 24, 32, 40, 48, 56, 64];
for (const mp of only) {
  const parts = [];
  for (const v of variants) {
    for (const kw of [1, 2, 4, 8]) {
      for (const c of [1, 2, 4]) {
        if (c > 1 && kw < 2) continue;
        const cfg = { mp, kw, c, ...v };
        parts.push(`namespace k${parts.length} {\n${mmaGemvSource(cfg)}\n}\n`);
        kernels++;
      }
    }
  }
  const file = path.join(dir, `mma_gemv_mp${mp}.cu`);
  fs.writeFileSync(file, parts.join('\n'));
  // ptxas -v reports registers and spills on stderr.
  const r = spawnSync(nvcc, ['-arch=sm_90', '-cubin', '-Xptxas', '-v', '-o', file.replace(/\.cu$/, '.cubin'), file], { encoding: 'utf8' });
  const log = `${r.stdout}${r.stderr}`;
  if (r.status !== 0) {
    failed = true;
    console.error(`mp ${mp}: nvcc failed\n${log}`);
    continue;
  }
  const regs = [...log.matchAll(/Used (\d+) registers/g)].map((m) => Number(m[1]));
  const spills = [...log.matchAll(/(\d+) bytes spill stores, (\d+) bytes spill loads/g)].filter((m) => m[1] !== '0' || m[2] !== '0');
  console.log(`mp ${mp}: ${parts.length} kernels compiled, registers ${Math.min(...regs)}..${Math.max(...regs)}, ${spills.length} with spills`);
  if (process.argv.includes('--verbose') || spills.length) {
    const names = [...log.matchAll(/entry function '(\w+)'/g)].map((m) => m[1]);
    names.forEach((n, i) => console.log(`  ${n}: ${regs[i]} registers`));
  }
}
void mmaGemvName;
if (!process.argv.includes('--keep')) fs.rmSync(dir, { recursive: true });
else console.log(`sources in ${dir}`);
console.log(`${kernels} kernels`);
process.exit(failed ? 1 : 0);
