#!/usr/bin/env node
/**
 * scripts/pack-check.sh's browser step: the installed package's `kilnjs/browser` loads in the
 * system's headless Chromium (through playwright-core; no browser download) and computes a matmul
 * on the WebAssembly cpu path, both on a page's main thread (a bare `import 'kilnjs/browser'`
 * through an import map) and in a module worker (the setup docs/browser.md describes, with
 * `await kiln.prepareWebgpu()`, which starts the shipped webgpu-device.js next to kiln.js).
 *
 * Usage: node scripts/pack-check-browser.mjs <app folder> <file: URL kilnjs/browser resolves to>
 * Serves the app folder (its node_modules/kilnjs is the installed tarball) with the cross-origin
 * isolation headers (examples/browser/serve.mjs). Exits 0 with a "skipped" line when no Chromium
 * is found (KILN_CHROMIUM names one) or playwright-core is missing.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [app, entry] = process.argv.slice(2);
if (!app || !entry) {
  console.error('usage: pack-check-browser.mjs <app folder> <file: URL of kilnjs/browser>');
  process.exit(2);
}
const say = (m) => console.log(`pack-check: browser: ${m}`);

function findChromium() {
  const named = process.env.KILN_CHROMIUM;
  if (named) return fs.existsSync(named) ? named : undefined;
  for (const name of ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome'])
    for (const dir of (process.env.PATH ?? '').split(path.delimiter)) if (dir && fs.existsSync(path.join(dir, name))) return path.join(dir, name);
  return undefined;
}

const chromium = findChromium();
if (!chromium) {
  say(process.env.KILN_CHROMIUM ? `SKIPPED: KILN_CHROMIUM=${process.env.KILN_CHROMIUM} does not exist` : 'SKIPPED: no Chromium on PATH (install Debian\'s chromium, as .ci/run does, or set KILN_CHROMIUM)');
  process.exit(0);
}
let pw;
try {
  pw = await import('playwright-core');
} catch {
  say('SKIPPED: playwright-core is not installed (npm ci installs it as a devDependency)');
  process.exit(0);
}

// The URL path of the bundle under the served app folder, as Node resolved it through "exports".
const bundle = fileURLToPath(entry);
const rel = path.relative(fs.realpathSync(app), bundle);
if (rel.startsWith('..') || path.isAbsolute(rel)) throw new Error(`kilnjs/browser resolved outside the app: ${bundle}`);
const bundleUrl = `/${rel.split(path.sep).join('/')}`;

// A 3x4 @ 4x2 matmul whose exact answer is known, and a 64x64 one large enough for the Wasm GEMM.
const work = `
  const a = kiln.arange(12).reshape([3, 4]).float();
  const b = kiln.arange(8).reshape([4, 2]).float();
  const small = a.matmul(b).toArray();
  const n = 64;
  const big = kiln.ones([n, n]).matmul(kiln.arange(n * n).reshape([n, n]).float().div(n * n)).sum().item();
  const result = { small, big, wasm: typeof WebAssembly === 'object', isolated: self.crossOriginIsolated };`;
fs.writeFileSync(
  path.join(app, 'kiln-page.html'),
  `<!doctype html><meta charset="utf-8"><title>kilnjs/browser</title>
<script type="importmap">${JSON.stringify({ imports: { 'kilnjs/browser': bundleUrl } })}</script>
<script type="module">
  window.kilnResult = {};
  try {
    const kiln = await import('kilnjs/browser');${work}
    window.kilnResult.page = result;
  } catch (e) { window.kilnResult.page = { error: String(e && e.stack || e) }; }
  const w = new Worker('./kiln-worker.js', { type: 'module' });
  w.onmessage = (ev) => { window.kilnResult.worker = ev.data; };
  w.onerror = (ev) => { window.kilnResult.worker = { error: ev.message || 'worker failed to load' }; };
</script>
`,
);
// Module workers do not see the page's import map: the worker imports the resolved URL.
fs.writeFileSync(
  path.join(app, 'kiln-worker.js'),
  `import * as kiln from '${bundleUrl}';
try {
  const webgpu = await kiln.prepareWebgpu();${work}
  result.webgpu = webgpu;
  self.postMessage(result);
} catch (e) { self.postMessage({ error: String(e && e.stack || e) }); }
`,
);

const { startServer } = await import(pathToFileURL(path.join(root, 'examples', 'browser', 'serve.mjs')).href);
const { server, url } = await startServer(app);
const browser = await pw.chromium.launch({ executablePath: chromium, args: ['--no-sandbox'] });
const logs = [];
let r;
try {
  const page = await browser.newPage();
  page.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  page.on('requestfailed', (q) => logs.push(`requestfailed: ${q.url()}`));
  await page.goto(`${url}/kiln-page.html`);
  await page.waitForFunction('window.kilnResult && window.kilnResult.page && window.kilnResult.worker', null, { timeout: 30_000 });
  r = await page.evaluate('window.kilnResult');
} catch (e) {
  throw new Error(`${e.message}\n${logs.join('\n')}`);
} finally {
  await browser.close();
  server.close();
}

const expectSmall = [[28, 34], [76, 98], [124, 162]];
const n = 64;
const expectBig = (n * (n * n - 1)) / 2; // every row of ones @ M is the column sums of M = arange(n * n) / n^2; n rows
let ok = true;
for (const where of ['page', 'worker']) {
  const x = r[where];
  const problems = [];
  if (x.error) problems.push(x.error);
  else {
    if (JSON.stringify(x.small) !== JSON.stringify(expectSmall)) problems.push(`3x4 @ 4x2 gave ${JSON.stringify(x.small)}, expected ${JSON.stringify(expectSmall)}`);
    if (!(Math.abs(x.big - expectBig) < 1e-3 * expectBig)) problems.push(`64x64 matmul sum ${x.big}, expected ${expectBig}`);
    if (!x.wasm) problems.push('no WebAssembly in the browser');
    if (!x.isolated) problems.push('not cross-origin isolated (the server sends COOP/COEP)');
    // No adapter in plain headless Chromium is fine; a device worker that did not load is not (webgpu-device.js is shipped next to kiln.js).
    if (where === 'worker' && !x.webgpu.available && /device worker/.test(x.webgpu.reason)) problems.push(`webgpu: ${x.webgpu.reason}`);
  }
  if (problems.length > 0) {
    ok = false;
    console.error(`pack-check: browser: ${where}: ${problems.join('; ')}`);
  }
}
if (!ok) {
  console.error(logs.join('\n'));
  process.exit(1);
}
say(`kilnjs/browser (${bundleUrl}) loads in ${path.basename(chromium)} on a page and in a worker; matmul right on the Wasm path; webgpu: ${r.worker.webgpu.available ? 'available' : `unavailable (${r.worker.webgpu.reason})`}`);
