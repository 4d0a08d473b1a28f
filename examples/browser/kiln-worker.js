/* global self, performance */
/**
 * Kiln in a module worker: the Wasm CPU path needs no worker, but a worker may block (Atomics.wait),
 * which is what a synchronous `toArray()` of device data needs, and it keeps the page responsive.
 * Posts one result object back to the page.
 */
import * as kiln from '../../dist/browser/kiln.js';

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

  // Tiny Qwen3, seeded weights (std 1, so the continuation is not one repeated id), greedy.
  const prompt = [1, 5, 9, 2];
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_TINY, { seed: 0, initStd: 1 }).eval();
  const cpuTokens = kiln.generate(model, [prompt], { maxNewTokens: 8 }).toArray()[0].slice(prompt.length);
  // On the best device; a device without a kernel the model needs (webgpu is Kiln's first slice:
  // no embedding kernel yet) falls back to the cpu, and the page says why.
  let tokens = cpuTokens;
  let qwenDevice = 'cpu';
  let fallback;
  const t0 = performance.now();
  if (device !== 'cpu') {
    try {
      const onDevice = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_TINY, { seed: 0, initStd: 1 }).eval().to(device);
      tokens = kiln.generate(onDevice, [prompt], { maxNewTokens: 8 }).toArray()[0].slice(prompt.length);
      qwenDevice = device;
    } catch (e) {
      fallback = e.message;
    }
  }
  if (qwenDevice === 'cpu') kiln.generate(model, [prompt], { maxNewTokens: 8 });
  const ms = performance.now() - t0;

  const bench = [128, 256].map((n) => benchMatmul(n, device, 5));
  if (device !== 'cpu') bench.push(benchMatmul(256, 'cpu', 3));
  return {
    device,
    cpuPath: typeof WebAssembly === 'object' ? 'WebAssembly' : 'JavaScript',
    webgpu: { available: webgpu.available, reason: webgpu.reason },
    crossOriginIsolated: self.crossOriginIsolated,
    qwen3: { prompt, tokens, cpuTokens, device: qwenDevice, fallback, ms },
    check,
    gpuCheck,
    bench,
  };
}

run().then(
  (r) => self.postMessage(r),
  (e) => self.postMessage({ error: `${e.name}: ${e.message}\n${e.stack}` }),
);
