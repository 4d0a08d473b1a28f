/**
 * KILN_CUDA_L2_PREFETCH: the L2 prefetch of the weights read after a paged-attention step
 * (compile/codegen/cuda/l2-prefetch-plan.ts, kernels/cuda/l2-prefetch.ts). Without a GPU: the
 * kernel's source is a PDL pre-wait section that pdl.ts accepts (so it runs while the kernel before
 * it drains), its chunk arithmetic against a model of it written here, and the plan on a traced
 * two-layer decode graph lowered for cuda (the weights after each attention step, in use order,
 * within the budget and range count, the fused gate|up weight in place of the model's two). On
 * cuda (skipped without a device): the engine's compiled decode gives transformers' greedy tokens
 * with the prefetch on, and the prefetch kernel runs.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { CUDA_FUSION } from '../src/compile/codegen/cuda/backend.js';
import { planL2Prefetch } from '../src/compile/codegen/cuda/l2-prefetch-plan.js';
import type { ValueId } from '../src/compile/ir.js';
import { lower } from '../src/compile/lower/lower.js';
import { schedule } from '../src/compile/lower/schedule.js';
import { runPasses } from '../src/compile/passes/index.js';
import { L2_PREFETCH_CHUNK, L2_PREFETCH_MAX_RANGES, l2PrefetchBlocks, l2PrefetchSource, l2PrefetchStats } from '../src/kernels/cuda/l2-prefetch.js';
import { setOption } from '../src/runtime/config.js';
import { hasPdlPrologue, insertPdlPrologue, prefetchSectionSafe } from '../src/runtime/cuda/pdl.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

test('l2 prefetch kernel: one PDL pre-wait section of L2 prefetches, the wait after it', () => {
  const src = l2PrefetchSource();
  const section = src.slice(src.indexOf('// kiln-pdl-prefetch:'), src.indexOf('// kiln-pdl-prefetch-end'));
  assert.ok(prefetchSectionSafe(section), 'only L2 prefetches before the wait');
  assert.equal(hasPdlPrologue(src, 'kiln_l2_prefetch'), false, 'no wait yet: no PDL launch');
  const withPdl = insertPdlPrologue(src, 132);
  assert.ok(hasPdlPrologue(withPdl, 'kiln_l2_prefetch'));
  assert.ok(withPdl.indexOf('cp.async.bulk.prefetch.L2.global') < withPdl.indexOf('griddepcontrol.wait'));
  assert.equal(withPdl.split('griddepcontrol.wait').length - 1, 1);
  assert.equal(src.match(/long long n\d/g)?.length, L2_PREFETCH_MAX_RANGES);
  assert.equal(L2_PREFETCH_CHUNK % 16, 0, 'the instruction takes multiples of 16 bytes');
});

/**
 * What the kernel asks for, modelled from its source's arithmetic: every (address, bytes) the
 * threads of `blocks` x 32 issue for ranges `n` (addresses as offsets from each range's start).
 */
function modelRequests(n: readonly number[], blocks: number): { range: number; off: number; bytes: number }[] {
  const C = L2_PREFETCH_CHUNK;
  const ends: number[] = [];
  n.forEach((b, r) => ends.push((r === 0 ? 0 : ends[r - 1]!) + Math.ceil(b / C)));
  const out: { range: number; off: number; bytes: number }[] = [];
  for (let t = 0; t < blocks * 32; t++) {
    for (let i = t; i < ends.at(-1)!; i += blocks * 32) {
      const r = ends.findIndex((e) => i < e);
      const off = (i - (r === 0 ? 0 : ends[r - 1]!)) * C;
      const bytes = Math.min(C, n[r]! - off) & ~15;
      if (bytes > 0) out.push({ range: r, off, bytes });
    }
  }
  return out;
}

test('l2 prefetch kernel: its chunks cover each range once, up to the last 16-byte granule', () => {
  for (const n of [[4 << 20, 12 << 20, 6 << 20, 0], [100, 0, 8192 * 3 + 40, 17], [1, 2, 3, 4]]) {
    const chunks = n.reduce((a, b) => a + Math.ceil(b / L2_PREFETCH_CHUNK), 0);
    for (const blocks of [1, l2PrefetchBlocks(chunks, 132), 3]) {
      const reqs = modelRequests(n, blocks);
      n.forEach((bytes, r) => {
        const mine = reqs.filter((q) => q.range === r).sort((a, b) => a.off - b.off);
        let at = 0;
        for (const q of mine) {
          assert.equal(q.off, at, `range ${r}: contiguous chunks`);
          at += q.bytes;
        }
        assert.equal(at, bytes & ~15, `range ${r} (${bytes} bytes, ${blocks} blocks): covered to the last granule`);
      });
    }
  }
  // One chunk a thread where the SMs allow it; at most two blocks an SM.
  assert.equal(l2PrefetchBlocks((22 << 20) / L2_PREFETCH_CHUNK, 132), 88);
  assert.equal(l2PrefetchBlocks(1e6, 132), 264);
  assert.equal(l2PrefetchBlocks(0, 132), 1);
});

/** Two decode layers on lifted weights: qkv linear, paged attention, o, residual, gate/up, silu*mul, down. */
function decodeLayers(H: number, I: number) {
  const heads = 2;
  const D = H / heads;
  const w = (n: number, k: number): kiln.Tensor => kiln.randn([n, k], { dtype: 'bfloat16' });
  const layers = [0, 1].map(() => ({ qkv: w(3 * H, H), o: w(H, H), gate: w(I, H), up: w(I, H), down: w(H, I) }));
  const head = w(256, H);
  const fn = (x: kiln.Tensor, kc: kiln.Tensor, vc: kiln.Tensor, tables: kiln.Tensor, lens: kiln.Tensor): kiln.Tensor => {
    let h = x;
    for (const l of layers) {
      const qkv = kiln.linear(h, l.qkv, null);
      const q = qkv.narrow(1, 0, H).reshape([1, heads, D]);
      const a = kiln.llm.pagedAttention(q, kc, vc, tables, lens, 0.5).reshape([1, H]);
      h = h.add(kiln.linear(a, l.o, null));
      const m = kiln.silu(kiln.linear(h, l.gate, null)).mul(kiln.linear(h, l.up, null));
      h = h.add(kiln.linear(m, l.down, null));
    }
    return kiln.linear(h, head, null);
  };
  const args = [
    kiln.randn([1, H], { dtype: 'bfloat16' }),
    kiln.randn([4, 8, heads, D], { dtype: 'bfloat16' }),
    kiln.randn([4, 8, heads, D], { dtype: 'bfloat16' }),
    kiln.tensor([[0, 1]], { dtype: 'int32' }),
    kiln.tensor([9], { dtype: 'int32' }),
  ];
  return { fn, args, layers, head };
}

test('l2 prefetch plan: after each attention step, the next weights in use order within the budget', () => {
  const H = 64;
  const I = 128;
  const { fn, args, layers } = decodeLayers(H, I);
  const { graph: traced } = trace(fn as (...a: never[]) => unknown, args);
  const bytes = (n: number, k: number): number => n * k * 2;
  for (const fused of [false, true]) {
    const { graph } = runPasses(traced, { horizontalFusion: fused, linearSiluMul: fused });
    const low = lower(graph, CUDA_FUSION);
    const steps = schedule(low).steps;
    const liftedInputs = graph.inputs.filter((i) => i.source.kind === 'lifted');
    const lifted = new Set(liftedInputs.map((i) => i.id));
    const tensorOf = new Map<ValueId, kiln.Tensor>(liftedInputs.map((i) => [i.id, (i.source as { tensor: kiln.Tensor }).tensor]));
    const attention = steps.flatMap((s, i) => (s.kind === 'extern' && s.node.op === 'llm.pagedAttention' ? [i] : []));
    assert.equal(attention.length, 2);
    const label = fused ? 'gate|up fused' : 'separate linears';
    // Room for everything: layer 0's o, gate, up (or gate|up), down, then layer 1's qkv (up to the
    // four ranges); after layer 1's attention its o, gate/up, down and the LM head.
    const wide = planL2Prefetch(steps, lifted, low.values, { maxBytes: 2 ** 30, maxRanges: L2_PREFETCH_MAX_RANGES });
    assert.deepEqual([...wide.keys()], attention, `${label}: a prefetch before each attention step only`);
    const first = wide.get(attention[0]!)!.map((id) => tensorOf.get(id));
    const mlp = fused ? 1 : 2;
    assert.equal(first[0], layers[0]!.o, `${label}: the o projection first`);
    assert.equal(first.length, L2_PREFETCH_MAX_RANGES, `${label}: up to the range count`);
    if (fused) {
      // The gate|up weight is the passes' concatenated constant (what the GEMV reads), not gate or up.
      assert.ok(first[1] !== layers[0]!.gate && first[1] !== layers[0]!.up);
      assert.deepEqual(first[1]!.shape, [2 * I, H]);
      assert.equal(first[2], layers[0]!.down);
    } else {
      assert.deepEqual(first.slice(1, 4), [layers[0]!.gate, layers[0]!.up, layers[0]!.down]);
    }
    if (fused) assert.deepEqual(first[3]!.shape, [3 * H, H], `${label}: then the next layer's qkv`);
    // A budget of o + gate/up: stops before down (never skips a weight to fit a later one).
    const tight = planL2Prefetch(steps, lifted, low.values, { maxBytes: bytes(H, H) + bytes(2 * I, H) + 1, maxRanges: 4 });
    assert.equal(tight.get(attention[0]!)!.length, 1 + mlp, `${label}: o and gate/up only`);
    // Nothing fits: no prefetch at all.
    assert.equal(planL2Prefetch(steps, lifted, low.values, { maxBytes: bytes(H, H) - 1, maxRanges: 4 }).size, 0);
    // Only lifted weights: the activations the linears read are never planned.
    for (const ids of wide.values()) for (const id of ids) assert.ok(lifted.has(id));
  }
});

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;

test('l2 prefetch on cuda: compiled decode gives transformers\' greedy tokens with the prefetch, and runs it', { skip }, () => {
  const folder = path.join(fixtures, 'qwen3-tiny');
  const ref = JSON.parse(fs.readFileSync(path.join(folder, 'generate.json'), 'utf8')) as { new_tokens: number; cases: { prompt: number[]; generated: number[] }[] };
  const model = kiln.models.loadQwen3(folder, { dtype: 'float32', device: 'cuda' });
  setOption('KILN_CUDA_L2_PREFETCH', 'attn');
  try {
    const before = l2PrefetchStats.launches;
    const engine = new kiln.serve.Engine(model, { numBlocks: 48, decode: 'compiled' });
    const outs = engine.generateAll(ref.cases.map((c) => c.prompt), { maxNewTokens: ref.new_tokens });
    ref.cases.forEach((c, i) => assert.deepEqual(outs[i]!.outputIds, c.generated, `prompt ${i}`));
    // Captured into the step's CUDA graph: launched while capturing, once per layer and bucket.
    assert.ok(l2PrefetchStats.launches > before, `prefetch launches ${l2PrefetchStats.launches - before}`);
    engine.dispose();
  } finally {
    setOption('KILN_CUDA_L2_PREFETCH', undefined);
  }
});
