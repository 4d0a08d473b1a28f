/**
 * The whole-step decode kernel (KILN_DECODE_MEGAKERNEL; ops/library/whole-step.ts,
 * kernels/cuda/decode-megakernel.ts). Everywhere: the contract's refusals (a float16 model on the
 * cpu, a mixture-of-experts model and unsupported sizes say why, and the engine's tokens are
 * unchanged then). On cuda: batch-1 steps of random dense bfloat16 Qwen3 models (head dims 64 and 128, GQA)
 * against the compiled step over identical caches, at contexts of 1 to 300 tokens over shuffled
 * block tables (one and many attention splits): logits within bfloat16 rounding of each other, the
 * same cache rows written, the same top token (up to near ties); and the engine's greedy tokens with and without it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { perturbNorms, qwen3Config, shuffled } from './helpers/qwen3-random.js';
import type { Tensor } from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import { megakernelUnsupported } from '../src/kernels/cuda/codegen/decode-megakernel.js';
import { megakernelStats } from '../src/kernels/cuda/decode-megakernel.js';
import { DecodeRunner } from '../src/serve/decode-runner.js';
import { launchStats } from '../src/runtime/cuda/launch.js';
import { deviceInfo } from '../src/runtime/cuda/properties.js';
import { PagedKvCache } from '../src/serve/kv-cache.js';
import { createWholeStepDecoder } from '../src/ops/library/whole-step.js';

const hasCuda = kiln.isAvailable('cuda');
const { Qwen3ForCausalLM, Qwen3MoeForCausalLM } = kiln.models;


function withMegakernel<T>(on: boolean, fn: () => T): T {
  setOption('KILN_DECODE_MEGAKERNEL', on);
  try {
    return fn();
  } finally {
    setOption('KILN_DECODE_MEGAKERNEL', undefined);
  }
}

/** The reference: a compiled decode runner with the megakernel off (on cuda it is on by default for batch 1). */
function compiledStep(model: InstanceType<typeof Qwen3ForCausalLM>, cache: PagedKvCache): DecodeRunner {
  return withMegakernel(false, () => new DecodeRunner(model, cache, 'compiled'));
}

test('whole-step decoder: MoE models, head dims and grouped heads it cannot take are refused with a reason', () => {
  const dense = Qwen3ForCausalLM.fromConfig(qwen3Config(256, 4, 2, 64, 512, 2, 300), { dtype: 'float16', seed: 1 });
  const cache = new PagedKvCache(dense.kvGeometry(), { numBlocks: 8 });
  const spec = dense.wholeStepSpec({ keys: cache.keys, values: cache.values }, 8);
  assert.equal(typeof spec, 'object');
  // The cpu registers one (kernels/cpu/native/decode-step.ts) that takes float32 and bfloat16 only.
  assert.match(createWholeStepDecoder(spec as Exclude<typeof spec, string>) as string, /cpu decode step .*float16|native cpu path/);
  const moe = Qwen3MoeForCausalLM.fromConfig({ ...qwen3Config(64, 4, 2, 16, 128, 2, 96), num_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 32 }, { dtype: 'bfloat16', seed: 1 });
  const moeCache = new PagedKvCache(moe.kvGeometry(), { numBlocks: 8 });
  assert.match(moe.wholeStepSpec({ keys: moeCache.keys, values: moeCache.values }, 8) as string, /layer 0 is a mixture of experts/);
  const base = { hidden: 1024, heads: 16, kvHeads: 8, headDim: 128, intermediate: 3072, layers: 28, vocab: 151936, eps: 1e-6, blockSize: 16, numBlocks: 100, maxBlocks: 100, grid: 132 };
  assert.equal(megakernelUnsupported(base), null);
  assert.match(megakernelUnsupported({ ...base, headDim: 96 }) ?? '', /head dim 96/);
  assert.match(megakernelUnsupported({ ...base, kvHeads: 1 }) ?? '', /16 query heads per kv head/);
  assert.match(megakernelUnsupported({ ...base, hidden: 1000 }) ?? '', /hidden size 1000 \(a multiple of 256/);
  assert.match(megakernelUnsupported({ ...base, grid: 4 }) ?? '', /a grid of 4 blocks for 8 kv heads/);
  // The engine with the option on, where no decoder applies: the runner says why and the tokens are the compiled step's.
  const prompts = [[5, 9, 2, 7]];
  const plain = withMegakernel(false, () => new kiln.serve.Engine(dense, { numBlocks: 16, decode: 'compiled' }));
  const want = plain.generateAll(prompts, { maxNewTokens: 6 })[0]!.outputIds;
  plain.dispose();
  const engine = withMegakernel(true, () => new kiln.serve.Engine(dense, { numBlocks: 16, decode: 'compiled' }));
  assert.deepEqual(engine.generateAll(prompts, { maxNewTokens: 6 })[0]!.outputIds, want);
  assert.match(engine.decodeRunner?.wholeStepReason ?? '', /float16|native cpu path/);
  assert.equal(engine.decodeRunner?.wholeStepDecoder, null);
  engine.dispose();
  cache.dispose();
  moeCache.dispose();
});


const SIZES: [string, Record<string, unknown>][] = [
  ['head dim 64, 4 query heads per kv head', qwen3Config(256, 8, 2, 64, 512, 2, 1000)],
  ['head dim 128, 2 query heads per kv head', qwen3Config(512, 4, 2, 128, 1024, 3, 2000)],
];

const FORMS = [
  ['next', 'registers', 'grid', 0, 'barrier', 'inline'],
  ['ahead', 'registers', 'grid', 0, 'barrier', 'inline'],
  ['next', 'shared', 'grid', 0, 'barrier', 'inline'],
  ['next', 'shared', 'grid', 3, 'barrier', 'inline'],
  ['next', 'shared', 'flow', 0, 'barrier', 'inline'],
  ['next', 'shared', 'flow', 2, 'barrier', 'inline'],
  ['next', 'shared', 'grid', 6, 'early', 'inline'],
  ['next', 'shared', 'grid', 6, 'barrier', 'early'],
  ['next', 'shared', 'grid', 6, 'early', 'early', 'early'],
  ['next', 'shared', 'flow', 2, 'early', 'early', 'early'],
  ['next', 'shared', 'grid', 6, 'barrier', 'inline', 'end', 'joint'],
  ['next', 'shared', 'grid', 6, 'early', 'early', 'early', 'joint'],
  ['next', 'shared', 'grid', 6, 'early', 'early', 'early', 'joint', 'norm'],
] as const;
for (const [label, cfg] of SIZES) for (const [stream, kvSlots, sync, pace, kvLoad, constLoad, residLoad = 'end', joinLoads = 'serial', earlyAt = 'start'] of FORMS) {
  test(`decode megakernel equals the compiled step: logits, cache rows and argmax at contexts 1..300 (${label}; weights streamed ${stream}${pace > 0 ? `, ${pace} loads ahead` : ''}; cache slots in ${kvSlots}; keys and values loaded ${kvLoad === 'early' ? 'early' : 'at the barrier'}; norm and rotary rows ${constLoad === 'early' ? 'copied early' : 'inline'}; residuals read ${residLoad === 'early' ? 'early' : 'at the end'}; fold loads ${joinLoads}; early copies at ${earlyAt}; ${sync} sync) [cuda]`, { skip: !hasCuda }, () => {
    setOption('KILN_DECODE_MEGAKERNEL_KV_LOAD', kvLoad);
    setOption('KILN_DECODE_MEGAKERNEL_CONST_LOAD', constLoad);
    setOption('KILN_DECODE_MEGAKERNEL_RESID_LOAD', residLoad);
    setOption('KILN_DECODE_MEGAKERNEL_JOIN_LOADS', joinLoads);
    setOption('KILN_DECODE_MEGAKERNEL_EARLY_AT', earlyAt);
    setOption('KILN_DECODE_MEGAKERNEL_STREAM', stream);
    setOption('KILN_DECODE_MEGAKERNEL_KV_SLOTS', kvSlots);
    setOption('KILN_DECODE_MEGAKERNEL_SYNC', sync);
    setOption('KILN_DECODE_MEGAKERNEL_PACE', pace);
    try {
      checkAgainstCompiled(cfg);
    } finally {
      setOption('KILN_DECODE_MEGAKERNEL_KV_LOAD', undefined);
      setOption('KILN_DECODE_MEGAKERNEL_CONST_LOAD', undefined);
      setOption('KILN_DECODE_MEGAKERNEL_RESID_LOAD', undefined);
      setOption('KILN_DECODE_MEGAKERNEL_JOIN_LOADS', undefined);
      setOption('KILN_DECODE_MEGAKERNEL_EARLY_AT', undefined);
      setOption('KILN_DECODE_MEGAKERNEL_STREAM', undefined);
      setOption('KILN_DECODE_MEGAKERNEL_KV_SLOTS', undefined);
      setOption('KILN_DECODE_MEGAKERNEL_SYNC', undefined);
      setOption('KILN_DECODE_MEGAKERNEL_PACE', undefined);
    }
  });
}

function checkAgainstCompiled(cfg: Record<string, unknown>): void {
    const model = Qwen3ForCausalLM.fromConfig(cfg, { dtype: 'bfloat16', device: 'cuda', seed: 3, initStd: 0.05 });
    assert.ok(perturbNorms(model, 23) > 0);
    const NB = 64;
    const caches = [new PagedKvCache(model.kvGeometry(), { numBlocks: NB }), new PagedKvCache(model.kvGeometry(), { numBlocks: NB })];
    kiln.manualSeed(11);
    for (let i = 0; i < caches[0]!.keys.length; i++) {
      for (const which of ['keys', 'values'] as const) {
        const r = kiln.randn(caches[0]![which][i]!.shape as number[], { dtype: 'bfloat16', device: 'cuda' });
        for (const c of caches) c[which][i]!.copy_(r);
        r.dispose();
      }
    }
    const mk = withMegakernel(true, () => new DecodeRunner(model, caches[0]!, 'compiled'));
    const ref = compiledStep(model, caches[1]!);
    assert.ok(mk.wholeStepDecoder?.name, `no megakernel: ${mk.wholeStepReason}`);
    const table = shuffled(NB, 5);
    const before = megakernelStats.launches;
    const coopBefore = launchStats.cooperative;
    const flat = (t: Tensor): number[] => t.to('float32').toFlatArray() as number[];
    let steps = 0;
    for (const P of [0, 1, 15, 16, 17, 40, 100, 255, 300]) {
      const row = { tokenId: (P * 37 + 11) % (cfg.vocab_size as number), position: P, blockTable: table.slice(0, Math.ceil((P + 1) / 16)) };
      const a = flat(mk.run([row]));
      const b = flat(ref.run([row]));
      steps++;
      const { worst, scale } = logitGap(a, b);
      // Both round every op to bfloat16 (2^-9 relative) but sum in different orders; 2% of the
      // largest logit is a few roundings through the layers, far below what a wrong row or head gives.
      assert.ok(worst <= 0.02 * scale, `context ${P + 1}: logits differ by ${worst} (largest logit ${scale})`);
      // The kernel's top token must be one of the reference's best: its reference logit within the
      // same tolerance of the reference's maximum (a near tie may fall either way; a wrong row or
      // head would pick a token far below).
      const top = a.indexOf(Math.max(...a));
      const best = Math.max(...b);
      assert.ok(b[top]! >= best - 0.02 * scale, `context ${P + 1}: the kernel's top token ${top} has reference logit ${b[top]}, the reference's best is ${best} (token ${b.indexOf(best)})`);
      // The step's key and value rows, written at the token's slot in every layer.
      const slot = caches[0]!.slot(row.blockTable, P);
      for (let l = 0; l < caches[0]!.keys.length; l++) {
        for (const which of ['keySlots', 'valueSlots'] as const) {
          const ra = flat(caches[0]![which][l]!.narrow(0, slot, 1));
          const rb = flat(caches[1]![which][l]!.narrow(0, slot, 1));
          const tol = 0.02 * Math.max(...rb.map(Math.abs));
          ra.forEach((x, i) => assert.ok(Math.abs(x - rb[i]!) <= tol, `context ${P + 1}, layer ${l} ${which} [${i}]: ${x} vs ${rb[i]}`));
        }
      }
    }
    assert.equal(megakernelStats.launches - before, steps, 'one launch per step');
    // KILN_DECODE_MEGAKERNEL_COOPERATIVE (default on): every block resident or an error.
    assert.equal(launchStats.cooperative - coopBefore, steps, 'each launch cooperative');
    mk.dispose();
    ref.dispose();
    for (const c of caches) c.dispose();
}

/** The largest difference between two logit rows, and the reference row's largest magnitude. */
function logitGap(a: readonly number[], b: readonly number[]): { worst: number; scale: number } {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return { worst, scale: Math.max(...b.map(Math.abs)) };
}

/** A compiled decode runner with the megakernel on, its grid forced to `grid` blocks (KILN_DECODE_MEGAKERNEL_GRID). */
function megakernelRunnerOnGrid(model: InstanceType<typeof Qwen3ForCausalLM>, cache: PagedKvCache, grid: number): DecodeRunner {
  setOption('KILN_DECODE_MEGAKERNEL_GRID', grid);
  try {
    return withMegakernel(true, () => new DecodeRunner(model, cache, 'compiled'));
  } finally {
    setOption('KILN_DECODE_MEGAKERNEL_GRID', undefined);
  }
}

test('a megakernel grid the device cannot hold at once: the cooperative launch is refused, the runner says why and runs the compiled step [cuda]', { skip: !hasCuda }, () => {
  const model = Qwen3ForCausalLM.fromConfig(qwen3Config(512, 4, 2, 128, 1024, 3, 2000), { dtype: 'bfloat16', device: 'cuda', seed: 3, initStd: 0.05 });
  const caches = [new PagedKvCache(model.kvGeometry(), { numBlocks: 16 }), new PagedKvCache(model.kvGeometry(), { numBlocks: 16 })];
  // 512-thread blocks: at most 2048 / 512 = 4 an SM, so 4 x SMs + 1 can never be resident at once.
  const mk = megakernelRunnerOnGrid(model, caches[0]!, 4 * deviceInfo(0).smCount + 1);
  const ref = compiledStep(model, caches[1]!);
  assert.ok(mk.wholeStepDecoder !== null, `the decoder was made: ${mk.wholeStepReason}`);
  const launches = megakernelStats.launches;
  for (const P of [0, 1, 2]) {
    const row = { tokenId: 7 + P, position: P, blockTable: [3] };
    const a = mk.run([row]).to('float32').toFlatArray() as number[];
    const b = ref.run([row]).to('float32').toFlatArray() as number[];
    // Both ran the compiled step on identical caches: the same bits.
    assert.deepEqual(a, b, `position ${P}`);
  }
  assert.equal(megakernelStats.launches, launches, 'the kernel never ran');
  assert.equal(mk.wholeStepDecoder, null);
  assert.equal(mk.counters.wholeSteps, 0);
  assert.match(mk.wholeStepReason ?? '', /refused by the device: .*cannot all be resident at once.*COOPERATIVE_LAUNCH_TOO_LARGE/);
  mk.dispose();
  ref.dispose();
  for (const c of caches) c.dispose();
});

test('contexts past the megakernel\'s prefetched tokens run on the compiled step (maxContext), shorter ones on the kernel [cuda]', { skip: !hasCuda }, () => {
  const model = Qwen3ForCausalLM.fromConfig(qwen3Config(512, 4, 2, 128, 1024, 3, 2000), { dtype: 'bfloat16', device: 'cuda', seed: 3, initStd: 0.05 });
  assert.ok(perturbNorms(model, 31) > 0);
  const caches = [new PagedKvCache(model.kvGeometry(), { numBlocks: 32 }), new PagedKvCache(model.kvGeometry(), { numBlocks: 32 })];
  // 4 blocks over 2 kv heads: 2 splits of 16 warps x 4 tokens, so 128 tokens are prefetched.
  const mk = megakernelRunnerOnGrid(model, caches[0]!, 4);
  const ref = compiledStep(model, caches[1]!);
  assert.equal(mk.wholeStepDecoder?.maxContext, 128, mk.wholeStepReason ?? '');
  const table = shuffled(32, 3);
  const flat = (t: Tensor): number[] => t.to('float32').toFlatArray() as number[];
  // Positions in order, so both caches hold the same rows: contexts 125..130 cross the limit.
  for (let P = 0; P < 130; P++) {
    const row = { tokenId: (P * 13 + 5) % 2000, position: P, blockTable: table.slice(0, Math.ceil((P + 1) / 16)) };
    const before = megakernelStats.launches;
    const a = flat(mk.run([row]));
    const b = flat(ref.run([row]));
    const onKernel = megakernelStats.launches > before;
    assert.equal(onKernel, P + 1 <= 128, `context ${P + 1}: on the kernel ${onKernel}`);
    // Past the limit both ran the compiled step over caches that agree within bfloat16 rounding.
    if (!onKernel) {
      const { worst, scale } = logitGap(a, b);
      assert.ok(worst <= 0.02 * scale, `context ${P + 1}: logits differ by ${worst}`);
    }
  }
  assert.equal(mk.wholeStepDecoder !== null, true, 'the decoder stays for the next short context');
  mk.dispose();
  ref.dispose();
  for (const c of caches) c.dispose();
});

/** Greedy ids of `prompt` and, per step, the gap between the top two logprobs (the engine's top-2 logprobs). */
function greedyWithMargins(engine: InstanceType<typeof kiln.serve.Engine>, prompt: number[], n: number): { ids: number[]; margins: number[] } {
  const ids: number[] = [];
  const margins: number[] = [];
  let done = false;
  engine.addRequest(prompt, { maxNewTokens: n, logprobs: 2 }, {
    onOutput: (o) => {
      for (const t of o.logprobs ?? []) {
        ids.push(t.id);
        margins.push(t.top!.length > 1 ? t.top![0]!.logprob - t.top![1]!.logprob : Infinity);
      }
      done ||= o.finished;
    },
  });
  while (!done) engine.step();
  return { ids, margins };
}

test('engine greedy tokens with KILN_DECODE_MEGAKERNEL equal the compiled step\'s until the first near tie (batch-1 steps on the kernel, batches of 3 on the compiled step) [cuda]', { skip: !hasCuda }, (t) => {
  const model = Qwen3ForCausalLM.fromConfig(qwen3Config(512, 4, 2, 128, 1024, 3, 2000), { dtype: 'bfloat16', device: 'cuda', seed: 9, initStd: 0.08 });
  const parted: string[] = [];
  const prompts = [[3, 14, 15, 92, 65], [35, 89, 79, 32, 38, 46, 26], [43, 38], [1999, 0, 7], [271, 828, 1828, 459, 45, 235, 360, 287]];
  // Both paths round every op to bfloat16 but sum in different orders: where the compiled step's
  // top two logits are closer than this, either token is a right answer and the sequences may part.
  const TIE = 0.15;
  let compared = 0;
  const before = megakernelStats.launches;
  for (const p of prompts) {
    const runs = [true, false].map((on) =>
      withMegakernel(on, () => {
        const engine = new kiln.serve.Engine(model, { numBlocks: 64, decode: 'compiled' });
        const out = greedyWithMargins(engine, p, 32);
        assert.equal(engine.decodeRunner?.wholeStepDecoder !== null, on, engine.decodeRunner?.wholeStepReason ?? '');
        engine.dispose();
        return out;
      }),
    );
    const [mk, ref] = runs as [ReturnType<typeof greedyWithMargins>, ReturnType<typeof greedyWithMargins>];
    assert.equal(mk.ids.length, 32);
    for (let i = 0; i < ref.ids.length; i++) {
      if (mk.ids[i] === ref.ids[i]) {
        compared++;
        continue;
      }
      assert.ok(ref.margins[i]! < TIE, `prompt ${p.join(',')}: token ${i} is ${mk.ids[i]} against ${ref.ids[i]} where the compiled step's top two logprobs differ by ${ref.margins[i]}`);
      parted.push(`prompt ${p.join(',')}: parted at token ${i} (top-2 gap ${ref.margins[i]!.toFixed(4)})`);
      break;
    }
  }
  // The comparison must not be vacuous: 5 x 32 tokens, at least 64 compared before a near tie.
  t.diagnostic(`${compared} tokens compared; ${parted.length ? parted.join('; ') : 'no near tie'}`);
  assert.ok(compared >= 64, `${compared} tokens compared`);
  assert.ok(megakernelStats.launches - before >= 5 * 30, `${megakernelStats.launches - before} launches`);
  // Three prompts together pad to bucket 4: those steps run on the compiled step, none on the kernel.
  const batched = megakernelStats.launches;
  withMegakernel(true, () => {
    const engine = new kiln.serve.Engine(model, { numBlocks: 64, decode: 'compiled' });
    engine.generateAll(prompts.slice(0, 3), { maxNewTokens: 8 });
    engine.dispose();
  });
  assert.equal(megakernelStats.launches, batched);
});
