/**
 * The cpu whole-step decoder (kernels/cpu/native/decode-step.ts: a batch-1 decode step as one
 * native call) against the eager cpu decode step (DecodeRunner 'eager' with
 * KILN_DECODE_MEGAKERNEL=0, whose tokens equal transformers' in test/decode-runner.test.ts): the
 * logits and both caches after each step must be the same bits, on random float32 and bfloat16
 * Qwen3 models over identical random caches, for 1 to 4 threads and contexts of 1 to 512 keys
 * (attention on one thread, across threads, and split into key ranges), at sizes with and without
 * vector remainders, and for batches of 2 to 4 sequences (3 padded to the runner's bucket of 4). Then the engine's greedy tokens with the decoder on and off, and the refusals
 * and input errors.
 */
import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { cpuDecodeStepStats } from '../src/kernels/cpu/native/decode-step.js';
import { cpuPath } from '../src/kernels/cpu/native/path.js';
import { setNativeThreads } from '../src/kernels/cpu/native/threads.js';
import { setOption } from '../src/runtime/config.js';
import { DecodeRunner } from '../src/serve/decode-runner.js';
import { PagedKvCache } from '../src/serve/kv-cache.js';
import { perturbNorms, qwen3Config, shuffled } from './helpers/qwen3-random.js';

const native = cpuPath() === 'native';
const skip = native ? false : 'needs the native cpu path (a C compiler)';

afterEach(() => {
  setOption('KILN_DECODE_MEGAKERNEL', undefined);
  setNativeThreads(undefined);
});

/** A tensor's bytes (its elements, from its offset). */
function bytes(t: Tensor): Uint8Array {
  const size = t.dtype === 'bfloat16' ? 2 : 4;
  return new Uint8Array(t.storage.cpuArrayBuffer(), t.offset * size, t.numel() * size);
}

/** The index of the first differing element of two same-dtype tensors' bits, or -1. */
function firstDiff(a: Tensor, b: Tensor): number {
  const x = bytes(a);
  const y = bytes(b);
  assert.equal(x.length, y.length);
  const size = a.dtype === 'bfloat16' ? 2 : 4;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return Math.floor(i / size);
  return -1;
}

/** Two runners over two caches with the same random contents: the eager step and the whole step. */
function pair(cfg: Record<string, unknown>, dtype: 'float32' | 'bfloat16', numBlocks: number): { model: kiln.models.Qwen3ForCausalLM; eager: DecodeRunner; whole: DecodeRunner; caches: [PagedKvCache, PagedKvCache] } {
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(cfg, { dtype, seed: 5, initStd: 0.05 });
  // Norm weights start at one; distinct values make a norm read from the wrong layer visible.
  perturbNorms(model, 29);
  const caches: [PagedKvCache, PagedKvCache] = [new PagedKvCache(model.kvGeometry(), { numBlocks }), new PagedKvCache(model.kvGeometry(), { numBlocks })];
  kiln.manualSeed(23);
  for (const which of ['keys', 'values'] as const) {
    caches[0][which].forEach((t, l) => {
      const r = kiln.randn(t.shape as number[], { dtype });
      t.copy_(r);
      caches[1][which][l]!.copy_(r);
    });
  }
  setOption('KILN_DECODE_MEGAKERNEL', false);
  const eager = new DecodeRunner(model, caches[0], 'eager');
  setOption('KILN_DECODE_MEGAKERNEL', true);
  const whole = new DecodeRunner(model, caches[1], 'eager');
  setOption('KILN_DECODE_MEGAKERNEL', undefined);
  assert.equal(eager.wholeStepDecoder, null);
  assert.notEqual(whole.wholeStepDecoder, null, String(whole.wholeStepReason));
  return { model, eager, whole, caches };
}

/** Label, config, and whether attention splits keys into ranges at some of the contexts (enough key bytes for threads). */
const CASES: [string, Record<string, unknown>, boolean][] = [
  ['head dim 64, 4 query heads per kv head', qwen3Config(256, 8, 2, 64, 512, 2, 1000), true],
  ['head dim 64, 4 kv heads', qwen3Config(256, 8, 4, 64, 384, 2, 500), true],
  ['odd sizes: hidden 80, head dim 24, intermediate 200', qwen3Config(80, 4, 2, 24, 200, 3, 300), false],
];

for (const dtype of ['float32', 'bfloat16'] as const) {
  for (const [label, cfg, splits] of CASES) {
    test(`cpu decode step equals the eager step bit for bit: logits and caches (${dtype}, ${label}, 1-4 threads, 1-512 keys)`, { skip }, () => {
      const NB = 40;
      const { eager, whole, caches } = pair(cfg, dtype, NB);
      const table = shuffled(NB, 11);
      const before = { ...cpuDecodeStepStats };
      let steps = 0;
      for (const threads of [1, 2, 3, 4]) {
        setNativeThreads(threads);
        for (const P of [0, 15, 16, 40, 150, 255, 300, 511]) {
          const blockTable = table.slice(0, Math.ceil((P + 1) / 16));
          const rows = [{ tokenId: (P * 37 + threads) % (cfg.vocab_size as number), position: P, blockTable }];
          const a = eager.run(rows);
          const b = whole.run(rows);
          steps++;
          assert.equal(b.dtype, dtype);
          assert.deepEqual(b.shape, a.shape);
          assert.equal(firstDiff(a, b), -1, `logits differ at ${firstDiff(a, b)} (threads ${threads}, position ${P})`);
          for (const which of ['keys', 'values'] as const) {
            caches[0][which].forEach((t, l) => assert.equal(firstDiff(t, caches[1][which][l]!), -1, `${which} of layer ${l} differ (threads ${threads}, position ${P})`));
          }
        }
      }
      assert.equal(cpuDecodeStepStats.steps - before.steps, steps, 'every whole-runner step ran the native decode step');
      assert.equal(cpuDecodeStepStats.splitSteps > before.splitSteps, splits, 'attention split its keys at some contexts');
      eager.dispose();
      whole.dispose();
    });
  }
}

for (const dtype of ['float32', 'bfloat16'] as const) {
  test(`cpu decode step equals the eager step bit for bit for batches of 2, 3 (padded to 4) and 4 sequences (${dtype}, 1-3 threads)`, { skip }, () => {
    const cfg = CASES[0]![1];
    const NB = 40;
    const { eager, whole, caches } = pair(cfg, dtype, NB);
    const table = shuffled(NB, 13);
    const before = cpuDecodeStepStats.steps;
    let steps = 0;
    for (const threads of [1, 2, 3]) {
      setNativeThreads(threads);
      for (const positions of [[5, 300], [130, 0, 47], [299, 5, 130, 47], [511, 20]]) {
        let next = 0;
        const rows = positions.map((P, r) => {
          const n = Math.ceil((P + 1) / 16);
          const blockTable = table.slice(next, next + n);
          next += n;
          return { tokenId: (P * 31 + r * 7 + threads) % (cfg.vocab_size as number), position: P, blockTable };
        });
        assert.ok(next <= NB);
        const a = eager.run(rows);
        const b = whole.run(rows);
        steps++;
        assert.deepEqual(b.shape, [positions.length, cfg.vocab_size]);
        assert.equal(firstDiff(a, b), -1, `logits differ at ${firstDiff(a, b)} (threads ${threads}, positions ${positions.join(', ')})`);
        for (const which of ['keys', 'values'] as const) {
          caches[0][which].forEach((t, l) => assert.equal(firstDiff(t, caches[1][which][l]!), -1, `${which} of layer ${l} differ (threads ${threads}, positions ${positions.join(', ')})`));
        }
      }
    }
    assert.equal(cpuDecodeStepStats.steps - before, steps, 'every batch ran the native decode step');
    eager.dispose();
    whole.dispose();
  });
}

test('the engine generates the same greedy tokens with the cpu decode step on and off (bfloat16, 2 threads)', { skip }, () => {
  const cfg = qwen3Config(128, 4, 2, 32, 256, 2, 400);
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(cfg, { dtype: 'bfloat16', seed: 9, initStd: 0.2 });
  setNativeThreads(2);
  const tokens: number[][][] = [];
  for (const on of [false, true]) {
    setOption('KILN_DECODE_MEGAKERNEL', on);
    const engine = new kiln.serve.Engine(model, { numBlocks: 32, maxNumSeqs: 1, decode: 'eager', prefixCaching: false });
    assert.equal(engine.decodeRunner?.wholeStepDecoder !== null, on, String(engine.decodeRunner?.wholeStepReason));
    const before = cpuDecodeStepStats.steps;
    const out: number[][] = [];
    for (const r of engine.generateAll([[1, 2, 3], [7, 100, 5, 9, 30], [399]], { maxNewTokens: 24, ignoreEos: true })) out.push(r.outputIds.slice(-24));
    assert.equal(cpuDecodeStepStats.steps - before > 0, on);
    tokens.push(out);
    engine.dispose();
  }
  assert.equal(tokens[1]!.flat().length, 3 * 24);
  assert.deepEqual(tokens[1], tokens[0]);
});

test('the cpu decode step refuses what it does not take, and says why', { skip }, () => {
  const cfg = qwen3Config(64, 2, 1, 32, 128, 1, 100);
  for (const [dtype, why] of [['float16', /float16 \(float32 or bfloat16 needed\)/]] as const) {
    const model = kiln.models.Qwen3ForCausalLM.fromConfig(cfg, { dtype, seed: 1 });
    const cache = new PagedKvCache(model.kvGeometry(), { numBlocks: 8 });
    setOption('KILN_DECODE_MEGAKERNEL', true);
    const runner = new DecodeRunner(model, cache, 'eager');
    assert.equal(runner.wholeStepDecoder, null);
    assert.match(String(runner.wholeStepReason), why);
    runner.dispose();
  }
  const moe = kiln.models.Qwen3MoeForCausalLM.fromConfig({ ...cfg, num_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 32 }, { dtype: 'float32', seed: 1 });
  const cache = new PagedKvCache(moe.kvGeometry(), { numBlocks: 8 });
  setOption('KILN_DECODE_MEGAKERNEL', true);
  const runner = new DecodeRunner(moe, cache, 'eager');
  assert.equal(runner.wholeStepDecoder, null);
  assert.match(String(runner.wholeStepReason), /mixture of experts/);
  runner.dispose();
});

test('the cpu decode step names a bad token id, block table entry or context length, and a disposed weight', { skip }, () => {
  const cfg = qwen3Config(64, 2, 1, 32, 128, 1, 100);
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(cfg, { dtype: 'float32', seed: 1 });
  const cache = new PagedKvCache(model.kvGeometry(), { numBlocks: 4 });
  setOption('KILN_DECODE_MEGAKERNEL', true);
  const runner = new DecodeRunner(model, cache, 'eager');
  assert.notEqual(runner.wholeStepDecoder, null, String(runner.wholeStepReason));
  assert.throws(() => runner.run([{ tokenId: 100, position: 0, blockTable: [0] }]), /cpu decode step: inputIds\[0\] is 100, outside the vocabulary \[0, 100\)/);
  assert.throws(() => runner.run([{ tokenId: 3, position: 0, blockTable: [1] }, { tokenId: 3, position: 20, blockTable: [0, 7] }]), /cpu decode step: blockTables\[1, 1\] is outside the cache's blocks \[0, 4\)/);
  const ok = runner.run([{ tokenId: 3, position: 0, blockTable: [2] }]);
  assert.equal(ok.shape[1], 100);
  (model.model.layers.at(0).mlp as kiln.models.Qwen3MLP).down_proj.weight.dispose();
  assert.throws(() => runner.run([{ tokenId: 3, position: 1, blockTable: [2] }]), /cpu decode step: a tensor the step reads \(layer 0 down\) was disposed/);
  runner.dispose();
});
