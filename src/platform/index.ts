/**
 * The platform layer, below the runtime: everything Kiln takes from its host beyond ECMAScript.
 * In Node that is Node's built-in modules (files, worker threads, child processes, FFI through
 * `createRequire`, the HTTP server); in a browser some have counterparts here (hashing, random
 * ids, the core count, warnings, a monotonic clock, an empty environment) and the rest are absent,
 * and using them throws an error that names what needs Node.
 *
 * No module under src/ imports `node:*` at top level (test/platform.test.ts checks every module
 * reachable from src/index.ts and src/browser.ts): the Node side (node.ts) loads built-ins on first
 * use through `process.getBuiltinModule` (Node >= 20.16), so an ESM bundle of Kiln loads in a
 * browser, and a browser reaches a Node-only feature only by calling it.
 */
import { Sha256 } from './sha256.js';
import { builtin, inNode, nodeProcess } from './node.js';

export { inNode, nodeProcess, NotInBrowserError } from './node.js';
export { workerExecArgv } from './worker-argv.js';

/** True in a browser or worker (anything that is not Node). */
export const inBrowser = !inNode;

type NodeModules = {
  fs: typeof import('node:fs');
  path: typeof import('node:path');
  os: typeof import('node:os');
  url: typeof import('node:url');
  crypto: typeof import('node:crypto');
  child_process: typeof import('node:child_process');
  worker_threads: typeof import('node:worker_threads');
  module: typeof import('node:module');
  http: typeof import('node:http');
  v8: typeof import('node:v8');
  vm: typeof import('node:vm');
};

/** Node's built-ins, loaded on first property access; in a browser that access throws NotInBrowserError. */
export const fs = builtin<NodeModules['fs']>('fs', 'files (the disk caches, checkpoints, safetensors and Hugging Face folders)');
export const path = builtin<NodeModules['path']>('path', 'file paths (the disk caches, model folders)');
export const os = builtin<NodeModules['os']>('os', 'host facts (temp and home folders, memory)');
export const url = builtin<NodeModules['url']>('url', 'file URLs (module paths for workers and code hashing)');
export const nodeCrypto = builtin<NodeModules['crypto']>('crypto', 'node:crypto');
export const childProcess = builtin<NodeModules['child_process']>('child_process', 'child processes (the C compiler of the native cpu path, nvcc)');
export const workerThreads = builtin<NodeModules['worker_threads']>('worker_threads', 'worker threads (the compile pool, Wasm threads, the Dawn device thread)');
export const nodeModule = builtin<NodeModules['module']>('module', 'createRequire (koffi FFI, CUDA, Dawn)');
export const http = builtin<NodeModules['http']>('http', 'the HTTP server (kiln.serve)');
export const v8 = builtin<NodeModules['v8']>('v8', 'V8 flags');
export const vm = builtin<NodeModules['vm']>('vm', 'vm contexts');

/** An incremental hash with node:crypto's update/digest('hex') shape. */
export interface Hash {
  update(data: string | ArrayBufferView, encoding?: 'utf8'): Hash;
  digest(encoding: 'hex' | 'base64'): string;
}

/** `createHash('sha256')`: node:crypto in Node, a synchronous JavaScript SHA-256 elsewhere. */
export function createHash(algorithm: 'sha256'): Hash {
  if (algorithm !== 'sha256') throw new Error(`createHash: only sha256 is available, not '${String(algorithm)}'`);
  return inNode ? (nodeCrypto.createHash('sha256') as unknown as Hash) : new Sha256();
}

/** `n` random bytes as hex. */
export function randomHex(n: number): string {
  const b = new Uint8Array(n);
  globalThis.crypto.getRandomValues(b);
  let s = '';
  for (const x of b) s += x.toString(16).padStart(2, '0');
  return s;
}

/** A random UUID (Web Crypto in both: Node 20 has globalThis.crypto). */
export function randomUUID(): string {
  return globalThis.crypto.randomUUID();
}

/**
 * The environment Kiln reads its KILN_* options from: process.env in Node (the same object, so
 * changes to it take effect); in a browser an empty object that a page may fill before using Kiln
 * (`kiln.platformEnv.KILN_...`), through runtime setters more usually.
 */
export const env: Record<string, string | undefined> = nodeProcess?.env ?? {};

/** process.emitWarning in Node, console.warn elsewhere. */
export function emitWarning(message: string, options?: string | { readonly type?: string; readonly code?: string }): void {
  if (nodeProcess) {
    if (typeof options === 'string') nodeProcess.emitWarning(message, options);
    else nodeProcess.emitWarning(message, options);
    return;
  }
  const o = typeof options === 'string' ? { type: options } : (options ?? {});
  console.warn(`(${o.type ?? 'Warning'}${o.code ? ` ${o.code}` : ''}) ${message}`);
}

/** Writes to stderr in Node, console.error elsewhere (the text without its final newline). */
export function writeStderr(text: string): void {
  if (nodeProcess) nodeProcess.stderr.write(text);
  else console.error(text.replace(/\n$/, ''));
}

/** Logical cores available to this process (navigator.hardwareConcurrency in a browser). */
export function cpuCount(): number {
  if (inNode) return os.availableParallelism();
  const n = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency;
  return Math.max(1, n ?? 1);
}

/** A monotonic clock in nanoseconds (process.hrtime in Node, performance.now elsewhere). */
export function nowNs(): bigint {
  if (nodeProcess) return nodeProcess.hrtime.bigint();
  return BigInt(Math.round(performance.now() * 1e6));
}

/** The host in a word or two: `node v20.x linux x64`, or the browser's user agent. */
export function hostDescription(): { arch: string; platform: string; runtime: string } {
  if (nodeProcess) return { arch: nodeProcess.arch, platform: nodeProcess.platform, runtime: `node ${nodeProcess.version}` };
  const ua = (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent ?? 'unknown';
  return { arch: 'unknown', platform: 'browser', runtime: ua };
}

/** The worker thread's id in Node (0 on the main thread and in a browser). */
export function threadId(): number {
  return inNode ? workerThreads.threadId : 0;
}

/** The process id in Node, 0 elsewhere. */
export function pid(): number {
  return nodeProcess?.pid ?? 0;
}
