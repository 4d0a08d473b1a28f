#!/usr/bin/env node
/* global console, process, URL */
/**
 * A static server for the browser example: serves the repository root with the cross-origin
 * isolation headers (COOP/COEP) that SharedArrayBuffer and Atomics.wait need in a page.
 *
 *   npm run build:browser && node examples/browser/serve.mjs   # then open the printed URL
 *
 * test/browser.test.ts starts the same server with startServer().
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.map': 'application/json', '.json': 'application/json', '.wasm': 'application/wasm' };

/** Serves `root` on 127.0.0.1:`port` (0: any free port); resolves to { server, url }. */
export function startServer(root, port = 0) {
  const base = path.resolve(root);
  const server = http.createServer((req, res) => {
    const file = path.join(base, decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname));
    const headers = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp', 'cache-control': 'no-store' };
    if (!file.startsWith(base)) {
      res.writeHead(403, headers).end();
      return;
    }
    fs.readFile(file, (err, data) => {
      if (err) {
        res.writeHead(404, headers).end();
        return;
      }
      res.writeHead(200, { ...headers, 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream' }).end(data);
    });
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${server.address().port}` })));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  const { url } = await startServer(root, Number(process.env.PORT ?? 8080));
  console.log(`${url}/examples/browser/index.html`);
}
