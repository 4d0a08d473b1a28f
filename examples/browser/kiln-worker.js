/* global self, performance, fetch, URL */
/**
 * Kiln in a module worker: the Wasm CPU path needs no worker, but a worker may block (Atomics.wait),
 * which is what a synchronous `toArray()` of device data needs, and it keeps the page responsive.
 * Posts one result object back to the page.
 *
 * The tiny Qwen3 is the repository's committed checkpoint (test/fixtures/qwen3-tiny: 2 layers, 96
 * ids, about 320 KB of safetensors), fetched from the same server as the page (nothing from the
 * network beyond it) and read with kiln.io.parseSafetensors. Its greedy tokens are transformers'
 * (the fixture's generate.json), which test/browser.test.ts checks for every path the page ran.
 */
import * as kiln from '../../dist/browser/kiln.js';

/** The committed checkpoint, served from the repository root as the page is. */
const CHECKPOINT = new URL('../../test/fixtures/qwen3-tiny/', import.meta.url);
/** A prompt of the fixture's generate.json (token ids: the fixture has no tokenizer), and its length there. */
const PROMPT = [43, 49, 70];
const NEW_TOKENS = 32;

/** A deterministic [n, n] matrix without the RNG: sin(0.37 * (i * n + j) + phase). */
export function wave(n, phase) {
  return kiln.arange(n * n).reshape([n, n]).float().mul(0.37).add(phase).sin();
}

function benchMatmul(n, device, reps) {
  const a = wave(n, 0.1).to(device);
  const b = wave(n, 0.2).to(device);
  a.matmul(b).toArray(); // warm-up: kernels compiled, buffers cached
  const t0 = performance.now();
  let c;
  for (let i = 0; i < reps; i++) c = a.matmul(b);
  c.sum().item(); // waits for the device
  const ms = (performance.now() - t0) / reps;
  return { n, device, ms, gflops: (2 * n ** 3) / (ms * 1e6) };
}

async function fetchOk(name) {
  const res = await fetch(new URL(name, CHECKPOINT));
  if (!res.ok) throw new Error(`fetching ${name} of ${CHECKPOINT}: HTTP ${res.status}`);
  return res;
}

/**
 * A Hugging Face Qwen3 folder over fetch: config.json, the shard index and each shard's bytes
 * (kiln.io.parseSafetensors), loaded into a model built without random weights.
 */
async function loadCheckpoint() {
  const config = kiln.models.Qwen3Config.fromJSON(await (await fetchOk('config.json')).json());
  const index = await (await fetchOk('model.safetensors.index.json')).json();
  const weights = {};
  for (const shard of new Set(Object.values(index.weight_map))) {
    Object.assign(weights, kiln.io.parseSafetensors(await (await fetchOk(shard)).arrayBuffer(), { name: shard }));
  }
  const model = new kiln.models.Qwen3ForCausalLM(config, { init: false }).eval();
  model.loadStateDict(weights);
  for (const t of Object.values(weights)) t.dispose();
  return model;
}

/** Greedy tokens of the prompt and how long they took (decode: the engine's decode path). */
function generate(model, decode) {
  const t0 = performance.now();
  const ids = kiln.generate(model, [PROMPT], { maxNewTokens: NEW_TOKENS, decode }).toArray()[0].slice(PROMPT.length);
  return { decode: decode ?? 'default', tokens: ids, ms: performance.now() - t0 };
}

async function run() {
  // A browser opens its WebGPU device asynchronously (a device worker of its own); after this the
  // webgpu device is used synchronously like any other, toArray() included.
  const webgpu = await kiln.prepareWebgpu();
  const device = webgpu.available ? 'webgpu' : 'cpu';

  // The Wasm CPU path's numbers, which the test checks against a float64 reference.
  const c = wave(48, 0.1).matmul(wave(48, 0.2));
  const flat = c.toFlatArray();
  const check = { n: 48, row0: flat.slice(0, 4), sum: flat.reduce((s, x) => s + x, 0) };
  let gpuCheck;
  if (device !== 'cpu') {
    const g = wave(48, 0.1).to(device).matmul(wave(48, 0.2).to(device)).toFlatArray();
    gpuCheck = { maxAbsDiff: g.reduce((m, x, i) => Math.max(m, Math.abs(x - flat[i])), 0) };
  }

  // Seeded random weights (std 1, so the continuation is not one repeated id) on the cpu: the
  // test checks that the browser draws the same weights as Node.
  const seededPrompt = [1, 5, 9, 2];
  const seededModel = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_TINY, { seed: 0, initStd: 1 }).eval();
  const seeded = { prompt: seededPrompt, tokens: kiln.generate(seededModel, [seededPrompt], { maxNewTokens: 8 }).toArray()[0].slice(seededPrompt.length) };

  // The committed checkpoint: greedy on the cpu (Wasm), then on webgpu eager and with the decode
  // step compiled (fused WGSL programs). Where webgpu lacks something the model needs, the page
  // says so and keeps the cpu's answer.
  const model = await loadCheckpoint();
  const runs = [{ device: 'cpu', ...generate(model) }];
  let fallback;
  if (device !== 'cpu') {
    try {
      model.to(device);
      for (const decode of ['eager', 'compiled']) runs.push({ device, ...generate(model, decode) });
    } catch (e) {
      fallback = `${e.name}: ${e.message}`;
    }
  }

  const bench = [128, 256].map((n) => benchMatmul(n, device, 5));
  if (device !== 'cpu') bench.push(benchMatmul(256, 'cpu', 3));
  return {
    device,
    cpuPath: typeof WebAssembly === 'object' ? 'WebAssembly' : 'JavaScript',
    webgpu: { available: webgpu.available, reason: webgpu.reason },
    crossOriginIsolated: self.crossOriginIsolated,
    qwen3: { checkpoint: 'test/fixtures/qwen3-tiny', prompt: PROMPT, runs, fallback },
    seeded,
    check,
    gpuCheck,
    bench,
  };
}

run().then(
  (r) => self.postMessage(r),
  (e) => self.postMessage({ error: `${e.name}: ${e.message}\n${e.stack}` }),
);
