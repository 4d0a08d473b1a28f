#!/usr/bin/env node
/**
 * Lists the pipeline labels of one webgpu decode step's dispatches, in order (issue #20: how many
 * dispatches a step has, per layer). Seeded random weights of a Qwen3 config, one request decoding on
 * the serve engine; every dispatch of one warm step is recorded through the accelerator's dispatch
 * path (KILN_WEBGPU_REPLAY=0 is set here, so compiled decode issues its dispatches one by one rather
 * than replaying a recording). Runs against dist/ (build first); on Dawn's null backend it computes
 * nothing and validates the WGSL:
 *
 *   KILN_WEBGPU_BACKEND=null node scripts/webgpu-step-dispatches.mjs [--dtype float16] [--decode compiled] [--hidden 256] [--intermediate 768] [--vocab 32000] [--prompt 16] [--blocks 16] [--all]
 *
 * --blocks: the cache's 16-token blocks (the decode tables' width, so the attention plan's splits:
 * 16 blocks give 4 splits at batch 1, bench/decode.js's 128 + 64 tokens 21 blocks and 6 splits).
 *
 * Prints the labels of the first layer's run (from the step's first dispatch to the one before the
 * labels repeat), the count per label over the whole step, and the total (--all: every label in order).
 */
import { parseArgs } from 'node:util';

process.env.KILN_WEBGPU_REPLAY = '0';
const kiln = await import('../dist/src/index.js');
const { values: a } = parseArgs({ options: { dtype: { type: 'string', default: 'float16' }, decode: { type: 'string', default: 'compiled' }, prompt: { type: 'string', default: '16' }, blocks: { type: 'string', default: '16' }, vocab: { type: 'string', default: '32000' }, hidden: { type: 'string', default: '256' }, intermediate: { type: 'string', default: '768' }, all: { type: 'boolean', default: false } } });
const config = kiln.models.QWEN3_0_6B.with({ vocabSize: Number(a.vocab), hiddenSize: Number(a.hidden), intermediateSize: Number(a.intermediate) });
const acc = kiln.getAccelerator('webgpu');
const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 0, dtype: a.dtype, device: 'webgpu' });
model.eval();
const engine = new kiln.serve.Engine(model, { numBlocks: Number(a.blocks), maxNumSeqs: 1, decode: a.decode, prefixCaching: false });
engine.addRequest(Array.from({ length: Number(a.prompt) }, (_, i) => (i * 7919) % config.vocabSize), { maxNewTokens: 8, ignoreEos: true });
for (let i = 0; i < 6; i++) engine.step();
const labels = [];
const orig = acc.dispatch.bind(acc);
acc.dispatch = (k, bufs, meta, groups) => {
  labels.push(`${k.name} [${groups.join(',')}]`);
  orig(k, bufs, meta, groups);
};
const d0 = acc.dispatchCount;
engine.step();
acc.dispatch = orig;
const total = acc.dispatchCount - d0;
engine.dispose();
// Generated kernels are numbered per program (kiln_k12_...): compare labels without the number.
const shape = (l) => l.replace(/kiln_k\d+_/, 'kiln_k*_').replace(/ \[.*\]$/, '');
if (a.all) for (const l of labels) console.log(l);
else {
  // One layer: the shortest period p such that labels[s..s+p) repeats at s+p, for the first such s.
  let best = null;
  for (let s = 0; s < 20 && !best; s++)
    for (let p = 3; p < 40 && !best; p++) {
      let ok = true;
      for (let i = 0; i < p && ok; i++) ok = shape(labels[s + i] ?? '') === shape(labels[s + p + i] ?? '-') && shape(labels[s + i] ?? '') === shape(labels[s + 2 * p + i] ?? '-');
      if (ok) best = { s, p };
    }
  if (best) {
    console.log(`before the layers (${best.s}):`);
    for (const l of labels.slice(0, best.s)) console.log(`  ${l}`);
    console.log(`one layer (${best.p} dispatches):`);
    for (const l of labels.slice(best.s, best.s + best.p)) console.log(`  ${l}`);
    let e = best.s;
    while (e + best.p <= labels.length && labels.slice(e, e + best.p).every((l, i) => shape(l) === shape(labels[best.s + i]))) e += best.p;
    console.log(`layers repeated: ${(e - best.s) / best.p}; after them (${labels.length - e}):`);
    for (const l of labels.slice(e)) console.log(`  ${l}`);
  }
  const counts = new Map();
  for (const l of labels) counts.set(shape(l), (counts.get(shape(l)) ?? 0) + 1);
  console.log('per label over the step:');
  for (const [l, n] of [...counts].sort((x, y) => y[1] - x[1])) console.log(`${String(n).padStart(5)}  ${l}`);
}
console.log(`dispatches in the step: ${total} (recorded through dispatch: ${labels.length})`);
process.exit(0);
