/**
 * kiln.compile on the Qwen3 tiny fixtures (test/fixtures/qwen3-tiny*, made by
 * scripts/make_qwen3_fixtures.py): compiled vs eager logits in float32 and bfloat16, the MoE
 * model compiled whole (routing and experts on the device, no graph break) for inference and
 * backward, and compiled backward through the dense model against eager gradients.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';

const { Qwen3ForCausalLM, Qwen3MoeForCausalLM } = kiln.models;

const here = path.dirname(fileURLToPath(import.meta.url));
// Compiled tests run from dist/test; the fixtures stay in the source tree.
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const DENSE = path.join(fixtures, 'qwen3-tiny');
const MOE = path.join(fixtures, 'qwen3-moe-tiny');

const inputIds = (dir: string): Tensor => {
  const ref = JSON.parse(fs.readFileSync(path.join(dir, 'reference.json'), 'utf8')) as { input_ids: number[][] };
  return kiln.tensor(ref.input_ids, { dtype: 'int64' });
};

function diffs(a: readonly number[], b: readonly number[]): { max: number; mean: number } {
  assert.equal(a.length, b.length);
  let max = 0;
  let sum = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (!(d <= max)) max = Number.isNaN(d) ? Infinity : d;
    sum += d;
  }
  return { max, mean: sum / a.length };
}

const ids = inputIds(DENSE);
const dense32 = Qwen3ForCausalLM.fromPretrained(DENSE);
const eager32 = kiln.noGrad(() => dense32.forward(ids)).toFlatArray();

test('Qwen3 dense, float32: compiled logits match eager within 1e-4, generated kernels, one compile', (t) => {
  const f = kiln.compile(dense32);
  const logits = kiln.noGrad(() => f(ids));
  assert.equal(logits.dtype, 'float32');
  const d = diffs(logits.toFlatArray(), eager32);
  t.diagnostic(`max |compiled - eager| = ${d.max.toExponential(3)}`);
  assert.ok(d.max <= 1e-4, `max abs diff ${d.max}`);
  assert.equal(f.counters.compiles, 1);
  assert.equal(f.counters.graphBreaks + f.counters.eagerCalls, 0);
  assert.ok(f.programs().inference[0]!.kernelCount > 1, 'the kiln backend generated kernels');
  kiln.noGrad(() => f(ids));
  assert.equal(f.counters.cacheHits, 1);
});

test('Qwen3 dense, bfloat16: compiled logits within bfloat16 rounding of eager, and no less accurate', (t) => {
  const m = Qwen3ForCausalLM.fromPretrained(DENSE).to('bfloat16');
  const f = kiln.compile(m);
  const compiled = kiln.noGrad(() => f(ids));
  assert.equal(compiled.dtype, 'bfloat16');
  const c = compiled.toFlatArray();
  const e = kiln.noGrad(() => m.forward(ids)).toFlatArray();
  const ce = diffs(c, e);
  // The float32 model is the truth both bfloat16 runs approximate. Eager rounds every op's output
  // to bfloat16; fused kernels keep float32 intermediates: the two round differently, so they are
  // compared on the logits' scale and each against float32, not elementwise to 2e-2 absolute.
  const cTruth = diffs(c, eager32);
  const eTruth = diffs(e, eager32);
  const scale = Math.max(...eager32.map(Math.abs));
  t.diagnostic(
    `max |compiled - eager| = ${ce.max.toExponential(3)} (mean ${ce.mean.toExponential(3)}), max |logit| ${scale.toFixed(3)}; ` +
      `vs float32: compiled max ${cTruth.max.toExponential(3)} mean ${cTruth.mean.toExponential(3)}, eager max ${eTruth.max.toExponential(3)} mean ${eTruth.mean.toExponential(3)}`,
  );
  assert.ok(ce.max <= 2e-2 * scale, `max |compiled - eager| ${ce.max} exceeds 2e-2 of the logits' scale ${scale}`);
  assert.ok(ce.mean <= 2e-2, `mean |compiled - eager| ${ce.mean}`);
  // A broken kernel would be far off float32; rounding differences keep the mean error at eager's.
  assert.ok(cTruth.mean <= 1.25 * eTruth.mean, `compiled mean error ${cTruth.mean} vs eager ${eTruth.mean}`);
  assert.equal(f.counters.compiles, 1);
});

test('Qwen3 MoE, fullgraph: routing and experts on the device (llm.topkSoftmax + llm.fusedMoe), no graph break, eager logits', () => {
  const moe = Qwen3MoeForCausalLM.fromPretrained(MOE);
  const x = inputIds(MOE);
  const f = kiln.compile(moe, { fullgraph: true });
  const got = kiln.noGrad(() => f(x)).toFlatArray();
  const want = kiln.noGrad(() => moe.forward(x)).toFlatArray();
  const d = diffs(got, want);
  assert.ok(d.max <= 1e-5, `max |compiled - eager| ${d.max}`);
  assert.equal(f.counters.graphBreaks, 0);
  assert.equal(f.counters.eagerCalls, 0);
  assert.equal(f.counters.compiles, 1);
  const ops = f.programs().inference[0]!.describe();
  assert.match(ops, /llm\.fusedMoe/, 'the sparse expert op runs in the program');
  // A second call replays the program.
  assert.ok(diffs(kiln.noGrad(() => f(x)).toFlatArray(), want).max <= 1e-5);
  assert.equal(f.counters.cacheHits, 1);
});

test('Qwen3 MoE, fullgraph: compiled backward (dense expert form) matches eager gradients', () => {
  const moe = Qwen3MoeForCausalLM.fromPretrained(MOE);
  const x = inputIds(MOE);
  const params = [...moe.parameters()];
  const loss = (t: Tensor): Tensor => moe.forward(t).logsumexp(-1).mean();
  const f = kiln.compile(loss, { fullgraph: true });
  const gradsOf = (g: (t: Tensor) => Tensor): { value: number; grads: (number[] | null)[] } => {
    for (const p of params) p.grad = null;
    const l = g(x);
    l.backward();
    return { value: l.item() as number, grads: params.map((p) => (p.grad ? p.grad.toFlatArray() : null)) };
  };
  const c = gradsOf(f);
  const e = gradsOf(loss);
  assert.equal(f.counters.graphBreaks, 0);
  assert.equal(f.counters.fallbacks, 0);
  assert.equal(f.counters.backwards, 1);
  assert.ok(Math.abs(c.value - e.value) <= 1e-5, `loss ${c.value} vs ${e.value}`);
  e.grads.forEach((g, i) => {
    assert.ok(g && c.grads[i], `parameter ${i} has a gradient`);
    const d = diffs(c.grads[i]!, g);
    assert.ok(d.max <= 1e-5, `parameter ${i}: max |compiled - eager| grad ${d.max}`);
  });
  for (const p of params) p.grad = null;
});

test('Qwen3 dense, float32: compiled backward of a logsumexp loss matches eager gradients of every parameter', () => {
  const params = [...dense32.parameters()];
  const loss = (x: Tensor): Tensor => dense32.forward(x).logsumexp(-1).mean();
  const f = kiln.compile(loss);
  const gradsOf = (g: (x: Tensor) => Tensor): { value: number; grads: (number[] | null)[] } => {
    for (const p of params) p.grad = null;
    const l = g(ids);
    l.backward();
    return { value: l.item() as number, grads: params.map((p) => (p.grad ? p.grad.toFlatArray() : null)) };
  };
  const c = gradsOf(f);
  const e = gradsOf(loss);
  assert.equal(f.counters.backwards, 1);
  assert.equal(f.counters.fallbacks, 0);
  assert.ok(Math.abs(c.value - e.value) <= 1e-4);
  e.grads.forEach((g, i) => {
    assert.ok(g && c.grads[i], `parameter ${i} has a gradient`);
    const d = diffs(c.grads[i]!, g);
    assert.ok(d.max <= 1e-4, `parameter ${i}: max |compiled - eager| grad ${d.max}`);
  });
  for (const p of params) p.grad = null;
});
