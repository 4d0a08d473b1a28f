#!/usr/bin/env node
/**
 * Register use of the CUDA kernels kiln.compile generates for benchmark workloads, from ptxas -v
 * (no GPU needed; nvcc and ptxas on PATH). Build first (npx tsc -p tsconfig.json), then:
 *
 *   node scripts/cudagen-ptxas.mjs [elementwise-4096|transformer-block ...] [--all-configs]
 *
 * Prints, per kernel, the ops it fuses, its spec, and registers / spills / shared memory of the
 * default config (or of every config with --all-configs), at the workloads' GPU sizes in float32
 * and bfloat16.
 */
import * as kiln from '../dist/src/index.js';
import { build, elementwise, transformerBlock } from '../dist/test/compile-cuda-codegen-graphs.js';
import { generateCudaKernel } from '../dist/src/compile/codegen/cuda/generate.js';
import { kernelLayout } from '../dist/src/compile/codegen/cuda/layout.js';
import { H200_TARGET } from '../dist/src/compile/codegen/cuda/configs.js';
import { prelude } from '../dist/src/kernels/cuda/fused/prelude.js';
import { findNvcc, nvccCheck } from '../dist/src/compile/codegen/cuda/nvcc-check.js';

const args = process.argv.slice(2);
const all = args.includes('--all-configs');
const names = args.filter((a) => !a.startsWith('--'));
const workloads = {
  'elementwise-4096': (dt) => build(`elementwise4096_${dt}`, elementwise, [kiln.empty([4096, 4096], { dtype: dt })]),
  'transformer-block': (dt) => build(`transformer_${dt}`, transformerBlock(1024, 16, 4096, dt), [kiln.empty([8, 512, 1024], { dtype: dt })]),
};
const nvcc = findNvcc();
if (!nvcc) {
  console.error('cudagen-ptxas: nvcc is not on PATH (set KILN_NVCC)');
  process.exit(1);
}
for (const w of names.length > 0 ? names : Object.keys(workloads)) {
  for (const dt of ['float32', 'bfloat16']) {
    const cg = workloads[w](dt);
    const codes = cg.sched.kernels.map((g, i) => generateCudaKernel(g, cg.low, kernelLayout(g, (id) => cg.low.values.get(id)), `${cg.name.replace(/\W/g, '_')}_k${i}`, H200_TARGET));
    const variants = codes.flatMap((c) => (all ? c.candidates : c.candidates.slice(0, 1)).map((v) => ({ c, v })));
    const r = nvccCheck([prelude('ptx') + variants.map(({ v }) => v.body).join('\n\n')], H200_TARGET.arch, nvcc);
    if (!r.ok) {
      console.error(r.errors.join('\n'));
      process.exit(1);
    }
    console.log(`\n${w} ${dt}: ${codes.length} generated kernels, ${cg.sched.steps.filter((s) => s.kind === 'extern').length} extern steps`);
    for (const { c, v } of variants) {
      for (const k of v.kernels) {
        const u = r.usage.get(k.name);
        console.log(
          `  ${k.name.padEnd(44)} ${JSON.stringify(v.config).padEnd(62)} regs ${String(u.registers).padStart(3)}  spill ${u.spillStores}/${u.spillLoads}  args ${k.args.size} B` +
            (v === c.candidates[0] ? `  [${c.group.nodes.map((n) => n.op).join(' ')}]` : ''),
        );
      }
    }
  }
}
