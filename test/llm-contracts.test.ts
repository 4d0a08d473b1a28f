/**
 * The library's contracts: opcheck (schema, mutation, meta vs real, agreement of every
 * implementation, dynamic dims, backward vs finite differences) for every manifest entry on every
 * available device; the manifest rejects conflicting duplicates; the dispatch policy (prefer, deny,
 * per-op order, env parsing, freeze/thaw) and the manifest hash that compile caches key on.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { defineOp } from '../src/ops/registry.js';
import { policyFromEnv } from '../src/ops/library/policy.js';
import { cacheKey } from '../src/runtime/cache/key.js';
import { programCacheKey } from '../src/compile/cache/program-key.js';
import type { LlmPolicy, OpcheckSample } from '../src/llm/index.js';
import { rand } from './helpers/make.js';
import { llmOpcheckSamples } from './samples/llm.js';

const llm = kiln.llm;
const devices = ['cpu', ...(kiln.isAvailable('cuda') ? ['cuda'] : [])];

test('every manifest entry has opcheck samples, and every llm op a manifest entry', () => {
  const ops = kiln.ops.listOps().filter((o) => o.name.startsWith('llm.')).map((o) => o.name).sort();
  assert.deepEqual(llm.manifestEntries().map((e) => e.op).filter((n) => n.startsWith('llm.')), ops);
  for (const op of ops) assert.ok((llmOpcheckSamples[op] ?? []).length > 0, `${op} has no opcheck samples`);
});

for (const device of devices) {
  for (const entry of llm.manifestEntries().filter((e) => e.op.startsWith('llm.'))) {
    test(`opcheck ${entry.op} on ${device}`, () => {
      const report = llm.opcheck(entry.op, llmOpcheckSamples[entry.op]!, { device });
      assert.ok(report.implementations.includes('reference'), `${entry.op}: no reference implementation was checked`);
      assert.ok(report.checks.some((c) => c.startsWith('dynamic T')), `${entry.op}: dynamic dim T was not checked`);
      if (entry.backward === true) assert.ok(report.checks.some((c) => c.startsWith('backward')));
    });
  }
}

// ---------------------------------------------------------------------------------------------
// opcheck catches broken contracts (ops defined here only for these tests)

const bad = defineOp({
  name: 'llmtest.scale',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'mode', type: 'str' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta: (input: kiln.TensorMeta, mode: string) => ({
    shape: [...input.shape],
    // 'badMeta' predicts transposed strides for a 2-d output the kernel makes contiguous.
    strides: mode === 'badMeta' ? [1, input.shape[0]!] : [input.shape[1]!, 1],
    dtype: input.dtype,
    device: input.device,
  }),
});
llm.registerManifestEntry({ op: bad.name, kind: 'opaque', mutates: [], dynamic: [], requires: [], dtypes: ['float32'], backward: 'test op' });
llm.registerLlmImpl(bad.name, {
  name: 'cpu-kernel',
  kind: 'kernel',
  device: 'cpu',
  priority: 0,
  fn: (_ctx, input, mode) => {
    const x = input as kiln.Tensor;
    if (mode === 'mutates') x.mul_(3); // writes its input without declaring it
    return kiln.mul(x, 2).contiguous();
  },
});
llm.registerLlmImpl(bad.name, { name: 'reference', kind: 'reference', device: '*', priority: 0, fn: (_ctx, input, mode) => kiln.mul(input as kiln.Tensor, mode === 'disagree' ? 2.5 : 2) });

// Samples must be deterministic: every implementation gets freshly made, equal arguments.
const badSample = (mode: string): OpcheckSample[] => [{ label: mode, make: () => [rand([2, 3], 1), mode] }];

test('opcheck passes a correct op and reports each kind of broken contract', () => {
  assert.ok(llm.opcheck(bad.name, badSample('ok')).checks.length > 0);
  assert.throws(() => llm.opcheck(bad.name, badSample('mutates')), /cpu-kernel: modified argument 'input', which the schema does not declare mutated/);
  assert.throws(() => llm.opcheck(bad.name, badSample('badMeta')), /output 0 strides: meta \[1, 2\], real \[3, 1\]/);
  assert.throws(() => llm.opcheck(bad.name, badSample('disagree')), /reference vs cpu-kernel: output 0 differs/);
  assert.throws(() => llm.opcheck(bad.name, []), /no samples/);
});

const lazy = defineOp({
  name: 'llmtest.lazyInplace',
  args: [{ name: 'input', type: 'Tensor', mutated: true }],
  outputs: [{ name: 'input', type: 'Tensor', aliasOf: 'input' }],
  tags: ['inplace'],
  meta: (input: kiln.TensorMeta & { offset?: number }) => ({ shape: [...input.shape], strides: [...input.strides], dtype: input.dtype, device: input.device, offset: input.offset ?? 0 }),
});
llm.registerManifestEntry({ op: lazy.name, kind: 'opaque', mutates: ['input'], dynamic: [], requires: [], dtypes: ['float32'], backward: 'test op' });
llm.registerLlmImpl(lazy.name, { name: 'cpu-kernel', kind: 'kernel', device: 'cpu', priority: 0, fn: (_ctx, input) => kiln.clone(input as kiln.Tensor) });

test('opcheck reports a declared-mutated argument that is not written and an alias that is not one', () => {
  assert.throws(
    () => llm.opcheck(lazy.name, [{ label: 'x', make: () => [rand([3], 2)] }]),
    (e: Error) => /declared mutated but was not written/.test(e.message) && /declared to alias 'input' but has its own storage/.test(e.message),
  );
});

test('the manifest rejects a conflicting duplicate and one that contradicts the schema', () => {
  const entry = llm.manifestEntry('llm.rmsNorm')!;
  llm.registerManifestEntry({ ...entry }); // the same entry again is a no-op
  assert.throws(() => llm.registerManifestEntry({ ...entry, kind: 'opaque' }), /already registered with a different contract/);
  const fresh = defineOp({ name: 'llmtest.fresh', args: [{ name: 'input', type: 'Tensor' }], outputs: [{ name: 'out', type: 'Tensor' }], meta: (x: kiln.TensorMeta) => x });
  assert.throws(() => llm.registerManifestEntry({ ...entry, op: fresh.name, mutates: ['input'] }), /declares mutated \[input\] but its schema mutates \[\]/);
  assert.throws(() => llm.registerManifestEntry({ ...entry, op: fresh.name }), /declares a backward formula but none is registered/);
  assert.throws(() => llm.registerManifestEntry({ ...entry, op: 'llm.noSuchOp' }), /not a registered op/);
  assert.throws(() => llm.registerLlmImpl('llm.rmsNorm', { ...llm.llmImpls('llm.rmsNorm')[0]! }), /op 'llm\.rmsNorm' already has an implementation named 'cpu-kernel'/);
});

// ---------------------------------------------------------------------------------------------
// dispatch policy

test('policy: default prefers the library kernel; prefer, deny and per-op order change the choice', () => {
  llm.resetLlmPolicy();
  assert.equal(llm.llmChoice('llm.rmsNorm').name, 'cpu-kernel');
  llm.setLlmPolicy({ prefer: ['reference'] });
  assert.equal(llm.llmChoice('llm.rmsNorm').name, 'reference');
  llm.setLlmPolicy({ deny: ['kernel'] });
  assert.equal(llm.llmChoice('llm.siluAndMul').name, 'reference');
  llm.setLlmPolicy({ prefer: ['kernel'], order: { 'llm.moeSum': ['reference'] } });
  assert.equal(llm.llmChoice('llm.moeSum').name, 'reference');
  assert.equal(llm.llmChoice('llm.rmsNorm').name, 'cpu-kernel');
  llm.setLlmPolicy({ deny: ['kernel', 'reference'] });
  assert.throws(() => llm.rmsNorm(kiln.randn([2, 4]), kiln.ones([4])), /llm\.rmsNorm: no implementation for device cpu is allowed by the llm dispatch policy/);
  llm.resetLlmPolicy();
});

test('policy: the chosen implementation is what runs (reference and kernel agree closely)', () => {
  const x = kiln.randn([4, 16]);
  const w = kiln.randn([16]);
  llm.setLlmPolicy({ prefer: ['reference'] });
  const viaRef = llm.rmsNorm(x, w).toFlatArray();
  llm.resetLlmPolicy();
  const viaKernel = llm.rmsNorm(x, w).toFlatArray();
  assert.notDeepEqual(viaRef, viaKernel, 'both policies ran the same implementation (bitwise equal results)');
  viaRef.forEach((v, i) => assert.ok(Math.abs(v - viaKernel[i]!) < 1e-5));
});

test('policy: bad policies are rejected with the field named', () => {
  assert.throws(() => llm.setLlmPolicy({ prefer: ['fast' as 'kernel'] }), /'prefer' lists unknown kind 'fast'/);
  assert.throws(() => llm.setLlmPolicy({ nope: 1 } as unknown as LlmPolicy), /unknown llm policy field 'nope'/);
  assert.deepEqual(policyFromEnv('{"deny":["vendor"],"order":{"llm.rmsNorm":["reference"]}}'), { prefer: undefined, deny: ['vendor'], order: { 'llm.rmsNorm': ['reference'] } });
  assert.equal(policyFromEnv(''), undefined);
  assert.throws(() => policyFromEnv('prefer=kernel'), /KILN_LLM_POLICY: expected JSON/);
});

test('policy: freeze pins choices and the hash; changing it while frozen throws until thaw', () => {
  llm.resetLlmPolicy();
  const h0 = llm.llmManifestHash();
  llm.freezeLlmPolicy();
  assert.ok(llm.isLlmPolicyFrozen());
  assert.throws(() => llm.setLlmPolicy({ prefer: ['reference'] }), /frozen .*thawLlmPolicy/);
  assert.equal(llm.llmManifestHash(), h0);
  llm.thawLlmPolicy();
  llm.setLlmPolicy({ prefer: ['reference'] });
  const h1 = llm.llmManifestHash();
  assert.notEqual(h1, h0, 'a different choice must give a different hash');
  const parts = { signature: 'g', guardKey: 'k', mode: 'default', backend: 'kiln', devices: ['cpu'] };
  const p1 = programCacheKey(parts);
  const kernel1 = cacheKey(['js-kernel', 'h']);
  llm.resetLlmPolicy();
  assert.equal(llm.llmManifestHash(), h0);
  assert.match(p1 ?? '', /^[0-9a-f]{64}$/);
  assert.notEqual(programCacheKey(parts), p1, 'compiled-program keys include the llm choices');
  assert.equal(cacheKey(['js-kernel', 'h']), kernel1, 'kernel keys (content-addressed) do not depend on the llm choices');
});

test('kiln.compile freezes the policy on its first compile', () => {
  llm.thawLlmPolicy();
  const f = kiln.compile((x: kiln.Tensor) => llm.siluAndMul(x), { fullgraph: true });
  kiln.noGrad(() => f(kiln.randn([2, 4])));
  assert.ok(llm.isLlmPolicyFrozen());
  llm.thawLlmPolicy();
});

test('an eagerOnly op breaks the graph: eager fallback normally, a named error with fullgraph', () => {
  const op = defineOp({
    name: 'llmtest.eagerOnly',
    args: [{ name: 'input', type: 'Tensor' }],
    outputs: [{ name: 'out', type: 'Tensor' }],
    tags: ['dataDependent'],
    meta: (x: kiln.TensorMeta) => ({ shape: [...x.shape], strides: [...x.strides], dtype: x.dtype, device: x.device }),
  });
  assert.throws(() => llm.registerManifestEntry({ op: op.name, kind: 'opaque', mutates: [], dynamic: [], requires: [], dtypes: ['float32'], backward: 'test' }), /declared opaque but is tagged 'dataDependent'/);
  llm.registerManifestEntry({ op: op.name, kind: 'eagerOnly', mutates: [], dynamic: [], requires: [], dtypes: ['float32'], backward: 'test' });
  llm.registerLlmImpl(op.name, { name: 'cpu-kernel', kind: 'kernel', device: 'cpu', priority: 0, fn: (_ctx, x) => kiln.mul(x as kiln.Tensor, 2) });
  const fn = (x: kiln.Tensor): kiln.Tensor => kiln.ops.dispatch(op, x);
  const strict = kiln.compile(fn, { fullgraph: true });
  assert.throws(() => kiln.noGrad(() => strict(kiln.ones([2]))), /graph break .*op 'llmtest\.eagerOnly' is data dependent/);
  const lax = kiln.compile(fn);
  const y = kiln.noGrad(() => lax(kiln.ones([2])));
  assert.deepEqual(y.toArray(), [2, 2]);
  assert.equal(lax.counters.graphBreaks, 1);
});

test('KILN_LLM_POLICY sets the policy at load; a malformed value fails loudly', () => {
  const child = fileURLToPath(new URL('./helpers/llm-policy-child.js', import.meta.url));
  const run = (value: string): ReturnType<typeof spawnSync> => spawnSync(process.execPath, [child], { encoding: 'utf8', env: { ...process.env, KILN_LLM_POLICY: value } });
  const ok = run('{"prefer":["kernel"],"order":{"llm.rmsNorm":["reference"]}}');
  assert.equal(ok.status, 0, String(ok.stderr));
  assert.deepEqual(JSON.parse(String(ok.stdout).trim()), { rmsNorm: 'reference', siluAndMul: 'cpu-kernel' });
  const bad = run('{"prefer":["fastest"]}');
  assert.notEqual(bad.status, 0);
  assert.match(String(bad.stderr), /KILN_LLM_POLICY: llm policy 'prefer' lists unknown kind 'fastest'/);
});

test('kiln.ops.llm is kiln.llm', () => {
  assert.equal(kiln.ops.llm.rmsNorm, kiln.llm.rmsNorm);
  assert.equal(kiln.ops.llm.opcheck, kiln.llm.opcheck);
});
