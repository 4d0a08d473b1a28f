/**
 * Generation on webgpu: the engine (serve/engine.ts) runs the tiny Qwen3 checkpoint on a webgpu
 * device and gives transformers' greedy tokens (generate.json: 5 prompts of 1..20 tokens, 32 new
 * tokens each, the top-2 logit gap per step) with decode 'eager' and 'compiled' (fused WGSL
 * programs, one per batch bucket: the compile counters show one trace per bucket, none per token;
 * each program's calls are recorded once and replayed)
 * and prefill 'step' and 'rows'; float16 and bfloat16 follow them up to a near tie of the dtype;
 * kiln.generate takes and returns webgpu tensors and reads the device once per token (the sampled
 * id); `kiln generate --device webgpu` prints the same ids. Sampling is webgpu-sampling.test.ts's,
 * Qwen3-MoE webgpu-moe.test.ts's.
 *
 * Needs a real adapter (a GPU, or SwiftShader's CPU Vulkan driver: slow, about 20 s per engine
 * run); skips without one and on Dawn's null backend.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { Bridge } from '../src/runtime/webgpu/bridge.js';
import { WgslReplayProgram } from '../src/compile/codegen/wgsl/replay.js';
import { checkTokens, matchedSteps, NEAR_TIE, readGenerateReference } from './helpers/generate-ref.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const DENSE = path.join(fixtures, 'qwen3-tiny');
const MAIN = path.join(here, '../src/cli/main.js');
const skip = webgpuSkipReason();

const ref = readGenerateReference(DENSE);

test("webgpu engine, float32: decode 'eager' and 'compiled', prefill 'step' and 'rows', give transformers' greedy tokens; one trace per batch bucket", { skip }, (t) => {
  const model = kiln.models.loadQwen3(DENSE, { dtype: 'float32', device: 'webgpu' });
  const prompts = ref.cases.map((c) => c.prompt);
  const configs = [
    { decode: 'eager', prefill: 'step' },
    { decode: 'compiled', prefill: 'step' },
    { decode: 'compiled', prefill: 'rows' },
  ] as const;
  for (const { decode, prefill } of configs) {
    const label = `decode ${decode}, prefill ${prefill}`;
    const engine = new kiln.serve.Engine(model, { numBlocks: 48, decode, prefill });
    try {
      assert.equal(engine.cache.keys[0]!.device.type, 'webgpu', 'the cache lives on webgpu');
      if (decode === 'compiled' && prefill === 'rows') {
        const byDefault = new kiln.serve.Engine(model, { numBlocks: 4 });
        assert.deepEqual([byDefault.decodeRunner!.path, byDefault.prefillRows], ['compiled', true], "the default on webgpu: decode 'compiled', prefill 'rows'");
        byDefault.dispose();
      }
      const outs = engine.generateAll(prompts, { maxNewTokens: ref.new_tokens });
      ref.cases.forEach((c, i) => assert.deepEqual(outs[i]!.outputIds, c.generated, `${label}: prompt ${i}`));
      const stats = engine.stats;
      const runner = engine.decodeRunner!;
      assert.ok(stats.decodeSteps >= ref.new_tokens - 2, `${label}: ${stats.decodeSteps} decode steps`);
      assert.equal(stats.rowsSteps > 0, prefill === 'rows', `${label}: ${stats.rowsSteps} row steps`);
      if (decode === 'compiled') {
        const c = runner.compileCounters!;
        const buckets = runner.bucketSizes;
        assert.equal(c.graphBreaks, 0, `${label}: graph breaks`);
        assert.equal(c.fallbacks, 0, `${label}: fallbacks`);
        assert.equal(c.eagerCalls, 0, `${label}: eager calls`);
        // Positions, lengths and slots are tensor values: a bucket traces once, whatever the token.
        assert.equal(c.traces, buckets.length, `${label}: ${c.traces} traces for buckets ${buckets.join(', ')}`);
        assert.equal(c.calls, runner.counters.steps, `${label}: every runner step is a compiled call`);
        assert.equal(c.cacheHits, c.calls - c.traces, `${label}: every call after a bucket's first is a cache hit`);
        // Mode 'reduce-overhead': each bucket's program records its second call and replays it.
        const programs = runner.programs;
        assert.ok(programs.length > 0 && programs.every((p) => p instanceof WgslReplayProgram && p.stats.disabled === null), `${label}: replay programs, none disabled`);
        assert.ok(programs.some((p) => (p as WgslReplayProgram).stats.replays > 0), `${label}: decode steps replay`);
        t.diagnostic(`${label}: ${runner.counters.steps} runner steps, buckets ${buckets.join(', ')}, ${c.traces} traces, ${c.cacheHits} cache hits`);
      } else {
        assert.equal(runner.compileCounters, null);
      }
    } finally {
      engine.dispose();
    }
  }
});

for (const dtype of ['float16', 'bfloat16'] as const) {
  test(`webgpu engine, ${dtype}, compiled decode: transformers' greedy tokens up to a near tie (top-2 gap < ${NEAR_TIE[dtype]})`, { skip }, (t) => {
    const model = kiln.models.loadQwen3(DENSE, { dtype, device: 'webgpu' });
    const engine = new kiln.serve.Engine(model, { numBlocks: 48, decode: 'compiled' });
    try {
      assert.equal(engine.cache.keys[0]!.dtype, dtype, 'the cache holds the model dtype');
      const outs = engine.generateAll(
        ref.cases.map((c) => c.prompt),
        { maxNewTokens: ref.new_tokens },
      ).map((o) => o.outputIds);
      const bad = ref.cases.map((c, i) => checkTokens(outs[i]!, c, NEAR_TIE[dtype])).flatMap((m, i) => (m ? [`prompt ${i}: ${m}`] : []));
      assert.deepEqual(bad, [], `${dtype} left transformers' tokens away from a near tie`);
      t.diagnostic(`${dtype}: ${matchedSteps(ref, outs)} of ${5 * ref.new_tokens} steps equal transformers' before the first difference`);
    } finally {
      engine.dispose();
    }
  });
}

/** Counts the device reads (the device thread's 'read' calls) that `fn` makes. */
function countReads<T>(fn: () => T): { value: T; reads: number } {
  const call = Bridge.prototype.call;
  let reads = 0;
  Bridge.prototype.call = function (this: Bridge, c: Parameters<Bridge['call']>[0], doing: string) {
    if (c.k === 'read') reads++;
    return call.call(this, c, doing);
  };
  try {
    return { value: fn(), reads };
  } finally {
    Bridge.prototype.call = call;
  }
}

test("kiln.generate on webgpu: an int64 webgpu tensor in, [1, T + n] int64 on webgpu out, transformers' tokens (eager and compiled decode), one device read per token", { skip }, () => {
  const model = kiln.models.loadQwen3(DENSE, { dtype: 'float32', device: 'webgpu' });
  const c = ref.cases[2]!;
  // undefined: the engine's default on webgpu ('compiled', replayed).
  for (const decode of ['eager', undefined] as const) {
    const input = kiln.tensor([c.prompt], { dtype: 'int64' }).to('webgpu');
    const { value: out, reads } = countReads(() => kiln.generate(model, input, { maxNewTokens: ref.new_tokens, decode }));
    // The prompt ids once, then the sampled id of each step: prefill, cache writes, attention and
    // the argmax stay on the device.
    assert.equal(reads, 1 + ref.new_tokens, `decode ${decode ?? 'default'}: device reads`);
    assert.equal(out.device.type, 'webgpu');
    assert.equal(out.dtype, 'int64');
    assert.deepEqual([...out.shape], [1, c.prompt.length + ref.new_tokens]);
    assert.deepEqual(out.toFlatArray(), [...c.prompt, ...c.generated], `decode ${decode ?? 'default'}`);
  }
});

test('kiln generate --device webgpu (compiled decode, the default) prints transformers\' ids', { skip }, () => {
  const c = ref.cases[1]!;
  const r = spawnSync(process.execPath, [MAIN, 'generate', DENSE, '--device', 'webgpu', '--prompt-ids', c.prompt.join(','), '--max-tokens', String(ref.new_tokens)], {
    encoding: 'utf8',
    timeout: 300_000,
  });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines[0], c.generated.join(','));
  assert.match(lines[1]!, /\(prompt 3 tokens, webgpu float32, finish: length\)$/);
});
