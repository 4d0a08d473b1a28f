#!/usr/bin/env node
/* global process, console, performance, GPUBufferUsage, GPUMapMode, GPUShaderStage */
/**
 * Issue #20 microbenchmark: why a one-row kernel ([1, 1024], e.g. add + RMSNorm) takes 15-18 us on
 * the H200 (Dawn/Vulkan) when a GEMV streaming 8 MB takes ~4 us. Plain Dawn (the `webgpu` package,
 * opened with Kiln's own options: backend from KILN_WEBGPU_BACKEND, Kiln's toggles), no Kiln
 * runtime in this process. Each case is a chain of --chain (200) dispatches in ONE compute pass,
 * each reading the previous one's output (ping-pong buffers: Dawn puts a barrier between them, as
 * between a decode step's dependent kernels); the pass's begin/end timestamps over the chain give
 * us per dispatch, the median of --reps (7) passes. Cases, for f32 and f16 (f16 only with
 * shader-f16), all computing y = x * rsqrt(mean(x^2) + eps) * w over one row of N = 1024:
 *   a  empty kernel (same bindings): the dispatch + barrier floor;
 *   b  256 invocations, one vec4 load each (all loads issued before use), subgroupAdd, one
 *      workgroup-memory combine, normalise from registers, store;
 *   b4 the same with 4 scalar loads per invocation (strided by 256: coalesced) issued before use;
 *   c  b with a workgroup-memory tree reduction (no subgroups);
 *   d  today's strided two-pass form (N read from metadata, loop step 256, second pass reloads);
 *   e  1024 invocations, one element each (needs maxComputeInvocationsPerWorkgroup >= 1024);
 *   f  b with the input row inside a 311 MB and an 84 MB buffer: bound whole (row offset in the
 *      metadata, as Kiln binds) and bound as a 2 KB range;
 *   b' a GEMV-like kernel (y[4096] = W[4096, 1024] x: 8 MB of f16 weights) with W in its own buffer
 *      against W inside a 311 MB buffer (whole binding / range binding): a Kiln GEMV was 15.2 us
 *      against 4.15 us there;
 *   g  Kiln's own kernels (compiled add + RMSNorm, eager llm.rmsNorm, llm.qkNormRotaryCache) as Kiln renders them on this
 *      device, from wg-rowbench-dump.mjs run in a child process under each option set of KILN_SETS.
 * Prints a table and writes JSON to --json. Numbers from SwiftShader or the null backend mean
 * nothing (the null backend computes nothing: it validates the WGSL and the harness).
 *
 *   node scripts/device/wg-rowbench.mjs [--json OUT.json] [--chain 200] [--reps 7] [--only b,g] [--no-kiln]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { create, globals } from 'webgpu';

Object.assign(globalThis, globals);
const args = process.argv.slice(2);
const value = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const CHAIN = Number(value('--chain', '200'));
const REPS = Number(value('--reps', '7'));
const only = value('--only', '')
  .split(',')
  .filter((s) => s !== '');
const N = 1024;
const W = 256;
/** Kiln option sets the g rows are rendered under (each a child process: options are read once). */
const KILN_SETS = [
  { tag: 'default', env: {} },
  { tag: 'loop', env: { KILN_WEBGPU_REDUCE_REGISTERS: '0', KILN_WEBGPU_REDUCE_UNROLL: '1', KILN_WEBGPU_ROTARY_REGISTERS: '0' } },
  { tag: 'unroll4', env: { KILN_WEBGPU_REDUCE_REGISTERS: '0', KILN_WEBGPU_REDUCE_UNROLL: '4', KILN_WEBGPU_ROTARY_REGISTERS: '0' } },
  { tag: 'registers', env: { KILN_WEBGPU_REDUCE_REGISTERS: '8', KILN_WEBGPU_ROTARY_REGISTERS: '1' } },
];

const { dawnOptions } = await import(pathToFileURL(path.join(repo, 'dist/src/runtime/webgpu/dawn-options.js')).href);
const gpu = create(dawnOptions());
const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
if (!adapter) throw new Error(`wg-rowbench: Dawn found no adapter (${dawnOptions().join(' ')})`);
const features = ['shader-f16', 'subgroups', 'timestamp-query'].filter((f) => adapter.features.has(f));
const requiredLimits = {};
for (const k of ['maxBufferSize', 'maxStorageBufferBindingSize', 'maxStorageBuffersPerShaderStage', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupStorageSize']) requiredLimits[k] = adapter.limits[k];
const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits });
const errors = [];
device.addEventListener('uncapturederror', (ev) => errors.push(ev.error.message));
const has = (f) => device.features.has(f);
const info = adapter.info ?? {};
const header = { device: `${info.vendor ?? ''} ${info.description ?? info.device ?? ''}`.trim(), options: dawnOptions(), features, limits: requiredLimits, subgroup: [info.subgroupMinSize, info.subgroupMaxSize], chain: CHAIN, reps: REPS };
console.log(`# ${header.device} features=${features.join(',')} subgroups ${header.subgroup} maxBuffer ${requiredLimits.maxBufferSize}`);

// ---------------------------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------------------------
const STORAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
const buffer = (bytes) => device.createBuffer({ size: Math.max(16, Math.ceil(bytes / 16) * 16), usage: STORAGE });
/** float32 -> float16 bits (round to nearest even; normal range is enough here). */
function f16bits(v) {
  const f = new Float32Array([v]);
  const u = new Uint32Array(f.buffer)[0];
  const s = (u >>> 16) & 0x8000;
  const a = u & 0x7fffffff;
  if (a >= 0x477ff000) return s | 0x7c00;
  if (a < 0x38800000) return s;
  const r = a - 0x38000000;
  return s | ((r + 0xfff + ((r >>> 13) & 1)) >>> 13);
}
let seed = 12345;
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
/** n random values of scale `scale` as the bytes of dtype T ('f32' | 'f16'). */
function values(T, n, scale = 1) {
  if (T === 'f32') return new Float32Array(Array.from({ length: n }, () => rand() * scale));
  return new Uint16Array(Array.from({ length: n }, () => f16bits(rand() * scale)));
}
const write = (buf, offset, data) => device.queue.writeBuffer(buf, offset, data.buffer, data.byteOffset, data.byteLength);
const metaBuffer = (words) => {
  const b = buffer(words.length * 4);
  write(b, 0, new Uint32Array(words));
  return b;
};
const big = {};
/** A shared big buffer of `mb` MB (one per size; skipped past maxBufferSize). */
function bigBuffer(mb) {
  const bytes = mb * 1e6;
  if (bytes > requiredLimits.maxBufferSize || bytes > requiredLimits.maxStorageBufferBindingSize) return null;
  big[mb] ??= buffer(bytes);
  return big[mb];
}

// ---------------------------------------------------------------------------------------------
// Kernels (hand-written). Bindings: 0 x (read), 1 y (read_write), 2 w (read), 3 meta (read):
// meta = [x base, y base, N, w base] in units of the binding's element type.
// ---------------------------------------------------------------------------------------------
const EPS = '1e-6';
const enables = (T, sg) => `${T === 'f16' ? 'enable f16;\n' : ''}${sg ? 'enable subgroups;\n' : ''}`;
const decl = (T, vec) => {
  const e = vec ? `vec4<${T}>` : T;
  return `@group(0) @binding(0) var<storage, read> x: array<${e}>;
@group(0) @binding(1) var<storage, read_write> y: array<${e}>;
@group(0) @binding(2) var<storage, read> w: array<${e}>;
@group(0) @binding(3) var<storage, read> kmeta: array<u32>;
`;
};
const sgArgs = '@builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) sgid: u32, @builtin(num_subgroups) nsub: u32';
/** Workgroup sum of f32 `v` into `t`: subgroups (one partial per subgroup) or a tree over `wg` invocations. */
const wgSum = (sg, wg) =>
  sg
    ? `  let s = subgroupAdd(v);
  if (sgid == 0u) { part[sid] = s; }
  workgroupBarrier();
  var t = part[0];
  for (var k = 1u; k < nsub; k = k + 1u) { t = t + part[k]; }`
    : `  part[lid] = v;
  workgroupBarrier();
  for (var s = ${wg / 2}u; s > 0u; s = s >> 1u) {
    if (lid < s) { part[lid] = part[lid] + part[lid + s]; }
    workgroupBarrier();
  }
  let t = part[0];`;
const KERNELS = {
  a: () => `${decl('f32', false)}@compute @workgroup_size(${W}) fn main() {}`,
  b: (T, sg) => `${enables(T, sg)}${decl(T, true)}var<workgroup> part: array<f32, ${W}>;
@compute @workgroup_size(${W})
fn main(@builtin(local_invocation_index) lid: u32${sg ? `, ${sgArgs}` : ''}) {
  let xv = vec4<f32>(x[kmeta[0] + lid]);
  let wv = vec4<f32>(w[kmeta[3] + lid]);
  let v = dot(xv, xv);
${wgSum(sg, W)}
  let r = inverseSqrt(t / ${N}.0 + ${EPS});
  y[kmeta[1] + lid] = vec4<${T}>(xv * r * wv);
}`,
  b4: (T, sg) => `${enables(T, sg)}${decl(T, false)}var<workgroup> part: array<f32, ${W}>;
@compute @workgroup_size(${W})
fn main(@builtin(local_invocation_index) lid: u32${sg ? `, ${sgArgs}` : ''}) {
  let xb = kmeta[0] + lid;
  let x0 = f32(x[xb]); let x1 = f32(x[xb + ${W}u]); let x2 = f32(x[xb + ${2 * W}u]); let x3 = f32(x[xb + ${3 * W}u]);
  let wb = kmeta[3] + lid;
  let w0 = f32(w[wb]); let w1 = f32(w[wb + ${W}u]); let w2 = f32(w[wb + ${2 * W}u]); let w3 = f32(w[wb + ${3 * W}u]);
  let v = x0 * x0 + x1 * x1 + x2 * x2 + x3 * x3;
${wgSum(sg, W)}
  let r = inverseSqrt(t / ${N}.0 + ${EPS});
  let yb = kmeta[1] + lid;
  y[yb] = ${T}(x0 * r * w0); y[yb + ${W}u] = ${T}(x1 * r * w1); y[yb + ${2 * W}u] = ${T}(x2 * r * w2); y[yb + ${3 * W}u] = ${T}(x3 * r * w3);
}`,
  d: (T, sg) => `${enables(T, sg)}${decl(T, false)}var<workgroup> part: array<f32, ${W}>;
@compute @workgroup_size(${W})
fn main(@builtin(local_invocation_index) lid: u32${sg ? `, ${sgArgs}` : ''}) {
  let n = kmeta[2];
  var v = 0.0f;
  for (var j = lid; j < n; j = j + ${W}u) { let a = f32(x[kmeta[0] + j]); v = v + a * a; }
${wgSum(sg, W)}
  let r = inverseSqrt(t / f32(n) + ${EPS});
  for (var j = lid; j < n; j = j + ${W}u) { y[kmeta[1] + j] = ${T}(f32(x[kmeta[0] + j]) * r * f32(w[kmeta[3] + j])); }
}`,
  e: (T, sg) => `${enables(T, sg)}${decl(T, false)}var<workgroup> part: array<f32, ${N}>;
@compute @workgroup_size(${N})
fn main(@builtin(local_invocation_index) lid: u32${sg ? `, ${sgArgs}` : ''}) {
  let a = f32(x[kmeta[0] + lid]);
  let wv = f32(w[kmeta[3] + lid]);
  let v = a * a;
${wgSum(sg, N)}
  let r = inverseSqrt(t / ${N}.0 + ${EPS});
  y[kmeta[1] + lid] = ${T}(a * r * wv);
}`,
  // GEMV-like: 8 output rows per workgroup, each invocation one vec4 of each row (8 loads in flight).
  gemv: (T, sg) => `${enables(T, sg)}${decl(T, true)}var<workgroup> part: array<f32, ${8 * W}>;
@compute @workgroup_size(${W})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3u${sg ? `, ${sgArgs}` : ''}) {
  let xv = vec4<f32>(x[kmeta[0] + lid]);
  var acc: array<f32, 8>;
  for (var r = 0u; r < 8u; r = r + 1u) { acc[r] = dot(vec4<f32>(w[kmeta[3] + (wid.x * 8u + r) * ${N / 4}u + lid]), xv); }
${
  sg
    ? `  for (var r = 0u; r < 8u; r = r + 1u) { let s = subgroupAdd(acc[r]); if (sgid == 0u) { part[r * ${W}u + sid] = s; } }
  workgroupBarrier();
  if (lid < 8u) { var t = 0.0f; for (var k = 0u; k < nsub; k = k + 1u) { t = t + part[lid * ${W}u + k]; } acc[0] = t; }`
    : `  for (var r = 0u; r < 8u; r = r + 1u) { part[r * ${W}u + lid] = acc[r]; }
  workgroupBarrier();
  for (var s = ${W / 2}u; s > 0u; s = s >> 1u) {
    if (lid < s) { for (var r = 0u; r < 8u; r = r + 1u) { part[r * ${W}u + lid] = part[r * ${W}u + lid] + part[r * ${W}u + lid + s]; } }
    workgroupBarrier();
  }
  if (lid < 8u) { acc[0] = part[lid * ${W}u]; }`
}
  // y as scalars through a vec4 binding: rows 4 at a time (lanes 0..7 write two vec4s' components).
  if (lid < 8u) { part[lid] = acc[0]; }
  workgroupBarrier();
  if (lid < 2u) { y[kmeta[1] + wid.x * 2u + lid] = vec4<${T}>(vec4<f32>(part[lid * 4u], part[lid * 4u + 1u], part[lid * 4u + 2u], part[lid * 4u + 3u])); }
}`,
};

// ---------------------------------------------------------------------------------------------
// Pipelines with explicit layouts (parsed from the source's bindings: unused ones stay bound).
// ---------------------------------------------------------------------------------------------
function pipeline(source, label) {
  const entries = [];
  for (const m of source.matchAll(/@binding\((\d+)\)\s*var<storage,\s*(read_write|read)>/g)) entries.push({ binding: Number(m[1]), visibility: GPUShaderStage.COMPUTE, buffer: { type: m[2] === 'read' ? 'read-only-storage' : 'storage' } });
  const bgl = device.createBindGroupLayout({ entries });
  const module = device.createShaderModule({ code: source, label });
  const p = device.createComputePipeline({ layout: device.createPipelineLayout({ bindGroupLayouts: [bgl] }), compute: { module, entryPoint: 'main' }, label });
  return { p, bgl };
}
/** A bind group from resources: a GPUBuffer (whole) or [buffer, offset, size]. */
const group = (bgl, res) => device.createBindGroup({ layout: bgl, entries: res.map((r, i) => ({ binding: i, resource: Array.isArray(r) ? { buffer: r[0], offset: r[1], size: r[2] } : { buffer: r } })) });

const qs = has('timestamp-query') ? device.createQuerySet({ type: 'timestamp', count: 2 * REPS }) : null;
const resolveBuf = device.createBuffer({ size: 16 * REPS, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
const readBuf = device.createBuffer({ size: 16 * REPS, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });

/** Median us per dispatch of a chain alternating bind groups `groups`, grid `grid`. */
async function timeChain(p, groups, grid) {
  const encodeChain = (enc, rep) => {
    const pass = enc.beginComputePass(qs && rep >= 0 ? { timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 2 * rep, endOfPassWriteIndex: 2 * rep + 1 } } : {});
    pass.setPipeline(p);
    for (let i = 0; i < CHAIN; i++) {
      pass.setBindGroup(0, groups[i % groups.length]);
      pass.dispatchWorkgroups(grid);
    }
    pass.end();
  };
  // Warm-up (lazy clears, pipeline first use), then the timed passes in one submit.
  let enc = device.createCommandEncoder();
  encodeChain(enc, -1);
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
  const t0 = performance.now();
  enc = device.createCommandEncoder();
  for (let r = 0; r < REPS; r++) encodeChain(enc, r);
  if (qs) {
    enc.resolveQuerySet(qs, 0, 2 * REPS, resolveBuf, 0);
    enc.copyBufferToBuffer(resolveBuf, 0, readBuf, 0, 16 * REPS);
  }
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
  const hostUs = ((performance.now() - t0) * 1000) / (REPS * CHAIN);
  if (!qs) return { us: hostUs, timing: 'host' };
  await readBuf.mapAsync(GPUMapMode.READ);
  const t = new BigInt64Array(readBuf.getMappedRange().slice(0));
  readBuf.unmap();
  const per = Array.from({ length: REPS }, (_, r) => Number(t[2 * r + 1] - t[2 * r]) / 1000 / CHAIN).sort((x, y) => x - y);
  return { us: per[REPS >> 1], min: per[0], max: per[REPS - 1], timing: 'device' };
}

/** float16 bits -> number. */
function f16value(h) {
  const e = (h >> 10) & 31;
  const m = h & 1023;
  const v = e === 0 ? m * 2 ** -24 : e === 31 ? (m ? NaN : Infinity) : (1 + m / 1024) * 2 ** (e - 15);
  return h & 0x8000 ? -v : v;
}
/** The first n elements of buffer `b` (dtype T) as numbers. */
async function readBack(b, T, n) {
  const bytes = Math.ceil((n * (T === 'f32' ? 4 : 2)) / 4) * 4;
  const rb = device.createBuffer({ size: bytes, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(b, 0, rb, 0, bytes);
  device.queue.submit([enc.finish()]);
  await rb.mapAsync(GPUMapMode.READ);
  const raw = rb.getMappedRange().slice(0);
  rb.destroy();
  return T === 'f32' ? Array.from(new Float32Array(raw, 0, n)) : Array.from(new Uint16Array(raw, 0, n), f16value);
}
/** One dispatch of `p` with bind group `g`; the worst |got - want| / (atol + rtol |want|) of `out` against `want`. */
async function check(p, g, grid, out, T, want) {
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(p);
  pass.setBindGroup(0, g);
  pass.dispatchWorkgroups(grid);
  pass.end();
  device.queue.submit([enc.finish()]);
  const got = await readBack(out, T, want.length);
  const [atol, rtol] = T === 'f32' ? [1e-5, 1e-4] : [2e-3, 4e-3];
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]) / (atol + rtol * Math.abs(want[i])));
  return Number(worst.toPrecision(3));
}
/** The float64 RMSNorm of x with weight w. */
function rmsRef(x, w) {
  let ss = 0;
  for (const v of x) ss += v * v;
  const r = 1 / Math.sqrt(ss / x.length + 1e-6);
  return x.map((v, i) => v * r * w[i]);
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------
const rows = [];
const want = (id) => only.length === 0 || only.some((o) => id === o || id.startsWith(`${o} `) || id.startsWith(`${o}@`) || id.startsWith(`${o}[`));
async function run(id, T, fn) {
  if (!want(id.split(' ')[0])) return;
  const row = { case: id, dtype: T };
  try {
    const res = await fn();
    if (res === null) return;
    if (typeof res === 'string') Object.assign(row, { status: 'skip', reason: res });
    // check: the worst |got - want| / tolerance of one dispatch against float64 (over 1: wrong numbers).
    else Object.assign(row, { status: res.check !== undefined && !(res.check <= 1) ? 'wrong' : 'ok' }, res);
  } catch (e) {
    Object.assign(row, { status: 'error', reason: String(e?.message ?? e).slice(0, 400) });
  }
  const err = errors.splice(0);
  if (err.length > 0) Object.assign(row, { status: 'error', reason: err.join(' | ').slice(0, 400) });
  rows.push(row);
  console.log(`${id.padEnd(34)} ${T.padEnd(4)} ${row.status === 'ok' || row.status === 'wrong' ? `${row.status === 'wrong' ? 'WRONG ' : ''}${row.us.toFixed(2).padStart(8)} us  (min ${row.min?.toFixed(2) ?? '-'}, max ${row.max?.toFixed(2) ?? '-'}, ${row.timing}${row.check !== undefined ? `, check ${row.check}` : ''}${row.gbps ? `, ${row.gbps} GB/s` : ''}${row.form ? `, ${row.form}` : ''})` : `${row.status}: ${row.reason}`}`);
}

const sg = has('subgroups');
for (const T of ['f32', 'f16']) {
  if (T === 'f16' && !has('shader-f16')) {
    rows.push({ case: '*', dtype: T, status: 'skip', reason: 'no shader-f16' });
    continue;
  }
  const bytes = T === 'f32' ? 4 : 2;
  const rowBytes = N * bytes;
  // Ping-pong rows (4096 elements: the GEMV's output too), the weight row, metadata.
  const X = [buffer(4096 * bytes), buffer(4096 * bytes)];
  for (const b of X) write(b, 0, values(T, 4096));
  const Wrow = buffer(rowBytes);
  write(Wrow, 0, values(T, N, 1));
  const meta0 = metaBuffer([0, 0, N, 0]);
  /** A hand kernel over the small ping-pong rows. */
  // Reference values of one dispatch X[0] -> X[1] (the harness's check: the timed chain then runs).
  const xHost = await readBack(X[0], T, N);
  const wHost = await readBack(Wrow, T, N);
  const rmsWant = rmsRef(xHost, wHost);
  const simple = (kernel, vec, s, wg = 1) => async () => {
    const { p, bgl } = pipeline(KERNELS[kernel](T, s), `${kernel} ${T}`);
    const g = [group(bgl, [X[0], X[1], Wrow, meta0]), group(bgl, [X[1], X[0], Wrow, meta0])];
    // The previous case's chain left other values in X[0]: the reference's input goes back first.
    write(X[0], 0, T === 'f32' ? new Float32Array(xHost) : new Uint16Array(xHost.map(f16bits)));
    const err = await check(p, g[0], wg, X[1], T, rmsWant);
    return { ...(await timeChain(p, g, wg)), check: err };
  };
  await run('a empty', T, async () => {
    const { p, bgl } = pipeline(KERNELS.a(), 'a');
    return timeChain(p, [group(bgl, [X[0], X[1], Wrow, meta0]), group(bgl, [X[1], X[0], Wrow, meta0])], 1);
  });
  for (const s of sg ? [true, false] : [false]) {
    const tag = s ? 'sg' : 'nosg';
    if (s) await run(`b vec4 ${tag}`, T, simple('b', true, s));
    if (s) await run(`b4 scalar4 ${tag}`, T, simple('b4', false, s));
    await run(`d strided2pass ${tag}`, T, simple('d', false, s));
    await run(`e 1024inv ${tag}`, T, async () => (requiredLimits.maxComputeInvocationsPerWorkgroup < N || requiredLimits.maxComputeWorkgroupSizeX < N ? `maxComputeInvocationsPerWorkgroup ${requiredLimits.maxComputeInvocationsPerWorkgroup} < ${N}` : simple('e', false, s)()));
  }
  await run('c vec4 tree', T, simple('b', true, false));
  if (!sg) rows.push({ case: 'b vec4 sg', dtype: T, status: 'skip', reason: 'no subgroups' });
  // f: b's input row inside a big buffer (near its end), bound whole (offset in meta) or as a range.
  for (const mb of [311, 84]) {
    const off = Math.floor((mb * 1e6 - 2 * rowBytes) / 256) * 256;
    for (const how of ['whole', 'range']) {
      await run(`f b@${mb}MB ${how}`, T, async () => {
        const B = bigBuffer(mb);
        if (!B) return `${mb} MB exceeds this device's maxBufferSize / binding size`;
        write(B, off, values(T, N));
        const { p, bgl } = pipeline(KERNELS.b(T, sg), `f ${T}`);
        const v4 = off / (4 * bytes);
        const g =
          how === 'whole'
            ? [group(bgl, [B, X[0], Wrow, metaBuffer([v4, 0, N, 0])]), group(bgl, [X[0], B, Wrow, metaBuffer([0, v4, N, 0])])]
            : [group(bgl, [[B, off, rowBytes], X[0], Wrow, meta0]), group(bgl, [X[0], [B, off, rowBytes], Wrow, meta0])];
        return timeChain(p, g, 1);
      });
    }
  }
  // b': GEMV-like over 8 MB of f16 weights (4096 x 1024; f32: 16 MB), own buffer or inside 311 MB.
  const wBytes = 4096 * N * bytes;
  for (const where of ['own', '311MB whole', '311MB range']) {
    await run(`b' gemv ${where}`, T, async () => {
      const { p, bgl } = pipeline(KERNELS.gemv(T, sg), `gemv ${T}`);
      let Wm;
      let wOff = 0;
      if (where === 'own') Wm = buffer(wBytes);
      else {
        Wm = bigBuffer(311);
        if (!Wm) return '311 MB exceeds this device\'s maxBufferSize / binding size';
        wOff = Math.floor((200e6) / 256) * 256;
      }
      const chunk = 1 << 20;
      const scale = Math.sqrt(3) / 32;
      for (let o = 0; o < wBytes; o += chunk * bytes) write(Wm, wOff + o, values(T, Math.min(chunk, (wBytes - o) / bytes), scale));
      const meta = where === '311MB whole' ? metaBuffer([0, 0, N, wOff / (4 * bytes)]) : meta0;
      const wres = where === '311MB range' ? [Wm, wOff, wBytes] : Wm;
      const g = [group(bgl, [X[0], X[1], wres, meta]), group(bgl, [X[1], X[0], wres, meta])];
      // Check rows 0..15 of y = W x against float64 (W read back through a copy of its first rows).
      const x0 = await readBack(X[0], T, N);
      const wRows = await (async () => {
        const tmp = buffer(16 * N * bytes);
        const enc = device.createCommandEncoder();
        enc.copyBufferToBuffer(Wm, wOff, tmp, 0, 16 * N * bytes);
        device.queue.submit([enc.finish()]);
        const v = await readBack(tmp, T, 16 * N);
        tmp.destroy();
        return v;
      })();
      const yWant = Array.from({ length: 16 }, (_, r) => x0.reduce((acc, xv, k) => acc + xv * wRows[r * N + k], 0));
      const err = await check(p, g[0], 4096 / 8, X[1], T, yWant);
      write(X[0], 0, T === 'f32' ? new Float32Array(x0) : new Uint16Array(x0.map(f16bits)));
      const res = await timeChain(p, g, 4096 / 8);
      if (where === 'own') Wm.destroy();
      return { ...res, check: err, gbps: Number((wBytes / (res.us * 1e-6) / 1e9).toFixed(1)) };
    });
  }
}

// g: Kiln's kernels, rendered by Kiln on this device (child process per option set).
if (!args.includes('--no-kiln') && (only.length === 0 || only.includes('g'))) {
  const dumpScript = path.join(here, 'wg-rowbench-dump.mjs');
  for (const set of KILN_SETS) {
    const file = path.join(os.tmpdir(), `wg-rowbench-dump-${process.pid}-${rows.length}.json`);
    let dump;
    try {
      execFileSync(process.execPath, [dumpScript, file, '--n', String(N), '--dist', path.join(repo, 'dist')], { env: { ...process.env, ...set.env }, stdio: ['ignore', 'ignore', 'inherit'], timeout: 300_000 });
      dump = JSON.parse(fs.readFileSync(file, 'utf8'));
      fs.rmSync(file, { force: true });
    } catch (e) {
      rows.push({ case: `g kiln [${set.tag}]`, status: 'error', reason: String(e?.message ?? e).slice(0, 400) });
      console.log(`g kiln [${set.tag}]: dump failed: ${String(e?.message ?? e).slice(0, 200)}`);
      continue;
    }
    for (const [name, ds] of Object.entries(dump.kernels)) {
      const T = name.endsWith('float16') ? 'f16' : 'f32';
      await run(`g ${name.split(' ')[0]} [${set.tag}]`, T, async () => {
        if (ds.length !== 1) return `expected one reduce kernel, got ${ds.length}`;
        const d = ds[0];
        const { p, bgl } = pipeline(d.source, `g ${name}`);
        const bufs = d.buffers.map((b) => buffer(b.capacity));
        // Values: each data buffer filled with random data of the kernel's element type; index
        // bindings (array<i32>: the slots) stay zero (Dawn clears new buffers): slot 0, a real write.
        const elem = [...d.source.matchAll(/@binding\((\d+)\)\s*var<storage,\s*(?:read_write|read)>\s*(\w+):\s*array<(\w+)/g)].map((m) => m[3]);
        d.buffers.forEach((b, i) => {
          if (elem[i] === 'i32') return;
          write(bufs[i], 0, T === 'f32' ? values('f32', Math.floor(b.capacity / 4)) : values('f16', Math.floor(b.capacity / 2)));
        });
        const meta = metaBuffer(d.meta);
        // Ping-pong: swap the first input (read-only) binding with the last output (read_write).
        const kinds = [...d.source.matchAll(/@binding\((\d+)\)\s*var<storage,\s*(read_write|read)>\s*(\w+)/g)].filter((m) => m[3] !== 'kmeta').map((m) => m[2]);
        const firstIn = kinds.indexOf('read');
        const lastOut = kinds.lastIndexOf('read_write');
        const a = [...bufs, meta];
        const b = [...bufs, meta];
        if (firstIn >= 0 && lastOut >= 0 && d.buffers[firstIn].capacity === d.buffers[lastOut].capacity) [b[firstIn], b[lastOut]] = [bufs[lastOut], bufs[firstIn]];
        const form = /var x\d+_\d+|let xa0/.test(d.source) ? 'registers' : /j0 = j0/.test(d.source) ? 'unrolled' : 'loop';
        return { ...(await timeChain(p, [group(bgl, a), group(bgl, b)], d.groups[0])), form };
      });
    }
  }
}

const jsonPath = value('--json');
if (jsonPath) {
  fs.mkdirSync(path.dirname(path.resolve(jsonPath)), { recursive: true });
  fs.writeFileSync(jsonPath, JSON.stringify({ ...header, rows }, null, 1));
  console.log(`# wrote ${jsonPath}`);
}
device.destroy();
process.exit(0);
