/**
 * Decode on the device (serve/decode-runner.ts, ops/defs/llm-paged.ts): llm.pagedAttention and
 * llm.reshapeAndCache against float64 loops written here (ragged lengths, a row of length 0,
 * grouped-query heads, scattered block tables, bfloat16 caches); bad slots, block ids and lengths
 * are errors; and the engine's three decode paths ('step', 'eager', 'compiled') give transformers'
 * greedy tokens on the tiny checkpoints, with one compiled program per batch bucket (no recompile
 * per token or length) and on cuda when present; which steps a whole-step decoder takes (its
 * batch and context limits).
 */
import assert from 'node:assert/strict';
import { setOption } from '../src/runtime/config.js';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { decodeBucket } from '../src/serve/decode-runner.js';
import { wholeStepTakes } from '../src/ops/library/whole-step.js';
import { makeTensor, randomInts, randomValues } from './helpers/make.js';

const llm = kiln.llm;
const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const devices = ['cpu', ...(kiln.isAvailable('cuda') ? ['cuda'] : [])];

interface Paged {
  q: number[];
  k: number[];
  v: number[];
  tables: number[];
  lens: number[];
  shape: { B: number; H: number; Hkv: number; D: number; NB: number; BS: number; M: number };
}

function randomPaged(seed: number, B: number, H: number, Hkv: number, D: number, NB: number, BS: number, M: number, lens: number[]): Paged {
  return {
    q: randomValues(B * H * D, seed, -1, 1),
    k: randomValues(NB * BS * Hkv * D, seed + 1, -1, 1),
    v: randomValues(NB * BS * Hkv * D, seed + 2, -1, 1),
    tables: randomInts(B * M, seed + 3, 0, NB),
    lens,
    shape: { B, H, Hkv, D, NB, BS, M },
  };
}

/** out[b, h] = softmax_t(scale q . k_t) v_t over t < lens[b], token t at block tables[b, t / BS]. */
function pagedReference(p: Paged, scale: number, round: (x: number) => number = (x) => x): number[] {
  const { B, H, Hkv, D, BS, M } = p.shape;
  const out: number[] = [];
  const at = (b: number, t: number, kh: number): number => ((p.tables[b * M + Math.floor(t / BS)]! * BS + (t % BS)) * Hkv + kh) * D;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kh = Math.floor(h / (H / Hkv));
      const scores: number[] = [];
      for (let t = 0; t < p.lens[b]!; t++) {
        let s = 0;
        for (let d = 0; d < D; d++) s += round(p.q[(b * H + h) * D + d]!) * round(p.k[at(b, t, kh) + d]!);
        scores.push(s * scale);
      }
      const mx = Math.max(...scores);
      const w = scores.map((s) => Math.exp(s - mx));
      const z = w.reduce((a, c) => a + c, 0);
      for (let d = 0; d < D; d++) {
        let o = 0;
        for (let t = 0; t < w.length; t++) o += w[t]! * round(p.v[at(b, t, kh) + d]!);
        out.push(w.length ? o / z : 0);
      }
    }
  }
  return out;
}

const bf16 = (x: number): number => kiln.tensor([x], { dtype: 'bfloat16' }).toFlatArray()[0]!;

for (const device of devices) {
  test(`pagedAttention equals a float64 loop: GQA, ragged lengths, a zero-length row, float32 and bfloat16 [${device}]`, () => {
    // Long enough rows (up to 150 tokens over 16-token blocks) that cuda splits them.
    const p = randomPaged(11, 4, 8, 2, 64, 40, 16, 10, [150, 1, 0, 37]);
    const { B, H, Hkv, D, NB, BS, M } = p.shape;
    for (const dtype of ['float32', 'bfloat16'] as const) {
      const mk = (v: number[], shape: number[]): Tensor => makeTensor(v, shape, dtype).to(device);
      const out = llm.pagedAttention(mk(p.q, [B, H, D]), mk(p.k, [NB, BS, Hkv, D]), mk(p.v, [NB, BS, Hkv, D]), makeTensor(p.tables, [B, M], 'int32').to(device), makeTensor(p.lens, [B], 'int64').to(device), 0.125);
      assert.deepEqual([...out.shape], [B, H, D]);
      const want = pagedReference(p, 0.125, dtype === 'bfloat16' ? bf16 : undefined);
      const got = out.toFlatArray();
      const tol = dtype === 'float32' ? 2e-6 : 1.6e-2;
      let worst = 0;
      got.forEach((g, i) => (worst = Math.max(worst, Math.abs(g - want[i]!))));
      assert.ok(worst <= tol, `${dtype}: max |kiln - float64| = ${worst} > ${tol}`);
      assert.ok(got.slice(2 * H * D, 3 * H * D).every((x) => x === 0), 'the zero-length row is zeros');
    }
  });

  test(`reshapeAndCache writes each token's rows at its slot and skips slot -1 [${device}]`, () => {
    const N = 5;
    const [NB, BS, Hkv, D] = [4, 4, 2, 8];
    const key = makeTensor(randomValues(N * Hkv * D, 3, -1, 1), [N, Hkv, D]).to(device);
    const value = makeTensor(randomValues(N * Hkv * D, 4, -1, 1), [N, Hkv, D]).to(device);
    const kc = kiln.zeros([NB, BS, Hkv, D], { device });
    const vc = kiln.zeros([NB, BS, Hkv, D], { device });
    const slots = [13, -1, 0, 7, 15];
    const r = llm.reshapeAndCache(key, value, kc, vc, makeTensor(slots, [N], 'int64').to(device));
    assert.equal(r.keyCache, kc, 'in place');
    const kf = kc.toFlatArray();
    const vf = vc.toFlatArray();
    const kv = key.toFlatArray();
    const vv = value.toFlatArray();
    const row = Hkv * D;
    const written = new Set<number>();
    slots.forEach((s, n) => {
      if (s < 0) return;
      written.add(s);
      assert.deepEqual(kf.slice(s * row, (s + 1) * row), kv.slice(n * row, (n + 1) * row), `key row ${n} at slot ${s}`);
      assert.deepEqual(vf.slice(s * row, (s + 1) * row), vv.slice(n * row, (n + 1) * row), `value row ${n} at slot ${s}`);
    });
    for (let s = 0; s < NB * BS; s++) if (!written.has(s)) assert.ok(kf.slice(s * row, (s + 1) * row).every((x) => x === 0), `slot ${s} untouched`);
  });

  test(`paged ops: bad slots, block ids and lengths are errors naming the op and the value [${device}]`, () => {
    const kc = kiln.zeros([2, 4, 1, 32], { device });
    const vc = kiln.zeros([2, 4, 1, 32], { device });
    const k = kiln.ones([1, 1, 32], { device });
    const sync = (): void => kiln.synchronize(device);
    assert.throws(() => {
      llm.reshapeAndCache(k, k, kc, vc, makeTensor([8], [1], 'int64').to(device));
      sync();
    }, /llm\.reshapeAndCache: .*8.* (outside|out of range).*8/);
    const q = kiln.ones([1, 1, 32], { device });
    assert.throws(() => {
      llm.pagedAttention(q, kc, vc, makeTensor([5, 0], [1, 2], 'int32').to(device), makeTensor([3], [1], 'int32').to(device), 1);
      sync();
    }, /llm\.pagedAttention: .*5.*(outside|out of range)/);
    assert.throws(() => {
      llm.pagedAttention(q, kc, vc, makeTensor([0, 1], [1, 2], 'int32').to(device), makeTensor([9], [1], 'int32').to(device), 1);
      sync();
    }, /llm\.pagedAttention: .*9/);
    const kc2 = kiln.zeros([2, 4, 2, 32], { device });
    assert.throws(() => llm.pagedAttention(kiln.ones([1, 3, 32], { device }), kc2, kc2, makeTensor([0], [1, 1], 'int32').to(device), makeTensor([1], [1], 'int32').to(device), 1), /query heads \(3\) must be a multiple of the cache's kv heads \(2\)/);
  });
}

test('decode buckets: 1, 2, 4, ... 512, then the exact size', () => {
  assert.deepEqual([1, 2, 3, 5, 9, 100, 512, 513].map(decodeBucket), [1, 2, 4, 8, 16, 128, 512, 513]);
});

interface Reference {
  new_tokens: number;
  cases: { prompt: number[]; generated: number[] }[];
}

for (const device of devices) {
  for (const [name, dir] of [
    ['dense', 'qwen3-tiny'],
    ['moe', 'qwen3-moe-tiny'],
  ] as const) {
    test(`engine decode paths 'step', 'eager' and 'compiled', prefill 'step' and 'rows', give transformers' greedy tokens: ${name} [${device}]`, () => {
      const folder = path.join(fixtures, dir);
      const ref = JSON.parse(fs.readFileSync(path.join(folder, 'generate.json'), 'utf8')) as Reference;
      const model = kiln.models.loadQwen3(folder, { dtype: 'float32', device });
      const prompts = ref.cases.map((c) => c.prompt);
      const configs = [
        { decode: 'step', prefill: 'step' },
        { decode: 'eager', prefill: 'step' },
        { decode: 'compiled', prefill: 'step' },
        { decode: 'eager', prefill: 'rows' },
        { decode: 'compiled', prefill: 'rows' },
      ] as const;
      for (const { decode, prefill } of configs) {
        const label = `decode ${decode}, prefill ${prefill}`;
        const engine = new kiln.serve.Engine(model, { numBlocks: 48, decode, prefill });
        const outs = engine.generateAll(prompts, { maxNewTokens: ref.new_tokens });
        ref.cases.forEach((c, i) => assert.deepEqual(outs[i]!.outputIds, c.generated, `${label}: prompt ${i}`));
        const stats = engine.stats;
        if (decode === 'step') assert.equal(engine.decodeRunner, null);
        else assert.ok(stats.decodeSteps >= ref.new_tokens - 2, `${label}: ${stats.decodeSteps} decode steps`);
        // Prompts as rows: the first step (all five prompts, one chunk) runs through the runner.
        assert.equal(stats.rowsSteps > 0, prefill === 'rows', `${label}: ${stats.rowsSteps} row steps`);
        const counters = engine.decodeRunner?.compileCounters;
        if (decode === 'compiled') {
          // Five prompts finishing together: bucket 8 (5 rows) for decode; with prefill 'rows' one
          // more bucket for the prompts' tokens.
          assert.ok(counters, 'compiled path has compile counters');
          assert.equal(counters.graphBreaks, 0);
          assert.equal(counters.fallbacks, 0);
          const most = prefill === 'rows' ? 3 : 2;
          assert.ok(counters.traces <= most, `${label}: ${counters.traces} traces for ${stats.decodeSteps} decode steps`);
          // Batch-1 steps may run the device's whole-step decoder instead (the cpu's is on by default).
          assert.ok(counters.cacheHits + engine.decodeRunner!.counters.wholeSteps >= stats.decodeSteps - counters.traces);
        }
        engine.dispose();
      }
      // The eager path with each layer's closing add and the next norm as two ops (the default folds
      // them into one llm.addRmsNorm on cpu): the same tokens.
      setOption('KILN_DECODE_NORM_CHAIN', false);
      try {
        const engine = new kiln.serve.Engine(model, { numBlocks: 48, decode: 'eager' });
        const outs = engine.generateAll(prompts, { maxNewTokens: ref.new_tokens });
        ref.cases.forEach((c, i) => assert.deepEqual(outs[i]!.outputIds, c.generated, `decode eager, KILN_DECODE_NORM_CHAIN=0: prompt ${i}`));
        engine.dispose();
      } finally {
        setOption('KILN_DECODE_NORM_CHAIN', undefined);
      }
      // The eager path with q/k norms, rotaries and the cache write as five ops (the default on cpu
      // is one llm.qkNormRotaryCache), with the MLP's gate/up/silu/mul as four ops (default: one
      // llm.gateUpSiluAndMul), and with the GEMV's interleaved row order (default: the stream order): the
      // same tokens.
      for (const [option, value] of [['KILN_DECODE_QK_CACHE', false], ['KILN_DECODE_GATE_UP', false], ['KILN_CPU_GEMV_STREAM', false]] as const) {
        setOption(option, value);
        try {
          const engine = new kiln.serve.Engine(model, { numBlocks: 48, decode: 'eager' });
          const outs = engine.generateAll(prompts, { maxNewTokens: ref.new_tokens });
          ref.cases.forEach((c, i) => assert.deepEqual(outs[i]!.outputIds, c.generated, `decode eager, ${option}=${value ? 1 : 0}: prompt ${i}`));
          engine.dispose();
        } finally {
          setOption(option, undefined);
        }
      }
    });
  }
}

test('a whole-step decoder takes a step only within its batch and context limits', () => {
  const mk = { maxBatch: 1, maxContext: 1024 };
  // Context = position + 1: 1,024 tokens is the last one it takes.
  assert.equal(wholeStepTakes(mk, 1, [{ position: 1022 }]), true);
  assert.equal(wholeStepTakes(mk, 1, [{ position: 1023 }]), true);
  assert.equal(wholeStepTakes(mk, 1, [{ position: 1024 }]), false);
  assert.equal(wholeStepTakes(mk, 2, [{ position: 3 }]), false, 'bucket 2 is past maxBatch 1');
  // Without a context limit (the cpu's decoder) only the batch decides; every row must fit.
  const cpu = { maxBatch: 4 };
  assert.equal(wholeStepTakes(cpu, 4, [{ position: 100_000 }, { position: 3 }]), true);
  assert.equal(wholeStepTakes({ maxBatch: 4, maxContext: 10 }, 4, [{ position: 3 }, { position: 10 }]), false, 'one row past the limit');
});
