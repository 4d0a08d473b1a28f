#!/usr/bin/env node
// Dev check without a GPU for the LLM library's cuda kernels (src/kernels/cuda/codegen/llm.ts):
// generates every variant (norm modes x vector/scalar x warp/block, act-and-mul forward/backward,
// rope neox/gpt-j x pairs per thread, the rmsNorm backward kernels) for fp32/fp16/bf16/fp64,
// compiles each with `nvcc -arch=sm_90 -Xptxas -v -cubin` and prints registers and spills.
//   npm run build && node scripts/llm-cuda-nvcc-check.mjs
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const L = await import(pathToFileURL(path.join(root, 'dist/src/kernels/cuda/codegen/llm.js')).href);
const out = [];
for (const dtype of ['float32', 'float16', 'bfloat16', 'float64']) {
  for (const mode of ['plain', 'addInPlace', 'addOut']) for (const vector of [false, true]) for (const [warpPerRow, items] of [[true, 1], [true, 4], [false, 2], [false, 4], [false, 8], [false, 0]]) out.push(L.generateNorm({ dtype, mode, vector, warpPerRow, items }));
  // H compiled in (every slot used / the last slot checked), streaming hints, register bounds.
  const vw = 16 / { float32: 4, float16: 2, bfloat16: 2, float64: 8 }[dtype];
  for (const mode of ['plain', 'addInPlace', 'addOut']) {
    for (const [h, tpr, items] of [[512 * 4 * vw, 512, 4], [128 * 4 * vw, 128, 4], [1026 * vw, 288, 4], [512 * vw, 192, 3]]) {
      for (const streaming of [false, true]) out.push(L.generateNorm({ dtype, mode, vector: true, warpPerRow: false, items, tpr, minThreadsPerSm: mode === 'plain' ? 1024 : 0, prefetchWeight: mode !== 'plain', hConst: h, streaming }));
    }
    out.push(L.generateNorm({ dtype, mode, vector: true, warpPerRow: true, items: 4, prefetchWeight: true, hConst: 4 * 32 * vw, streaming: true }));
    out.push(L.generateNorm({ dtype, mode, vector: true, warpPerRow: false, items: 4, tpr: 128, minThreadsPerSm: mode === 'plain' ? 1280 : 0, prefetchWeight: true, hConst: 128 * 4 * vw, unpackTwice: true }));
  }
  const v = 16 / { float32: 4, float16: 2, bfloat16: 2, float64: 8 }[dtype];
  for (const act of ['silu', 'gelu', 'geluTanh']) for (const vec of [1, v]) for (const backward of [false, true]) out.push(L.generateGated({ dtype, act, vec, backward }));
  for (const neox of [true, false]) for (const vp of [1, 2, 4]) out.push(L.generateRope({ dtype, cacheDtype: dtype, posDtype: vp === 2 ? 'int32' : 'int64', neox, half: 64, vp }));
  out.push(L.generateNormBackward(dtype), L.generateNormDw(dtype));
}
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-llm-nvcc-'));
let failed = 0;
for (const g of out) {
  const f = path.join(dir, `${g.name}.cu`);
  fs.writeFileSync(f, g.source);
  try {
    const log = execFileSync('nvcc', ['-arch=sm_90', '-Xptxas', '-v', '-cubin', '-o', '/dev/null', f], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    void log;
  } catch (e) {
    const text = `${e.stdout ?? ''}${e.stderr ?? ''}`;
    if (/error/.test(text)) {
      failed++;
      console.log(`FAIL ${g.name}\n${text.split('\n').filter((l) => /error/.test(l)).slice(0, 3).join('\n')}`);
      continue;
    }
  }
  const info = execFileSync('bash', ['-c', `nvcc -arch=sm_90 -Xptxas -v -cubin -o /dev/null ${f} 2>&1 | grep -E "registers|spill" | tr '\\n' ' '`], { encoding: 'utf8' });
  const regs = /Used (\d+) registers/.exec(info)?.[1];
  const spill = /(\d+) bytes spill stores/.exec(info)?.[1];
  console.log(`${g.name.padEnd(56)} ${regs} regs, ${spill} B spill`);
}
fs.rmSync(dir, { recursive: true, force: true });
console.log(`${out.length} kernels, ${failed} failed`);
process.exit(failed ? 1 : 0);
