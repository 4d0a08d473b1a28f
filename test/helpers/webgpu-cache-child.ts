/**
 * Child process of test/webgpu-compile-cache.test.ts: compiles a pointwise chain and a softmax row
 * kernel on webgpu (mode from argv[2]), runs it on fixed inputs (`webgpuCacheInputs`), and
 * reports on its last stdout line the values, the compiled function's disk counters, the program's
 * decisions and what was rendered, adopted and compiled (counters, never timing). The parent
 * computes the cpu reference (here it would build the native cpu kernels into the fresh cache).
 */
import * as kiln from '../../src/index.js';
import { fusedStats } from '../../src/kernels/webgpu/fused/run.js';
import type { WgslProgram } from '../../src/compile/codegen/wgsl/program.js';
import type { WebgpuAccelerator } from '../../src/runtime/webgpu/webgpu-accelerator.js';
import { webgpuCacheFn, webgpuCacheInputs } from './webgpu-cache-fn.js';

const mode = (process.argv[2] ?? 'default') as 'default' | 'max-autotune';

const f = webgpuCacheFn;
const cf = kiln.compile(f, { mode });
const [x, b] = webgpuCacheInputs();
const xs = [x.to('webgpu'), b.to('webgpu')] as const;
const y = kiln.noGrad(() => cf(...xs));
const values = y.toFlatArray();
// A second call decides, renders and tunes nothing more.
const again = kiln.noGrad(() => cf(...xs)).toFlatArray();
if (again.some((v, i) => v !== values[i])) throw new Error('the second call computed other numbers');
const p = cf.programs().inference[0] as WgslProgram;
const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
console.log(
  JSON.stringify({
    values,
    counters: { diskHits: cf.counters.diskHits, diskMisses: cf.counters.diskMisses },
    stats: p.stats,
    fused: fusedStats,
    pipelines: acc.pipelineStats,
  }),
);
