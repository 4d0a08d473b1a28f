#!/usr/bin/env node
// Dev check without a GPU: writes every CUDA C source of the sort/topk and MoE/mHC kernels
// (each dtype and variant) to its own .cu file and compiles it with `nvcc -arch=sm_90 -Xptxas -v
// -cubin`, printing registers and spills per kernel.
//   npx tsc -p tsconfig.json && node scripts/moecuda-nvcc-check.mjs [filter]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const imp = (p) => import(pathToFileURL(path.join(root, 'dist', p)).href);
const filter = process.argv[2] ?? '';
const sources = [];
const sort = await imp('src/kernels/cuda/codegen/sort.js');
for (const d of ['float32', 'float16', 'bfloat16', 'float64', 'int32', 'int64', 'uint8', 'bool']) {
  sources.push(sort.bitonicSource(d), sort.warpSelectSource(d, 1), sort.warpSelectSource(d, 8), sort.warpSelectSource(d, 32));
  for (const L of [8, 64]) sources.push(sort.selectSource(d, L));
  if (d === "float32") sources.push(sort.pickSource());
}
try {
  const moe = await imp('src/kernels/cuda/codegen/llm-moe.js');
  sources.push(...moe.allMoeSources());
} catch (e) {
  if (e.code !== 'ERR_MODULE_NOT_FOUND') throw e;
}
try {
  const mhc = await imp('src/kernels/cuda/codegen/llm-mhc.js');
  sources.push(...mhc.allMhcSources());
} catch (e) {
  if (e.code !== 'ERR_MODULE_NOT_FOUND') throw e;
}
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'moecuda-'));
let failed = 0;
for (const s of sources) {
  if (!s.name.includes(filter)) continue;
  const f = path.join(dir, `${s.name}.cu`);
  fs.writeFileSync(f, s.source);
  try {
    const out = execFileSync('nvcc', ['-arch=sm_90', '-Xptxas', '-v', '-cubin', '-o', f.replace(/\.cu$/, '.cubin'), f], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    void out;
  } catch (e) {
    const msg = `${e.stderr ?? ''}`;
    if (e.status !== 0) {
      failed++;
      console.log(`FAIL ${s.name}\n${msg}`);
      continue;
    }
  }
  const log = execFileSync('nvcc', ['-arch=sm_90', '-Xptxas', '-v', '-cubin', '-o', '/dev/null', f], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  void log;
}
// ptxas prints to stderr; run once more collecting it for the register table.
for (const s of sources) {
  if (!s.name.includes(filter)) continue;
  const f = path.join(dir, `${s.name}.cu`);
  try {
    const r = execFileSync('bash', ['-c', `nvcc -arch=sm_90 -Xptxas -v -cubin -o /dev/null ${f} 2>&1 | grep -E "registers|spill" | tr -s ' ' | paste -sd ' '`], { encoding: 'utf8' });
    console.log(`${s.name}: ${r.replace(/ptxas info\s*:/g, '').trim()}`);
  } catch {
    /* reported above */
  }
}
console.log(failed ? `${failed} source(s) failed` : `all ${sources.filter((s) => s.name.includes(filter)).length} sources compiled`);
process.exitCode = failed ? 1 : 0;
