/**
 * Qwen3-MoE generation on webgpu: the engine runs the tiny MoE checkpoint (2 layers, 4 experts, 2
 * per token, routing renormalised: llm.topkSoftmax and llm.fusedMoe, which run on webgpu as their
 * reference decompositions over topk, softmax, matmul and where) and gives transformers' greedy
 * tokens (generate.json, the same goldens as decode-runner.test.ts' cpu run) in float32 with decode
 * 'eager' and 'compiled' (one trace per batch bucket, no graph break, fallback or eager call) and
 * prefill 'step' and 'rows'; bfloat16 follows them up to a near tie.
 *
 * Needs a real adapter (a GPU, or SwiftShader's CPU Vulkan driver: about 20 s per engine run);
 * skips without one and on Dawn's null backend.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { checkTokens, matchedSteps, NEAR_TIE, readGenerateReference } from './helpers/generate-ref.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-moe-tiny')))!;
const MOE = path.join(fixtures, 'qwen3-moe-tiny');
const skip = webgpuSkipReason();
const ref = readGenerateReference(MOE);
const prompts = ref.cases.map((c) => c.prompt);

test("webgpu engine, Qwen3-MoE float32: decode 'eager' and 'compiled', prefill 'step' and 'rows', give transformers' greedy tokens", { skip }, (t) => {
  const model = kiln.models.loadQwen3(MOE, { dtype: 'float32', device: 'webgpu' });
  assert.equal(model.config.numExperts, 4, 'the checkpoint is the MoE one');
  const configs = [
    { decode: 'eager', prefill: 'step' },
    { decode: 'compiled', prefill: 'step' },
    { decode: 'compiled', prefill: 'rows' },
  ] as const;
  for (const { decode, prefill } of configs) {
    const label = `decode ${decode}, prefill ${prefill}`;
    const engine = new kiln.serve.Engine(model, { numBlocks: 48, decode, prefill });
    try {
      const outs = engine.generateAll(prompts, { maxNewTokens: ref.new_tokens });
      ref.cases.forEach((c, i) => assert.deepEqual(outs[i]!.outputIds, c.generated, `${label}: prompt ${i}`));
      const stats = engine.stats;
      const runner = engine.decodeRunner!;
      assert.ok(stats.decodeSteps >= ref.new_tokens - 2, `${label}: ${stats.decodeSteps} decode steps`);
      assert.equal(stats.rowsSteps > 0, prefill === 'rows', `${label}: ${stats.rowsSteps} row steps`);
      if (decode === 'compiled') {
        const c = runner.compileCounters!;
        assert.equal(c.graphBreaks + c.fallbacks + c.eagerCalls, 0, `${label}: graph breaks, fallbacks, eager calls (${JSON.stringify(c)})`);
        // The routing (which experts, with what weights) is tensor values: one trace per bucket.
        assert.equal(c.traces, runner.bucketSizes.length, `${label}: ${c.traces} traces for buckets ${runner.bucketSizes.join(', ')}`);
        assert.equal(c.calls, runner.counters.steps, `${label}: every runner step is a compiled call`);
        t.diagnostic(`${label}: ${runner.counters.steps} runner steps, buckets ${runner.bucketSizes.join(', ')}, ${c.traces} traces`);
      }
    } finally {
      engine.dispose();
    }
  }
});

test(`webgpu engine, Qwen3-MoE bfloat16, compiled decode: transformers' greedy tokens up to a near tie (top-2 gap < ${NEAR_TIE.bfloat16})`, { skip }, (t) => {
  const model = kiln.models.loadQwen3(MOE, { dtype: 'bfloat16', device: 'webgpu' });
  const engine = new kiln.serve.Engine(model, { numBlocks: 48, decode: 'compiled' });
  try {
    const outs = engine.generateAll(prompts, { maxNewTokens: ref.new_tokens }).map((o) => o.outputIds);
    const bad = ref.cases.map((c, i) => checkTokens(outs[i]!, c, NEAR_TIE.bfloat16)).flatMap((m, i) => (m ? [`prompt ${i}: ${m}`] : []));
    assert.deepEqual(bad, [], "bfloat16 left transformers' tokens away from a near tie");
    t.diagnostic(`bfloat16: ${matchedSteps(ref, outs)} of ${prompts.length * ref.new_tokens} steps equal transformers' before the first difference`);
  } finally {
    engine.dispose();
  }
});
