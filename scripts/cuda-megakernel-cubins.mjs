#!/usr/bin/env node
// Dev tool without a GPU (issue #17): builds the decode megakernel for Qwen3-0.6B's sizes on a
// 132-SM grid (the H100 / H200) with nvcc for sm_90, one cubin per named form, into dist/cubins,
// and prints ptxas's registers and spills for each. scripts/device/s39.sh (and s38.sh) dump the
// SASS of dist/cubins/*.cubin with cuobjdump on the device machine, which has it (this one does
// not), to read what a form's loads, fences and polls compile to.
//   npm run build && node scripts/cuda-megakernel-cubins.mjs [default flag relrlx hoist ...]
// Forms: 'default' (the runtime's default), or a name from FORMS below.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { decodeMegakernelSource } = await import(pathToFileURL(path.join(root, 'dist/src/kernels/cuda/codegen/decode-megakernel.js')).href);

const dims = { hidden: 1024, heads: 16, kvHeads: 8, headDim: 128, intermediate: 3072, layers: 28, vocab: 151936, eps: 1e-6, blockSize: 16, numBlocks: 2048, maxBlocks: 2048, grid: 132 };
// The runtime's default variant since session 38 (src/kernels/cuda/decode-megakernel.ts with the config defaults).
const base = { loads: 'asm', trace: false, stream: 'next', kvSlots: 'shared', kvLoad: 'early', constLoad: 'early', residLoad: 'early', joinLoads: 'joint', earlyAt: 'norm', sync: 'grid', pace: 6 };
const FORMS = {
  default: {},
  release: { arrive: 'release' },
  relrlx: { arrive: 'release', poll: 'relaxed' },
  flag: { arrive: 'flag' },
  hoist: { joinLoads: 'hoist' },
};
const names = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['default', 'flag', 'relrlx', 'hoist'];
const out = path.join(root, 'dist/cubins');
fs.mkdirSync(out, { recursive: true });
for (const n of names) {
  const form = FORMS[n];
  if (form === undefined) throw new Error(`unknown form '${n}' (forms: ${Object.keys(FORMS).join(', ')})`);
  const { source } = decodeMegakernelSource(dims, { ...base, ...form });
  const cu = path.join(out, `mk_${n}.cu`);
  fs.writeFileSync(cu, `#include <cuda_bf16.h>\n${source}`);
  // ptxas reports its usage on stderr.
  const r = spawnSync('nvcc', ['-arch=sm_90', '-cubin', '--resource-usage', '-o', path.join(out, `mk_${n}.cubin`), cu], { encoding: 'utf8' });
  fs.rmSync(cu);
  if (r.status !== 0) throw new Error(`nvcc failed on form '${n}':\n${r.stdout}${r.stderr}`);
  const log = `${r.stdout}${r.stderr}`;
  const usage = log.split('\n').filter((l) => /registers|spill/.test(l)).map((l) => l.trim());
  console.log(`${n}: ${usage.join('; ')}`);
}
