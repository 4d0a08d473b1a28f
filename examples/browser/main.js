/* global document, window, Worker, URL */
/**
 * The page's side: starts Kiln's worker and shows what it reports. The result is also left on
 * `window.kilnResult` (test/browser.test.ts reads it).
 */
const out = document.getElementById('out');
const worker = new Worker(new URL('./kiln-worker.js', import.meta.url), { type: 'module' });
worker.onmessage = (ev) => {
  const r = ev.data;
  window.kilnResult = r;
  if (r.error) {
    out.textContent = `error: ${r.error}`;
    return;
  }
  const lines = [
    `device: ${r.device}${r.device === 'cpu' ? ` (${r.cpuPath})` : ''}`,
    `webgpu: ${r.webgpu.available ? 'available' : 'unavailable'}: ${r.webgpu.reason}`,
    `cross-origin isolated: ${r.crossOriginIsolated}`,
    '',
    `Qwen3 (${r.qwen3.checkpoint}) greedy, prompt ${JSON.stringify(r.qwen3.prompt)}:`,
    ...r.qwen3.runs.map((q) => `  ${q.device}, decode ${q.decode}: ${JSON.stringify(q.tokens)} in ${q.ms.toFixed(0)} ms`),
    ...(r.qwen3.fallback ? [`  (not on ${r.device}: ${r.qwen3.fallback})`] : []),
    `Qwen3 (tiny, seeded weights) on cpu: ${JSON.stringify(r.seeded.prompt)} -> ${JSON.stringify(r.seeded.tokens)}`,
    ...(r.gpuCheck ? [`matmul ${r.device} vs cpu: max |diff| ${r.gpuCheck.maxAbsDiff.toExponential(2)}`] : []),
    `matmul check (cpu): c[0][0..3] = ${r.check.row0.map((x) => x.toFixed(4)).join(', ')}, sum ${r.check.sum.toFixed(4)}`,
    '',
    'matmul benchmark:',
    ...r.bench.map((b) => `  ${b.n}x${b.n} on ${b.device}: ${b.ms.toFixed(2)} ms, ${b.gflops.toFixed(2)} GFLOP/s`),
  ];
  out.textContent = lines.join('\n');
};
worker.onerror = (e) => {
  window.kilnResult = { error: e.message };
  out.textContent = `worker error: ${e.message}`;
};
