/**
 * kiln.compile's add + RMSNorm + linear pass (src/llm/add-rms-norm-linear-pass.ts) on webgpu, where
 * the webgpu kernel of llm.addRmsNormLinear (kernels/webgpu/llm-add-rms-norm-linear.ts) takes the
 * site: a compiled tiny Qwen3 decode step with KILN_ADD_RMSNORM_LINEAR=1 against the step without,
 * float32 and float16 (logits within rounding, five dispatches fewer per replayed step: both norms
 * of both layers and the final norm run in GEMV prologues); and the webgpu engine's compiled decode
 * on the tiny checkpoint with the option, float32, giving transformers' greedy tokens (what eager
 * decode gives: webgpu-generate.test.ts). The kernel's values: webgpu-add-rms-norm-linear.test.ts.
 * Needs an adapter that computes (SwiftShader here: about a minute).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { gemmPipelineKeys } from '../src/kernels/webgpu/linalg.js';
import { addRmsNormLinearFires } from '../src/llm/add-rms-norm-linear-pass.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../src/tensor/dtype.js';
import { readGenerateReference } from './helpers/generate-ref.js';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { withEnv } from './helpers/env.js';
import { DECODE_COMPILE_OPTIONS, decodeArgs, decodePair, maxAbsDiff } from './helpers/decode-pair.js';

const skip = webgpuSkipReason();
const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const DENSE = path.join(fixtures, 'qwen3-tiny');

test('the pass fires on webgpu for float32 / float16 / bfloat16 at 1..8 rows of whole 16-byte words, not beyond', { skip }, () => {
  for (const dtype of ['float32', 'float16', 'bfloat16'] as DType[]) {
    for (const rows of [1, 2, 4]) assert.ok(addRmsNormLinearFires('webgpu', dtype, rows, 1024), `${dtype} rows ${rows}`);
    assert.equal(addRmsNormLinearFires('webgpu', dtype, 9, 1024), false, `${dtype} 9 rows`);
    assert.equal(addRmsNormLinearFires('webgpu', dtype, 1, 30), false, `${dtype} K = 30`);
  }
  assert.equal(addRmsNormLinearFires('webgpu', 'float64', 1, 1024), false);
  assert.equal(addRmsNormLinearFires('cpu', 'float32', 1, 1024), false);
});

test('a compiled Qwen3 decode step on webgpu with KILN_ADD_RMSNORM_LINEAR=1: five dispatches fewer, logits equal the step without it', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  for (const dtype of ['float32', 'float16'] as DType[]) {
    const { caches, step } = decodePair('webgpu', dtype, 'random');
    const fused = withEnv('KILN_ADD_RMSNORM_LINEAR', '1', () => kiln.compile(step(caches[0]), DECODE_COMPILE_OPTIONS));
    const plain = withEnv('KILN_ADD_RMSNORM_LINEAR', '0', () => kiln.compile(step(caches[1]), DECODE_COMPILE_OPTIONS));
    const dispatches: number[][] = [[], []];
    // Two rows and a padding row; three steps, so the recording replays.
    for (let s = 0; s < 3; s++) {
      const args = decodeArgs(s, 3, 'webgpu');
      let d0 = acc.dispatchCount;
      const a = withEnv('KILN_ADD_RMSNORM_LINEAR', '1', () => kiln.noGrad(() => fused(...args))).to('cpu').to('float32').toFlatArray() as number[];
      dispatches[0]!.push(acc.dispatchCount - d0);
      d0 = acc.dispatchCount;
      const b = withEnv('KILN_ADD_RMSNORM_LINEAR', '0', () => kiln.noGrad(() => plain(...args))).to('cpu').to('float32').toFlatArray() as number[];
      dispatches[1]!.push(acc.dispatchCount - d0);
      const m = maxAbsDiff(a, b);
      const scale = Math.max(...b.map(Math.abs));
      assert.ok(scale > 1e-3, `${dtype} step ${s}: real logits`);
      assert.ok(m <= (dtype === 'float32' ? 1e-5 : 1e-2) * scale, `${dtype} step ${s}: max |fused - unfused| ${m} (logits up to ${scale})`);
    }
    assert.equal(dispatches[1]![2]! - dispatches[0]![2]!, 5, `${dtype}: dispatches per replayed step fused ${dispatches[0]!.join(',')}, unfused ${dispatches[1]!.join(',')}`);
  }
});

test('KILN_ADD_RMSNORM_LINEAR unset (the default): a compiled batch-1 decode step on webgpu has the norms in the GEMV prologue; at 3 rows it keeps them', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const { caches, step } = decodePair('webgpu', 'float32', 'random');
  const byDefault = withEnv('KILN_ADD_RMSNORM_LINEAR', undefined, () => kiln.compile(step(caches[0]), DECODE_COMPILE_OPTIONS));
  const plain = withEnv('KILN_ADD_RMSNORM_LINEAR', '0', () => kiln.compile(step(caches[1]), DECODE_COMPILE_OPTIONS));
  for (const [rows, fewer] of [[1, 5], [3, 0]] as const) {
    const counts: number[] = [];
    for (const [i, f] of [byDefault, plain].entries()) {
      for (let s = 0; s < 3; s++) {
        const d0 = acc.dispatchCount;
        withEnv('KILN_ADD_RMSNORM_LINEAR', i === 0 ? undefined : '0', () => kiln.noGrad(() => f(...decodeArgs(s, rows, 'webgpu'))));
        if (s === 2) counts.push(acc.dispatchCount - d0);
      }
    }
    assert.equal(counts[1]! - counts[0]!, fewer, `${rows} rows: dispatches per replayed step: default ${counts[0]}, =0 ${counts[1]}`);
  }
});

test("the webgpu engine's compiled decode with KILN_ADD_RMSNORM_LINEAR=1 gives transformers' greedy tokens (float32, tiny Qwen3)", { skip }, () => {
  const ref = readGenerateReference(DENSE);
  withEnv('KILN_ADD_RMSNORM_LINEAR', '1', () => {
    const model = kiln.models.loadQwen3(DENSE, { dtype: 'float32', device: 'webgpu' });
    const engine = new kiln.serve.Engine(model, { numBlocks: 48, decode: 'compiled' });
    try {
      const outs = engine.generateAll(
        ref.cases.map((c) => c.prompt),
        { maxNewTokens: ref.new_tokens },
      );
      ref.cases.forEach((c, i) => assert.deepEqual(outs[i]!.outputIds, c.generated, `prompt ${i}`));
      // The norm-prologue GEMV ran: float32, K = 64 (16 words), with a residual.
      assert.ok(gemmPipelineKeys().some((k) => k.startsWith('gemv') && k.includes(',f32,') && k.includes(',norm16r')), `norm GEMV pipelines: ${gemmPipelineKeys().join('; ')}`);
      const c = engine.decodeRunner!.compileCounters!;
      assert.equal(c.fallbacks, 0, 'fallbacks');
      assert.equal(c.eagerCalls, 0, 'eager calls');
    } finally {
      engine.dispose();
    }
  });
});
