/**
 * Values of the webgpu ops a Qwen3 forward and generation need (webgpu-llm-cases.ts: indexSelect,
 * embedding, cat, stack, indexPut_, int64 copies, scaledDotProductAttention, rmsNorm,
 * llm.reshapeAndCache, llm.pagedAttention) against the CPU in float64, then the tiny Qwen3 (seeded
 * QWEN3_TINY) on webgpu against the CPU: forward logits, eager and compiled on webgpu, and greedy
 * tokens of kiln.generate (its engine decodes through llm.reshapeAndCache and llm.pagedAttention).
 * Needs a real adapter: skips here and on the null backend (webgpu-validate.test.ts checks that
 * everything compiles and encodes there); scripts/device/webgpu.sh runs it on the GPU machine.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { tolFor } from './helpers/assert.js';
import { llmCases } from './webgpu-llm-cases.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

function mismatch(got: Tensor, want: Tensor, atol: number, rtol: number): string | null {
  if (got.shape.join(',') !== want.shape.join(',')) return `shape [${got.shape.join(', ')}], want [${want.shape.join(', ')}]`;
  const g = got.to('cpu').toFlatArray() as number[];
  const w = want.to('cpu').toFlatArray() as number[];
  for (let i = 0; i < w.length; i++) {
    const a = Number(g[i]);
    const b = Number(w[i]);
    if (Number.isNaN(b) ? Number.isNaN(a) : a === b || Math.abs(a - b) <= atol + rtol * Math.abs(b)) continue;
    return `element ${i}: got ${a}, want ${b} (atol ${atol}, rtol ${rtol})`;
  }
  return null;
}

/** The dtype's tolerance, widened for halves (products and softmax round once or twice in f16/bf16). */
function tolerance(dtype: string): { atol: number; rtol: number } {
  if (dtype === 'float32') return { atol: 1e-5, rtol: 1e-5 };
  if (dtype === 'int64') return { atol: 0, rtol: 0 };
  const t = tolFor(dtype);
  return { atol: 4 * t.atol, rtol: 4 * t.rtol };
}

test('webgpu indexing, attention, rmsNorm and paged-cache ops match the CPU in float64', { skip }, () => {
  const failures: string[] = [];
  for (const c of llmCases()) {
    try {
      const got = c.run('webgpu', false);
      const ref = c.run('cpu', true);
      const want = ref.dtype === c.dtype ? ref : ref.to(c.dtype);
      const { atol, rtol } = tolerance(c.dtype);
      const m = mismatch(got, want, atol, rtol);
      if (m) failures.push(`${c.label}: ${m}`);
    } catch (e) {
      failures.push(`${c.label}: threw ${(e as Error).message}`);
    }
  }
  assert.deepEqual(failures, [], `${failures.length} cases differ:\n${failures.join('\n')}`);
});

test('webgpu llm.rmsNorm (its row kernel) matches the float64 CPU op', { skip }, () => {
  assert.equal(kiln.llm.llmChoice('llm.rmsNorm', 'webgpu').name, 'webgpu-kernel');
  kiln.noGrad(() => {
    const failures: string[] = [];
    kiln.manualSeed(3);
    for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
      for (const shape of [[1, 1024], [3, 5, 64], [2, 1]]) {
        const x = kiln.randn(shape).mul(3).to(dtype);
        const w = kiln.randn([shape.at(-1)!]).to(dtype);
        const want = kiln.llm.rmsNorm(x.to('float64'), w.to('float64'), 1e-6).to(dtype);
        const got = kiln.llm.rmsNorm(x.to('webgpu'), w.to('webgpu'), 1e-6).to('cpu');
        const { atol, rtol } = tolerance(dtype);
        const m = mismatch(got, want, atol, rtol);
        if (m) failures.push(`${dtype} ${JSON.stringify(shape)}: ${m}`);
      }
    }
    assert.deepEqual(failures, [], failures.join('\n'));
  });
});

const { Qwen3ForCausalLM, QWEN3_TINY } = kiln.models;
const PROMPT = [[3, 17, 42, 8, 91, 5]];

test('tiny Qwen3 on webgpu: forward logits (eager and compiled) match the CPU; greedy generate gives the CPU tokens', { skip }, () => {
  kiln.noGrad(() => {
    const cpu = Qwen3ForCausalLM.fromConfig(QWEN3_TINY, { seed: 7, initStd: 0.2 }).eval();
    const gpu = Qwen3ForCausalLM.fromConfig(QWEN3_TINY, { seed: 7, initStd: 0.2 }).eval().to('webgpu');
    const ids = kiln.tensor(PROMPT, { dtype: 'int64' });
    const want = cpu.to('float64').forward(ids).to('float32');
    cpu.to('float32');
    const got = gpu.forward(ids.to('webgpu'));
    assert.equal(mismatch(got, want, 2e-4, 2e-4), null, 'eager forward');
    const compiled = kiln.compile((x: Tensor) => gpu.forward(x));
    assert.equal(mismatch(compiled(ids.to('webgpu')), want, 2e-4, 2e-4), null, 'compiled forward');
    const wantTokens = kiln.generate(cpu, PROMPT, { maxNewTokens: 6 }).toFlatArray();
    const gotTokens = kiln.generate(gpu, PROMPT, { maxNewTokens: 6 }).toFlatArray();
    assert.deepEqual(gotTokens, wantTokens, 'greedy tokens');
  });
});

test('tiny Qwen3 in float16 and bfloat16 on webgpu: logits close to the float64 CPU model', { skip }, () => {
  kiln.noGrad(() => {
    const ids = kiln.tensor(PROMPT, { dtype: 'int64' });
    const want = Qwen3ForCausalLM.fromConfig(QWEN3_TINY, { seed: 7, initStd: 0.2 }).eval().to('float64').forward(ids);
    for (const dtype of ['float16', 'bfloat16'] as const) {
      const gpu = Qwen3ForCausalLM.fromConfig(QWEN3_TINY, { seed: 7, initStd: 0.2, dtype }).eval().to('webgpu');
      // WGSL has no f64: the logits come to the cpu first, where float64 exists.
      const got = gpu.forward(ids.to('webgpu')).to('cpu').to('float64');
      const scale = Math.max(...(want.abs().toFlatArray() as number[]));
      const tol = dtype === 'float16' ? 2e-2 : 8e-2;
      assert.equal(mismatch(got, want, tol * scale, tol), null, dtype);
    }
  });
});
