#!/usr/bin/env node
/**
 * `npm run build:browser`: Kiln as one ES module for browsers, dist/browser/kiln.js (and its source
 * map), bundled by esbuild from src/index.ts. Nothing in the module graph imports Node's built-ins
 * at top level (src/platform/), so the bundle loads in a page or a worker; Node-only features (files,
 * the native cpu path, CUDA, the HTTP server, Dawn) throw a NotInBrowserError when called.
 * Packages that are Node-only and loaded lazily (koffi, webgpu) stay external.
 */
import { build } from 'esbuild';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outfile = path.join(root, 'dist', 'browser', 'kiln.js');
const result = await build({
  entryPoints: [path.join(root, 'src', 'index.ts')],
  outfile,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  sourcemap: true,
  external: ['koffi', 'webgpu'],
  logLevel: 'warning',
  metafile: true,
});
const bytes = Object.values(result.metafile.outputs).find((o) => o.entryPoint)?.bytes ?? 0;
console.error(`build:browser: ${path.relative(root, outfile)} (${(bytes / 1024).toFixed(0)} KiB)`);
