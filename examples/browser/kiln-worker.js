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

function bestDevice(reports) {
  return reports.find((r) => r.type === 'webgpu')?.available ? 'webgpu' : 'cpu';
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

function run() {
  const reports = kiln.probeAccelerators();
  const webgpu = reports.find((r) => r.type === 'webgpu') ?? { available: false, reason: 'not registered' };
  const device = bestDevice(reports);

  // The Wasm CPU path's numbers, which the test checks against a float64 reference.
  const c = wave(48, 0.1).matmul(wave(48, 0.2));
  const flat = c.toFlatArray();
  const check = { n: 48, row0: flat.slice(0, 4), sum: flat.reduce((s, x) => s + x, 0) };

  // Tiny Qwen3, seeded weights (std 1, so the continuation is not one repeated id), greedy.
  const prompt = [1, 5, 9, 2];
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_TINY, { seed: 0, initStd: 1 }).eval();
  const cpuTokens = kiln.generate(model, [prompt], { maxNewTokens: 8 }).toArray()[0].slice(prompt.length);
  let tokens = cpuTokens;
  const t0 = performance.now();
  if (device !== 'cpu') {
    model.to(device);
    tokens = kiln.generate(model, [prompt], { maxNewTokens: 8 }).toArray()[0].slice(prompt.length);
  } else {
    kiln.generate(model, [prompt], { maxNewTokens: 8 });
  }
  const ms = performance.now() - t0;

  const bench = [128, 256].map((n) => benchMatmul(n, device, 5));
  if (device !== 'cpu') bench.push(benchMatmul(256, 'cpu', 3));
  return {
    device,
    cpuPath: typeof WebAssembly === 'object' ? 'WebAssembly' : 'JavaScript',
    webgpu: { available: webgpu.available, reason: webgpu.reason },
    crossOriginIsolated: self.crossOriginIsolated,
    qwen3: { prompt, tokens, cpuTokens, ms },
    check,
    bench,
  };
}

try {
  self.postMessage(run());
} catch (e) {
  self.postMessage({ error: `${e.name}: ${e.message}\n${e.stack}` });
}
