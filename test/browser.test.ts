/**
 * Kiln in a real browser: the ESM bundle (npm run build:browser) and examples/browser/, loaded by the
 * system's headless Chromium (Debian's `chromium`; no browser download) through playwright-core,
 * from a static server that sends the cross-origin isolation headers. Checks that the page loads,
 * that the WebAssembly CPU path computes right (a matmul against a float64 reference, the seeded tiny
 * Qwen3's greedy tokens against Kiln in Node on the same path), that the committed tiny Qwen3
 * checkpoint, fetched by the page, generates transformers' greedy tokens (the fixture's
 * generate.json, which Kiln in Node also gives) on every path the page ran: Wasm, and webgpu eager
 * and compiled where the browser has an adapter (headless Chromium offers SwiftShader's with the
 * flags below); without one, the page says why.
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
  qwen3: { checkpoint: string; prompt: number[]; runs: { device: string; decode: string; tokens: number[]; ms: number }[]; fallback?: string };
  seeded: { prompt: number[]; tokens: number[] };
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
const CHECKPOINT = path.join(root, 'test', 'fixtures', 'qwen3-tiny');

/** WebGPU flags that let headless Chromium offer SwiftShader's adapter. */
const WEBGPU_ARGS = ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-angle=swiftshader', '--use-webgpu-adapter=swiftshader'];

/** No GPU for the browser: headless Chromium then offers no WebGPU adapter (a null requestAdapter()). */
const NO_WEBGPU_ARGS = ['--disable-gpu'];

/** Why the browser tests cannot run here, or null. */
async function missing(): Promise<string | null> {
  if (!chromium) return "no Chromium binary (install Debian's chromium, or set KILN_CHROMIUM to one)";
  if (!(await loadPlaywright())) return 'playwright-core is not installed (npm ci installs it as a devDependency)';
  return null;
}

let bundle: Promise<void> | undefined;
/** npm run build:browser, once for the file's tests. */
function buildBundle(): Promise<void> {
  bundle ??= (async () => {
    const built = spawnSync(process.execPath, [path.join(root, 'scripts', 'build-browser.mjs')], { encoding: 'utf8' });
    assert.equal(built.status, 0, `npm run build:browser failed:\n${built.stderr}`);
  })();
  return bundle;
}

/** Loads examples/browser/ in headless Chromium with these extra flags; what the page posted, and its console. */
async function runPage(extraArgs: readonly string[]): Promise<{ r: PageResult; logs: string[] }> {
  await buildBundle();
  const pw = (await loadPlaywright())!;
  const { startServer } = (await import(pathToFileURL(path.join(root, 'examples', 'browser', 'serve.mjs')).href)) as {
    startServer(root: string): Promise<{ server: import('node:http').Server; url: string }>;
  };
  const { server, url } = await startServer(root);
  // --no-sandbox: CI runs as root.
  const browser = await pw.chromium.launch({ executablePath: chromium, args: ['--no-sandbox', ...extraArgs] });
  const logs: string[] = [];
  try {
    const page = await browser.newPage();
    page.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
    await page.goto(`${url}/examples/browser/index.html`);
    // SwiftShader computes webgpu on the CPU: three generations of 32 tokens take a while.
    await page.waitForFunction('window.kilnResult !== undefined', null, { timeout: 150_000 });
    return { r: (await page.evaluate('window.kilnResult')) as PageResult, logs };
  } finally {
    await browser.close();
    server.close();
  }
}

interface Golden {
  cases: { prompt: number[]; generated: number[] }[];
}

/**
 * What holds with or without WebGPU: the Wasm path's matmul against float64, the seeded model's
 * tokens against Node's (the same weights drawn), and every Qwen3 run of the page against
 * transformers' greedy tokens for its prompt, which Node gives too. Returns the runs as
 * 'device/decode'.
 */
function checkCommon(r: PageResult, logs: readonly string[]): string[] {
  assert.equal(r.error, undefined, `the page failed: ${r.error}\n${logs.join('\n')}`);
  assert.equal(r.crossOriginIsolated, true, 'the server sends COOP/COEP, so the worker is cross-origin isolated');
  assert.equal(r.cpuPath, 'WebAssembly');

  // The Wasm path against float64.
  const ref = referenceCheck(r.check.n);
  for (let j = 0; j < 4; j++) assert.ok(Math.abs(r.check.row0[j]! - ref.row0[j]!) < 1e-4, `c[0][${j}] = ${r.check.row0[j]}, float64 ${ref.row0[j]}`);
  assert.ok(Math.abs(r.check.sum - ref.sum) < 1e-2, `sum ${r.check.sum}, float64 ${ref.sum}`);

  // The same seeded tiny Qwen3 in Node, on the same (Wasm) cpu path: the same weights, the same greedy tokens.
  setCpuPath('wasm');
  let nodeTokens: number[];
  try {
    const model = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_TINY, { seed: 0, initStd: 1 }).eval();
    const ids = (kiln.generate(model, [r.seeded.prompt], { maxNewTokens: 8 }).toArray() as number[][])[0]!.slice(r.seeded.prompt.length);
    assert.deepEqual(r.seeded.tokens, ids, 'seeded weights: greedy tokens in the browser (Wasm) vs Node (Wasm)');
    // The committed checkpoint in Node (Wasm path), for the page's prompt.
    const fixture = kiln.models.loadQwen3(CHECKPOINT);
    nodeTokens = (kiln.generate(fixture, [r.qwen3.prompt], { maxNewTokens: 32 }).toArray() as number[][])[0]!.slice(r.qwen3.prompt.length);
  } finally {
    setCpuPath(undefined);
  }
  // transformers' greedy tokens for the page's prompt; Node gives them too.
  const golden = (JSON.parse(fs.readFileSync(path.join(CHECKPOINT, 'generate.json'), 'utf8')) as Golden).cases.find((c) => c.prompt.join(',') === r.qwen3.prompt.join(','));
  assert.ok(golden, `the page's prompt ${JSON.stringify(r.qwen3.prompt)} is one of generate.json's`);
  assert.deepEqual(nodeTokens, golden.generated, 'Node (Wasm) vs transformers');
  for (const q of r.qwen3.runs) assert.deepEqual(q.tokens, golden.generated, `the page's ${q.device} run (decode ${q.decode}) vs transformers and Node`);
  assert.ok(r.bench.length >= 2 && r.bench.every((b) => b.ms > 0 && Number.isFinite(b.gflops)));
  return r.qwen3.runs.map((q) => `${q.device}/${q.decode}`);
}

function describeRuns(r: PageResult): string {
  return `qwen3 (${r.qwen3.checkpoint}, 32 tokens): ${r.qwen3.runs.map((q) => `${q.device}/${q.decode} ${q.ms.toFixed(0)} ms`).join('; ')}; bench: ${r.bench.map((b) => `${b.n} on ${b.device} ${b.gflops.toFixed(1)} GFLOP/s`).join('; ')}`;
}

test("examples/browser with WebGPU (SwiftShader): the tiny Qwen3 gives transformers' tokens on Wasm and on webgpu, eager and compiled; the webgpu matmul matches", { timeout: 180_000 }, async (t) => {
  const why = await missing();
  if (why) {
    t.skip(why);
    return;
  }
  const { r, logs } = await runPage(WEBGPU_ARGS);
  const ran = checkCommon(r, logs);
  // A Chromium that offers no adapter even with the flags still runs the Wasm path (the next test's case).
  if (!r.webgpu.available) {
    t.diagnostic(`this Chromium offers no WebGPU adapter even with the flags: ${r.webgpu.reason}`);
    assert.deepEqual(ran, ['cpu/default']);
    return;
  }
  assert.equal(r.device, 'webgpu');
  assert.ok(r.gpuCheck && r.gpuCheck.maxAbsDiff < 1e-3, `webgpu matmul vs cpu: ${JSON.stringify(r.gpuCheck)}`);
  // The tiny Qwen3 generates on webgpu, op by op and with its decode step compiled.
  assert.equal(r.qwen3.fallback, undefined, `the tiny Qwen3 fell back to the cpu: ${r.qwen3.fallback}`);
  assert.deepEqual(ran, ['cpu/default', 'webgpu/eager', 'webgpu/compiled']);
  t.diagnostic(`webgpu ran: ${r.webgpu.reason}; matmul vs cpu max |diff| ${r.gpuCheck.maxAbsDiff}`);
  t.diagnostic(describeRuns(r));
});

test("examples/browser without WebGPU: the page says why and runs everything on the Wasm path, transformers' tokens included", { timeout: 120_000 }, async (t) => {
  const why = await missing();
  if (why) {
    t.skip(why);
    return;
  }
  const { r, logs } = await runPage(NO_WEBGPU_ARGS);
  const ran = checkCommon(r, logs);
  assert.equal(r.webgpu.available, false, 'these flags leave the page no WebGPU adapter');
  assert.ok(r.webgpu.reason.length > 0);
  assert.equal(r.device, 'cpu');
  assert.deepEqual(ran, ['cpu/default']);
  assert.ok(r.bench.every((b) => b.device === 'cpu'));
  t.diagnostic(`webgpu unavailable: ${r.webgpu.reason}; ${describeRuns(r)}`);
});
