/**
 * Qwen3 / Qwen3-MoE: logits parity with transformers 5.17 on the tiny fixtures (made by
 * scripts/make_qwen3_fixtures.py), checkpoint-name compatibility, fromConfig, RoPE positions, the
 * MoE block against a naive float64 reference, and config parsing.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { assertThrowsWith } from './helpers/assert.js';
import { randomValues } from './helpers/make.js';

const { Qwen3Config, Qwen3ForCausalLM, Qwen3MoeForCausalLM, QWEN3_0_6B, Qwen3SparseMoeBlock } = kiln.models;

const here = path.dirname(fileURLToPath(import.meta.url));
// Compiled tests run from dist/test; the fixtures stay in the source tree.
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const DENSE = path.join(fixtures, 'qwen3-tiny');
const MOE = path.join(fixtures, 'qwen3-moe-tiny');

interface Reference {
  input_ids: number[][];
  logits_shape: number[];
  logits: number[];
}
const readJson = <T>(file: string): T => JSON.parse(fs.readFileSync(file, 'utf8')) as T;
const reference = (dir: string): Reference => readJson<Reference>(path.join(dir, 'reference.json'));
const weightMapKeys = (dir: string): string[] => Object.keys(readJson<{ weight_map: Record<string, string> }>(path.join(dir, 'model.safetensors.index.json')).weight_map);

function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

const ids = (rows: number[][]): Tensor => kiln.tensor(rows, { dtype: 'int64' });
const run = (m: { forward(x: Tensor, p?: kiln.models.Positions): Tensor }, x: Tensor, p?: kiln.models.Positions): Tensor => kiln.noGrad(() => m.forward(x, p));

// Loaded once, shared by several tests.
const dense = Qwen3ForCausalLM.fromPretrained(DENSE);
const moe = Qwen3MoeForCausalLM.fromPretrained(MOE);

for (const [name, dir, model] of [
  ['dense', DENSE, dense],
  ['moe', MOE, moe],
] as const) {
  test(`parity with transformers: ${name} (${path.basename(dir)}), float32 logits within 1e-4`, (t) => {
    const ref = reference(dir);
    const logits = run(model, ids(ref.input_ids));
    assert.deepEqual([...logits.shape], ref.logits_shape);
    assert.equal(logits.dtype, 'float32');
    const diff = maxAbsDiff(logits.toFlatArray(), ref.logits);
    t.diagnostic(`max |kiln - transformers| = ${diff.toExponential(3)}`);
    assert.ok(diff <= 1e-4, `max abs diff ${diff}`);
    // The logits are O(1): a broken layer would be far off.
    assert.ok(Math.max(...ref.logits.map(Math.abs)) > 1);
  });
}

test('tied lm_head shares the embedding Parameter; stateDict has exactly the checkpoint names', () => {
  assert.equal(dense.lm_head.weight, dense.model.embed_tokens.weight);
  assert.equal(moe.lm_head.weight, moe.model.embed_tokens.weight);
  assert.deepEqual(Object.keys(dense.stateDict()).sort(), weightMapKeys(DENSE).sort());
  assert.deepEqual(Object.keys(moe.stateDict()).sort(), weightMapKeys(MOE).sort());
  // The shared Parameter is counted once.
  let n = 0;
  for (const t of Object.values(dense.stateDict())) n += t.numel();
  assert.equal(dense.numParameters(), n);
});

test("a 1-layer model's stateDict keys match the checkpoint's weight_map keys for layer 0", () => {
  for (const [dir, cls] of [
    [DENSE, Qwen3ForCausalLM],
    [MOE, Qwen3MoeForCausalLM],
  ] as const) {
    const cfg = readJson<Record<string, unknown>>(path.join(dir, 'config.json'));
    const m = cls.fromConfig({ ...cfg, num_hidden_layers: 1 }, { seed: 1 });
    const expected = weightMapKeys(dir).filter((k) => !/^model\.layers\.[1-9]\d*\./.test(k));
    assert.deepEqual(Object.keys(m.stateDict()).sort(), expected.sort(), dir);
    // Shapes too.
    using ck = kiln.io.openHfFolder(dir);
    for (const [k, v] of Object.entries(m.stateDict())) assert.deepEqual([...v.shape], [...ck.info(k).shape], k);
  }
});

test('loadStateDict with the checkpoint tensors gives the fromPretrained model', () => {
  const cfg = readJson<Record<string, unknown>>(path.join(MOE, 'config.json'));
  const m = Qwen3MoeForCausalLM.fromConfig(cfg, { seed: 5 });
  using ck = kiln.io.openHfFolder(MOE);
  const res = m.loadStateDict(ck.stateDict());
  assert.deepEqual(res, { missingKeys: [], unexpectedKeys: [] });
  const x = ids(reference(MOE).input_ids);
  assert.deepEqual(run(m, x).toFlatArray(), run(moe, x).toFlatArray());
});

test('fromConfig: shapes, tying, seeded determinism', () => {
  const small = new Qwen3Config({ vocabSize: 40, hiddenSize: 32, intermediateSize: 48, numHiddenLayers: 2, numAttentionHeads: 4, numKeyValueHeads: 2, headDim: 8, tieWordEmbeddings: true });
  const a = Qwen3ForCausalLM.fromConfig(small, { seed: 42 });
  const b = Qwen3ForCausalLM.fromConfig(small, { seed: 42 });
  const c = Qwen3ForCausalLM.fromConfig(small, { seed: 43 });
  assert.equal(a.lm_head.weight, a.model.embed_tokens.weight);
  assert.ok(a.lm_head.weight instanceof kiln.nn.Parameter);
  assert.deepEqual([...a.model.layers.at(1).self_attn.k_proj.weight.shape], [16, 32]);
  assert.deepEqual([...a.model.layers.at(0).self_attn.q_norm.weight!.shape], [8]);
  const x = ids([
    [1, 5, 9, 39],
    [0, 2, 2, 7],
    [3, 3, 3, 3],
  ]);
  const la = run(a, x);
  assert.deepEqual([...la.shape], [3, 4, 40]);
  assert.deepEqual(la.toFlatArray(), run(b, x).toFlatArray());
  assert.ok(maxAbsDiff(la.toFlatArray(), run(c, x).toFlatArray()) > 1e-3);
  for (const [k, v] of Object.entries(a.stateDict())) assert.deepEqual(v.toFlatArray(), b.stateDict()[k]!.toFlatArray(), k);
  // Weights: uniform with std 0.02 (bound 0.02 * sqrt(3)); norms 1; real nn.Linear modules.
  const w = a.model.layers.at(0).self_attn.q_proj.weight.toFlatArray();
  const bound = 0.02 * Math.sqrt(3);
  assert.ok(w.every((v) => Math.abs(v) <= bound));
  const std = Math.sqrt(w.reduce((s, v) => s + v * v, 0) / w.length);
  assert.ok(Math.abs(std - 0.02) < 0.002, `std ${std}`);
  assert.ok(a.model.norm.weight!.toFlatArray().every((v) => v === 1));
  const q = a.model.layers.at(0).self_attn.q_proj;
  assert.ok(q instanceof kiln.nn.Linear);
  assert.equal(q.inFeatures, 32);
  assert.equal(q.outFeatures, 32);
  assert.equal(a.lm_head.inFeatures, 32);
  assert.equal(a.lm_head.outFeatures, 40);

  // Untied: a separate head weight, present in the stateDict.
  const untied = Qwen3ForCausalLM.fromConfig(small.with({ tieWordEmbeddings: false }), { seed: 1 });
  assert.notEqual(untied.lm_head.weight, untied.model.embed_tokens.weight);
  assert.deepEqual([...untied.stateDict()['lm_head.weight']!.shape], [40, 32]);

  // dtype option.
  const half = Qwen3ForCausalLM.fromConfig(small, { seed: 42, dtype: 'bfloat16' });
  const mlp0 = half.model.layers.at(0).mlp;
  assert.ok(mlp0 instanceof kiln.models.Qwen3MLP);
  assert.equal(mlp0.up_proj.weight.dtype, 'bfloat16');
  assert.equal(run(half, x).dtype, 'bfloat16');

  // Raw config.json objects are accepted too; MoE configs need the MoE class.
  const moeCfg = readJson<Record<string, unknown>>(path.join(MOE, 'config.json'));
  assertThrowsWith(() => Qwen3ForCausalLM.fromConfig(moeCfg), 'Qwen3MoeForCausalLM');
  assertThrowsWith(() => Qwen3MoeForCausalLM.fromConfig(small), 'no experts');
});

test('to(dtype) keeps the tie; float64 logits match the reference too', () => {
  const m = Qwen3ForCausalLM.fromPretrained(DENSE).to('float64');
  assert.equal(m.lm_head.weight, m.model.embed_tokens.weight);
  assert.equal(m.lm_head.weight.dtype, 'float64');
  const ref = reference(DENSE);
  const diff = maxAbsDiff(run(m, ids(ref.input_ids)).toFlatArray(), ref.logits);
  assert.ok(diff <= 1e-4, `float64 diff ${diff}`);
});

test('fromPretrained with dtype bfloat16 stays close to the float32 reference', (t) => {
  const m = Qwen3ForCausalLM.fromPretrained(DENSE, { dtype: 'bfloat16' });
  assert.equal(m.model.norm.weight!.dtype, 'bfloat16');
  const ref = reference(DENSE);
  const out = run(m, ids(ref.input_ids));
  assert.equal(out.dtype, 'bfloat16');
  const diff = maxAbsDiff(out.toFlatArray(), ref.logits);
  t.diagnostic(`bfloat16 max diff ${diff.toExponential(3)}`);
  assert.ok(diff < 0.25, `bfloat16 diff ${diff}`);
});

test('positions: RoPE makes logits depend only on relative positions', () => {
  const x = ids(reference(DENSE).input_ids);
  const T = x.shape[1]!;
  const base = run(dense, x).toFlatArray();
  const explicit = run(dense, x, Array.from({ length: T }, (_, i) => i)).toFlatArray();
  assert.deepEqual(explicit, base);
  const shifted = run(dense, x, kiln.arange(7, 7 + T)).toFlatArray();
  assert.ok(maxAbsDiff(shifted, base) < 1e-4, 'a uniform shift should not change the logits');
  // Per-row positions [B, T]: row 0 unshifted, row 1 stretched (changes row 1 only).
  const rows = [Array.from({ length: T }, (_, i) => i), Array.from({ length: T }, (_, i) => 3 * i)];
  const perRow = run(dense, x, kiln.tensor(rows, { dtype: 'int64' })).toFlatArray();
  const half = perRow.length / 2;
  assert.ok(maxAbsDiff(perRow.slice(0, half), base.slice(0, half)) < 1e-5);
  assert.ok(maxAbsDiff(perRow.slice(half), base.slice(half)) > 1e-3);
  assertThrowsWith(() => run(dense, x, [0, 1]), 'positions have 2 entries', `${T} tokens`);
  assertThrowsWith(() => run(dense, kiln.tensor([1, 2], { dtype: 'int64' })), 'inputIds must be [B, T]', '[2]');
  assertThrowsWith(() => run(dense, kiln.tensor([[1, 2]])), 'int64', 'float32');
});

/** Naive float64 MoE block: per token, softmax over the router, top-k, renormalise, weighted SwiGLU experts. */
function refMoe(x: number[], N: number, H: number, gate: number[], E: number, k: number, experts: { g: number[]; u: number[]; d: number[] }[], I: number, norm: boolean): number[] {
  const out = new Array<number>(N * H).fill(0);
  for (let n = 0; n < N; n++) {
    const xn = x.slice(n * H, (n + 1) * H);
    const logits = Array.from({ length: E }, (_, e) => xn.reduce((s, v, h) => s + v * gate[e * H + h]!, 0));
    const mx = Math.max(...logits);
    const ex = logits.map((l) => Math.exp(l - mx));
    const z = ex.reduce((a, b) => a + b, 0);
    const probs = ex.map((v) => v / z);
    const order = probs.map((p, e) => [p, e] as const).sort((a, b) => b[0] - a[0]).slice(0, k);
    const wsum = order.reduce((s, [p]) => s + p, 0);
    for (const [p, e] of order) {
      const w = norm ? p / wsum : p;
      const { g, u, d } = experts[e]!;
      const act = Array.from({ length: I }, (_, i) => {
        const a = xn.reduce((s, v, h) => s + v * g[i * H + h]!, 0);
        const b = xn.reduce((s, v, h) => s + v * u[i * H + h]!, 0);
        return (a / (1 + Math.exp(-a))) * b;
      });
      for (let h = 0; h < H; h++) out[n * H + h]! += w * act.reduce((s, v, i) => s + v * d[h * I + i]!, 0);
    }
  }
  return out;
}

test('MoE block matches a naive per-token float64 reference (grouped by expert, with unused experts)', () => {
  for (const norm of [true, false]) {
    const cfg = new Qwen3Config({ vocabSize: 8, hiddenSize: 12, intermediateSize: 16, numHiddenLayers: 1, numAttentionHeads: 2, headDim: 6, numExperts: 6, numExpertsPerTok: 2, moeIntermediateSize: 5, normTopkProb: norm });
    const block = new Qwen3SparseMoeBlock(cfg, { generator: new kiln.Generator(3), initStd: 0.3 });
    const [B, T, H] = [2, 5, 12];
    // Few tokens, many experts: some experts get none.
    const xv = randomValues(B * T * H, 17, -2, 2);
    const x = kiln.tensor(xv).reshape([B, T, H]);
    const got = kiln.noGrad(() => block.forward(x));
    assert.deepEqual([...got.shape], [B, T, H]);
    const experts = [...block.experts].map((m) => ({ g: m.gate_proj.weight.toFlatArray(), u: m.up_proj.weight.toFlatArray(), d: m.down_proj.weight.toFlatArray() }));
    const want = refMoe(xv.map(Math.fround), B * T, H, block.gate.weight.toFlatArray(), 6, 2, experts, 5, norm);
    assert.ok(maxAbsDiff(got.toFlatArray(), want) < 1e-5, `norm=${norm}`);
    // With autograd on, the same values (out-of-place accumulation).
    const withGrad = block.forward(x);
    assert.ok(maxAbsDiff(withGrad.toFlatArray(), want) < 1e-5);
  }
});

test('config parsing: rope theta locations, expert count names, defaults, MoE layer selection, errors', () => {
  const base = { vocab_size: 10, hidden_size: 8, intermediate_size: 16, num_hidden_layers: 4, num_attention_heads: 2 };
  const c1 = Qwen3Config.fromJSON({ ...base, rope_theta: 5e5 });
  assert.equal(c1.ropeTheta, 5e5);
  assert.equal(c1.numKeyValueHeads, 2);
  assert.equal(c1.headDim, 4);
  assert.equal(c1.tieWordEmbeddings, false);
  assert.equal(c1.isMoe, false);
  const c2 = Qwen3Config.fromJSON({ ...base, rope_parameters: { rope_theta: 1234, rope_type: 'default' }, head_dim: 6 });
  assert.equal(c2.ropeTheta, 1234);
  assert.equal(c2.headDim, 6);
  const c3 = Qwen3Config.fromJSON({ ...base, num_local_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 4, decoder_sparse_step: 2, mlp_only_layers: [3], norm_topk_prob: true });
  assert.equal(c3.numExperts, 4);
  assert.deepEqual([0, 1, 2, 3].map((i) => c3.isSparseLayer(i)), [false, true, false, false]);
  const c4 = Qwen3Config.fromJSON({ ...base, num_experts: 3, num_experts_per_tok: 1, moe_intermediate_size: 4 });
  assert.equal(c4.numExperts, 3);
  assert.deepEqual(Qwen3Config.fromJSON(c3.toJSON()), c3);
  const fixture = Qwen3Config.fromJSON(readJson(path.join(MOE, 'config.json')));
  assert.equal(fixture.ropeTheta, 10000);
  assert.equal(fixture.numExperts, 4);
  assert.equal(fixture.normTopkProb, true);
  assert.equal(QWEN3_0_6B.vocabSize, 151936);
  assert.equal(QWEN3_0_6B.numHiddenLayers, 28);
  assert.equal(QWEN3_0_6B.numKeyValueHeads, 8);
  assert.equal(QWEN3_0_6B.headDim, 128);
  assert.equal(QWEN3_0_6B.ropeTheta, 1e6);
  assert.equal(QWEN3_0_6B.tieWordEmbeddings, true);
  assertThrowsWith(() => Qwen3Config.fromJSON({ ...base, vocab_size: undefined }), "missing 'vocab_size'");
  assertThrowsWith(() => Qwen3Config.fromJSON({ ...base, num_key_value_heads: 3, num_attention_heads: 4 }), 'multiple of numKeyValueHeads');
  assertThrowsWith(() => Qwen3Config.fromJSON({ ...base, hidden_size: 8.5 }), "'hidden_size'", '8.5');
  assertThrowsWith(() => Qwen3Config.fromJSON({ ...base, rope_parameters: { rope_type: 'yarn', rope_theta: 1 } }), "'yarn'");
  assertThrowsWith(() => Qwen3Config.fromJSON({ ...base, num_experts: 2, num_experts_per_tok: 3, moe_intermediate_size: 4 }), 'numExpertsPerTok (3) exceeds numExperts (2)');
});
