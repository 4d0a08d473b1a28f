// Generation on cuda (issue #17), run by scripts/device/generate.sh from the repo root on the
// device machine after `npx tsc`: the tiny dense and MoE checkpoints' greedy tokens on cuda
// against transformers' (generate.json), alone and batched; the cached step's logits against the
// full forward on cuda; live cuda bytes over a 64-step decode loop; then qwen3-0.6b shapes with
// seeded random weights: one request, and 8 requests batched, tokens/s and time to first token.
import fs from 'node:fs';
import path from 'node:path';
import * as kiln from '../../dist/src/index.js';

// GEN_DEVICE=cpu GEN_SKIP_LARGE=1 tries the script on a machine without a GPU.
const dev = process.env.GEN_DEVICE ?? 'cuda';
const fixtures = 'test/fixtures';
const log = (...a) => console.log(...a);

for (const name of ['qwen3-tiny', 'qwen3-moe-tiny']) {
  const dir = path.join(fixtures, name);
  const model = kiln.models.loadQwen3(dir, { device: dev });
  const ref = JSON.parse(fs.readFileSync(path.join(dir, 'generate.json'), 'utf8'));
  let alone = 0;
  for (const c of ref.cases) {
    const out = kiln.generate(model, [c.prompt], { maxNewTokens: 32 });
    const got = out.toFlatArray().slice(c.prompt.length);
    const k = got.findIndex((id, i) => id !== c.generated[i]);
    if (k < 0) alone++;
    else log(`${name} prompt ${c.prompt.length}: first mismatch at step ${k} (gap ${c.top2_gap[k]})`);
  }
  const e = new kiln.serve.Engine(model, { numBlocks: 32, blockSize: 4 });
  const outs = e.generateAll(ref.cases.map((c) => c.prompt), { maxNewTokens: 32 });
  const batched = outs.filter((o, i) => JSON.stringify(o.outputIds) === JSON.stringify(ref.cases[i].generated)).length;
  e.dispose();
  log(`${name} ${dev} float32: ${alone}/5 alone and ${batched}/5 batched equal transformers (32 tokens each)`);

  // Cached step vs full forward: A's 20 tokens in a 13-token prefill and a 7-token chunk.
  const seq = Array.from({ length: 24 }, (_, i) => (i * 37 + 5) % 96);
  const full = kiln.noGrad(() => model.forward(kiln.tensor([seq], { dtype: 'int64', device: dev }))).toFlatArray();
  const cache = new kiln.serve.PagedKvCache(model.kvGeometry(), { blockSize: 4, numBlocks: 16 });
  const table = [7, 2, 11, 0, 5, 9];
  let worst = 0;
  let ctx = 0;
  for (const n of [13, 7, 1, 1, 1, 1]) {
    const kv = new kiln.serve.PagedStepKv(cache, [{ blockTable: table, contextLen: ctx, numNew: n }]);
    const rows = Array.from({ length: n }, (_, i) => i);
    const pos = rows.map((i) => ctx + i);
    const lg = kiln.scope(() => model.forwardStep(kiln.tensor(seq.slice(ctx, ctx + n), { dtype: 'int64', device: dev }), pos, kv, rows)).toFlatArray();
    kv.dispose();
    for (let i = 0; i < lg.length; i++) worst = Math.max(worst, Math.abs(lg[i] - full[ctx * 96 + i]));
    ctx += n;
  }
  cache.dispose();
  log(`${name} ${dev}: max |cached step - full forward| logits over prefill, chunk and 4 decode steps = ${worst.toExponential(2)}`);

  if (name === 'qwen3-tiny') {
    const m = new kiln.serve.Engine(model, { numBlocks: 16 });
    m.addRequest([1, 2, 3], { maxNewTokens: 100 });
    for (let i = 0; i < 4; i++) m.step();
    kiln.synchronize();
    const before = kiln.memoryStats(dev);
    for (let i = 0; i < 64; i++) m.step();
    kiln.synchronize();
    const after = kiln.memoryStats(dev);
    log(`${dev} 64-step decode loop: allocatedBytes ${before.allocatedBytes} -> ${after.allocatedBytes}, activeAllocations ${before.activeAllocations} -> ${after.activeAllocations}`);
    m.dispose();
  }
}

// qwen3-0.6b shapes, seeded random weights.
for (const dtype of process.env.GEN_SKIP_LARGE ? [] : ['bfloat16', 'float32']) {
  let t = performance.now();
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_0_6B, { seed: 0, dtype, device: dev });
  model.eval();
  log(`qwen3-0.6b ${dtype}: built in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  const prompt = Array.from({ length: 32 }, (_, i) => (i * 7919) % 151936);
  for (const [label, batch] of [['warm-up', 1], ['1 request', 1], ['8 requests', 8]]) {
    const e = new kiln.serve.Engine(model, { numBlocks: 8 * 8 });
    let first = 0;
    t = performance.now();
    for (let b = 0; b < batch; b++) e.addRequest(prompt.map((x) => (x + b) % 151936), { maxNewTokens: 64 }, { onOutput: (o) => { if (!first && o.newIds.length) first = performance.now(); } });
    while (e.hasUnfinished()) e.step();
    kiln.synchronize();
    const s = (performance.now() - t) / 1000;
    const n = e.stats.tokensGenerated;
    log(`  ${label}: ${n} tokens in ${s.toFixed(2)} s = ${(n / s).toFixed(1)} tokens/s, time to first token ${(first - t).toFixed(1)} ms, ${e.stats.steps} steps`);
    e.dispose();
  }
}
