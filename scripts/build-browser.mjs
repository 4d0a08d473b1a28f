#!/usr/bin/env node
/**
 * `npm run build:browser`: Kiln as one ES module for browsers, dist/browser/kiln.js (and its source
 * map), bundled by esbuild from src/index.ts, and dist/browser/webgpu-device.js, the worker that owns
 * the browser's WebGPU device (src/runtime/webgpu/worker.ts), which kiln.js starts next to itself. Nothing in the module graph imports Node's built-ins
 * at top level (src/platform/), so the bundle loads in a page or a worker; Node-only features (files,
 * the native cpu path, CUDA, the HTTP server, Dawn) throw a NotInBrowserError when called.
 * Packages that are Node-only and loaded lazily (koffi, webgpu) stay external.
 *
 * `--package` (npm's prepack): no source maps (they point at src/*.ts, which the npm package does
 * not ship) and any left from a development build removed; package.json "files" ships kiln.js and
 * webgpu-device.js, which `kilnjs/browser` (and `kilnjs` under a bundler's "browser" condition) loads.
 */
import { build } from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outdir = path.join(root, 'dist', 'browser');
const outfile = path.join(outdir, 'kiln.js');
const forPackage = process.argv.includes('--package');
if (forPackage) for (const f of ['kiln.js.map', 'webgpu-device.js.map']) fs.rmSync(path.join(outdir, f), { force: true });
// Two entries: Kiln, and the webgpu device worker that Kiln starts next to it (new URL('./webgpu-device.js', import.meta.url)).
const result = await build({
  entryPoints: [
    { in: path.join(root, 'src', 'index.ts'), out: 'kiln' },
    { in: path.join(root, 'src', 'runtime', 'webgpu', 'worker.ts'), out: 'webgpu-device' },
  ],
  outdir,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  sourcemap: !forPackage,
  external: ['koffi', 'webgpu'],
  logLevel: 'warning',
  metafile: true,
});
const bytes = result.metafile.outputs[path.relative(process.cwd(), outfile)]?.bytes ?? Object.values(result.metafile.outputs).find((o) => o.entryPoint?.endsWith('index.ts'))?.bytes ?? 0;
console.error(`build:browser: ${path.relative(root, outfile)} (${(bytes / 1024).toFixed(0)} KiB${forPackage ? ', for the npm package: no source maps' : ''})`);
