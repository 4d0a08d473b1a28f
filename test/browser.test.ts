/**
 * Kiln in a real browser: the ESM bundle (npm run build:browser) and examples/browser/, loaded by the
 * system's headless Chromium (Debian's `chromium`; no browser download) through playwright-core,
 * from a static server that sends the cross-origin isolation headers. Checks that the page loads,
 * that the WebAssembly CPU path computes right (a matmul against a float64 reference, the seeded tiny
 * Qwen3's greedy tokens against Kiln in Node on the same path), and reports whether WebGPU ran
 * (headless Chromium offers SwiftShader's adapter with the flags below) or why not.
 *
 * Skips, saying why, without a Chromium binary (KILN_CHROMIUM names one) or playwright-core.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as kiln from '../src/index.js';
import { setCpuPath } from '../src/kernels/cpu/native/path.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function findChromium(): string | undefined {
  const named = process.env.KILN_CHROMIUM;
  if (named) return fs.existsSync(named) ? named : undefined;
  for (const name of ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome']) {
    for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
      const p = path.join(dir, name);
      if (dir && fs.existsSync(p)) return p;
    }
  }
  return undefined;
}

async function loadPlaywright(): Promise<typeof import('playwright-core') | undefined> {
  try {
    return await import('playwright-core');
  } catch {
    return undefined;
  }
}

/** What examples/browser/kiln-worker.js posts. */
interface PageResult {
  error?: string;
  device: string;
  cpuPath: string;
  webgpu: { available: boolean; reason: string };
  crossOriginIsolated: boolean;
  qwen3: { prompt: number[]; tokens: number[]; cpuTokens: number[]; device: string; fallback?: string; ms: number };
  check: { n: number; row0: number[]; sum: number };
  bench: { n: number; device: string; ms: number; gflops: number }[];
  gpuCheck?: { maxAbsDiff: number };
}

/** The page's check matmul in float64: wave(n, 0.1) @ wave(n, 0.2), wave = sin(0.37 * k + phase) in float32. */
function referenceCheck(n: number): { row0: number[]; sum: number } {
  const wave = (phase: number): Float64Array => Float64Array.from({ length: n * n }, (_, k) => Math.fround(Math.sin(Math.fround(Math.fround(k * 0.37) + phase))));
  const a = wave(Math.fround(0.1));
  const b = wave(Math.fround(0.2));
  const c = new Float64Array(n * n);
  for (let i = 0; i < n; i++) for (let k = 0; k < n; k++) for (let j = 0; j < n; j++) c[i * n + j]! += a[i * n + k]! * b[k * n + j]!;
  return { row0: Array.from(c.subarray(0, 4)), sum: c.reduce((s, x) => s + x, 0) };
}

const chromium = findChromium();

test('examples/browser runs in headless Chromium: the Wasm path computes right, WebGPU runs or says why not', { timeout: 90_000 }, async (t) => {
  if (!chromium) {
    t.skip('no Chromium binary (install Debian\'s chromium, or set KILN_CHROMIUM to one)');
    return;
  }
  const pw = await loadPlaywright();
  if (!pw) {
    t.skip('playwright-core is not installed (npm ci installs it as a devDependency)');
    return;
  }
  const built = spawnSync(process.execPath, [path.join(root, 'scripts', 'build-browser.mjs')], { encoding: 'utf8' });
  assert.equal(built.status, 0, `npm run build:browser failed:\n${built.stderr}`);

  const { startServer } = (await import(pathToFileURL(path.join(root, 'examples', 'browser', 'serve.mjs')).href)) as {
    startServer(root: string): Promise<{ server: import('node:http').Server; url: string }>;
  };
  const { server, url } = await startServer(root);
  const browser = await pw.chromium.launch({
    executablePath: chromium,
    // --no-sandbox: CI runs as root. The WebGPU flags let headless Chromium offer SwiftShader's adapter.
    args: ['--no-sandbox', '--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-angle=swiftshader', '--use-webgpu-adapter=swiftshader'],
  });
  const logs: string[] = [];
  let r: PageResult;
  try {
    const page = await browser.newPage();
    page.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
    await page.goto(`${url}/examples/browser/index.html`);
    await page.waitForFunction('window.kilnResult !== undefined', null, { timeout: 60_000 });
    r = (await page.evaluate('window.kilnResult')) as PageResult;
  } finally {
    await browser.close();
    server.close();
  }
  assert.equal(r.error, undefined, `the page failed: ${r.error}\n${logs.join('\n')}`);
  assert.equal(r.crossOriginIsolated, true, 'the server sends COOP/COEP, so the worker is cross-origin isolated');
  assert.equal(r.cpuPath, 'WebAssembly');

  // The Wasm path against float64.
  const ref = referenceCheck(r.check.n);
  for (let j = 0; j < 4; j++) assert.ok(Math.abs(r.check.row0[j]! - ref.row0[j]!) < 1e-4, `c[0][${j}] = ${r.check.row0[j]}, float64 ${ref.row0[j]}`);
  assert.ok(Math.abs(r.check.sum - ref.sum) < 1e-2, `sum ${r.check.sum}, float64 ${ref.sum}`);

  // The same seeded tiny Qwen3 in Node, on the same (Wasm) cpu path: the same greedy tokens.
  setCpuPath('wasm');
  try {
    const model = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_TINY, { seed: 0, initStd: 1 }).eval();
    const ids = (kiln.generate(model, [r.qwen3.prompt], { maxNewTokens: 8 }).toArray() as number[][])[0]!.slice(r.qwen3.prompt.length);
    assert.deepEqual(r.qwen3.cpuTokens, ids, 'greedy tokens in the browser (Wasm) vs Node (Wasm)');
  } finally {
    setCpuPath(undefined);
  }
  assert.equal(r.qwen3.tokens.length, 8);
  assert.ok(r.bench.length >= 2 && r.bench.every((b) => b.ms > 0 && Number.isFinite(b.gflops)));

  if (r.webgpu.available) {
    assert.equal(r.device, 'webgpu');
    assert.ok(r.gpuCheck && r.gpuCheck.maxAbsDiff < 1e-3, `webgpu matmul vs cpu: ${JSON.stringify(r.gpuCheck)}`);
    // The tiny Qwen3 runs on webgpu once webgpu has every op it needs; until then on cpu, saying why.
    assert.ok(r.qwen3.device === 'webgpu' || (r.qwen3.device === 'cpu' && r.qwen3.fallback), `qwen3 ran on ${r.qwen3.device} without a reason`);
    t.diagnostic(`webgpu ran: ${r.webgpu.reason}; matmul vs cpu max |diff| ${r.gpuCheck.maxAbsDiff}; qwen3 on ${r.qwen3.device}${r.qwen3.fallback ? ` (${r.qwen3.fallback})` : ''}`);
  } else {
    assert.equal(r.device, 'cpu');
    assert.ok(r.webgpu.reason.length > 0);
    t.diagnostic(`webgpu unavailable in this browser: ${r.webgpu.reason}`);
  }
  t.diagnostic(`bench: ${r.bench.map((b) => `${b.n} on ${b.device} ${b.gflops.toFixed(1)} GFLOP/s`).join('; ')}`);
});
