// Issue #20 probe: where a webgpu batch-1 decode step's time goes between the runner and the sampler.
// Medians of 30 reps on a warm Qwen3-0.6B engine (seeded random weights), each part measured alone
// after a synchronize unless said: the sampler's whole call; argmax alone (host dispatch, then its sync);
// argmax + read of the id; the runner + sampler back to back (a step's critical path); the runner's
// device time (events). Prints one JSON line per part.
//   KILN_WEBGPU_BACKEND=vulkan node scripts/device/wg-step.mjs [float16]   (WG_STEP_SMALL=1: smaller matrices, for Dawn's null backend)
import * as kiln from '../../dist/src/index.js';
const dtype = process.argv[2] ?? 'float16';
const dev = 'webgpu';
const config = process.env.WG_STEP_SMALL ? kiln.models.QWEN3_0_6B.with({ vocabSize: 32000, hiddenSize: 256, intermediateSize: 768 }) : kiln.models.QWEN3_0_6B;
const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 0, dtype, device: dev });
model.eval();
const engine = new kiln.serve.Engine(model, { numBlocks: Number(process.env.WG_STEP_BLOCKS ?? 40), maxNumSeqs: 1, prefixCaching: false });
const prompt = Array.from({ length: 128 }, (_, i) => (i * 7919) % config.vocabSize);
engine.addRequest(prompt, { maxNewTokens: 400, ignoreEos: true });
for (let i = 0; i < 20; i++) engine.step();
const runner = engine.decodeRunner;
const seqs = engine.scheduler.running;
const rowsIn = () => seqs.map((s) => ({ tokenId: s.tokens[s.numComputed - 1], position: s.numComputed - 1, blockTable: s.blockTable }));
const samplingRows = seqs.map((s) => ({ params: s.params, promptIds: s.promptIds, outputIds: s.outputIds }));
const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const parts = {};
const time = (name, fn, reps = 30) => {
  const t = [];
  for (let r = 0; r < reps; r++) {
    kiln.synchronize(dev);
    kiln.noGrad(() => kiln.scope(() => { const t0 = performance.now(); fn(); t.push(performance.now() - t0); }));
  }
  parts[name] = Number(med(t).toFixed(3));
};
let logits;
kiln.noGrad(() => { logits = kiln.keep(runner.run(rowsIn())); });
kiln.synchronize(dev);
time('engine.step (sync steps)', () => engine.step());
time('sampler.sample', () => engine.sampler.sample(logits, samplingRows));
time('argmax dispatch (host)', () => kiln.argmax(logits, 1));
time('argmax + synchronize', () => { kiln.argmax(logits, 1); kiln.synchronize(dev); });
time('argmax + read id', () => kiln.argmax(logits, 1).toArray());
time('argmax + to float32 + read', () => kiln.argmax(logits, 1).to('float32').toArray());
time('read logits[0,0:1] (idle)', () => kiln.narrow(logits, 1, 0, 1).toArray());
time('runner.run (host)', () => runner.run(rowsIn()));
time('runner.run + synchronize', () => { runner.run(rowsIn()); kiln.synchronize(dev); });
time('runner.run + sampler.sample', () => engine.sampler.sample(runner.run(rowsIn()), samplingRows));
const dms = [];
for (let r = 0; r < 30; r++) kiln.noGrad(() => kiln.scope(() => {
  kiln.synchronize(dev);
  const e0 = new kiln.Event(dev, { enableTiming: true }).record();
  runner.run(rowsIn());
  const e1 = new kiln.Event(dev, { enableTiming: true }).record();
  kiln.synchronize(dev);
  dms.push(e0.elapsedTime(e1));
}));
parts['runner device (events)'] = Number(med(dms).toFixed(3));
const sms = [];
for (let r = 0; r < 30; r++) kiln.noGrad(() => kiln.scope(() => {
  kiln.synchronize(dev);
  const e0 = new kiln.Event(dev, { enableTiming: true }).record();
  kiln.argmax(logits, 1);
  const e1 = new kiln.Event(dev, { enableTiming: true }).record();
  kiln.synchronize(dev);
  sms.push(e0.elapsedTime(e1));
}));
parts['argmax device (events)'] = Number(med(sms).toFixed(3));
for (const [k, v] of Object.entries(parts)) console.log(JSON.stringify({ part: k, ms: v, dtype }));
process.exit(0);
