/**
 * The cuda runtime on a real GPU: device properties, the caching allocator (reuse, stats,
 * emptyCache, a clear out-of-memory error the process survives), copies through pinned staging,
 * events and streams, NVRTC (errors with source lines, disk cache, the compile worker pool) and raw
 * launches. Every test skips with the reason where no CUDA device is present (CI).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { cubinStats, kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch } from '../src/runtime/cuda/launch.js';
import { compileToCubin } from '../src/runtime/cuda/nvrtc.js';
import { devPtr } from '../src/runtime/cuda/cuda-accelerator.js';
import { compileInPool, shutdownCompilePool } from '../src/runtime/pool/index.js';
import type { NvrtcResult } from '../src/runtime/pool/nvrtc-task.js';
import { skipUnlessCuda } from './cuda-util.js';
import { defineOp, registerKernel } from '../src/ops/registry.js';
import { dispatch } from '../src/ops/dispatch.js';
import type { OutMeta } from '../src/ops/schema.js';
import type { TensorMeta } from '../src/tensor/tensor.js';

const skip = skipUnlessCuda();
const acc = (): CudaAccelerator => kiln.getAccelerator('cuda') as CudaAccelerator;

// The disk cache of these tests lives in a fresh folder so "compiled" vs "from disk" is observable.
process.env.KILN_CACHE_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-cuda-test-'));

test('device properties: name, SMs, compute capability and NVRTC arch, memory and shared-memory limits', { skip }, () => {
  const p = acc().properties(0);
  assert.equal(typeof p.name, 'string');
  assert.ok((p.name as string).length > 0);
  assert.ok((p.smCount as number) > 0);
  assert.match(p.computeCapability as string, /^\d+\.\d+$/);
  assert.equal(p.arch, `sm_${(p.computeCapability as string).replace('.', '')}`);
  assert.ok((p.totalMemoryBytes as number) > 1 << 30);
  assert.ok((p.l2CacheBytes as number) > 0);
  assert.ok((p.sharedMemPerBlockOptin as number) >= (p.sharedMemPerBlock as number));
  assert.match(p.nvrtcVersion as string, /^\d+\.\d+$/);
  assert.throws(() => acc().properties(99), /cuda:?.*99|index 99/);
});

test('host <-> device copies round-trip, including sizes beyond the pinned staging buffer', { skip }, () => {
  const a = acc();
  for (const n of [1, 4097, 40 << 20]) {
    const host = new Uint8Array(n);
    for (let i = 0; i < n; i++) host[i] = (i * 2654435761) >>> 24;
    const buf = a.allocator(0).allocate(n);
    a.copyHostToDevice(buf, 0, host);
    const other = a.allocator(0).allocate(n);
    a.copyDeviceToDevice(other, 0, buf, 0, n);
    const back = new Uint8Array(n);
    a.copyDeviceToHost(back, other, 0);
    assert.ok(Buffer.compare(Buffer.from(host.buffer, host.byteOffset, n), Buffer.from(back.buffer, 0, n)) === 0, `round trip of ${n} bytes`);
    a.allocator(0).free(buf);
    a.allocator(0).free(other);
  }
  const t = kiln.tensor([[1, 2, 3], [4, 5, 6]], { device: 'cuda' });
  assert.equal(t.device.toString(), 'cuda:0');
  assert.deepEqual(t.toArray(), [[1, 2, 3], [4, 5, 6]]);
});

test('the caching allocator reuses freed blocks, keeps stats, and emptyCache returns memory', { skip }, () => {
  const alloc = acc().allocator(0);
  alloc.emptyCache();
  const before = alloc.stats();
  const b1 = alloc.allocate(3 << 20);
  const addr = b1.handle;
  assert.equal(alloc.stats().allocatedBytes - before.allocatedBytes, 3 << 20);
  alloc.free(b1);
  assert.equal(alloc.stats().cachedBytes, 3 << 20);
  const b2 = alloc.allocate((3 << 20) - 100);
  assert.equal(b2.handle, addr, 'a freed block of the same size class is reused');
  assert.equal(alloc.stats().cacheHits - before.cacheHits, 1);
  alloc.free(b2);
  alloc.emptyCache();
  const after = alloc.stats();
  assert.equal(after.cachedBytes, 0);
  assert.equal(after.reservedBytes, before.reservedBytes - before.cachedBytes);
  assert.throws(() => alloc.free(b2), /already freed/);
});

test('allocating more than the device has gives a clear error, and the process carries on', { skip }, () => {
  const total = acc().properties(0).totalMemoryBytes as number;
  let err: Error | undefined;
  try {
    kiln.empty([Math.ceil((total * 1.5) / 4)], { device: 'cuda' });
  } catch (e) {
    err = e as Error;
  }
  assert.ok(err, 'an allocation of 1.5x the device memory must fail');
  assert.match(err.message, /out of memory on cuda:0/);
  assert.match(err.message, /tried to allocate/);
  assert.match(err.message, /Kiln holds .* in \d+ live/);
  assert.match(err.message, /free of/);
  const ok = kiln.ones([1024], { device: 'cuda' });
  assert.equal(kiln.sum(ok).item(), 1024);
});

test('events time device work (elapsedTime from cuEventElapsedTime) and streams synchronise', { skip }, () => {
  const x = kiln.randn([4096, 4096]).to('cuda');
  const start = new kiln.Event('cuda', { enableTiming: true });
  const end = new kiln.Event('cuda', { enableTiming: true });
  start.record();
  let y = x;
  for (let i = 0; i < 20; i++) y = kiln.mul(y, 1.0001);
  end.record();
  end.synchronize();
  assert.ok(end.query());
  const ms = start.elapsedTime(end);
  // 20 passes over 64 MiB read + written take well above 10 us and far below 10 s on any GPU.
  assert.ok(ms > 0.01 && ms < 10_000, `elapsed ${ms} ms`);
  const s = new kiln.Stream('cuda');
  s.synchronize();
  assert.equal(s.query(), true);
  const noTiming = new kiln.Event('cuda', { enableTiming: false });
  noTiming.record();
  assert.throws(() => start.elapsedTime(noTiming), /enableTiming/);
  kiln.synchronize('cuda');
});

const GOOD = `extern "C" __global__ void kiln_test_iota(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = (float)i * 0.5f;
}
`;

test('raw kernels: NVRTC compile, disk cache, one-block argument launch', { skip }, () => {
  const a = acc();
  const before = { ...cubinStats };
  const k = kernelFromSource(0, GOOD, 'kiln_test_iota', ['ptr', 'i32']);
  assert.equal(k.layout.size, 12, 'the (float*, int) parameter block is exactly 12 bytes');
  const n = 1000;
  const buf = a.allocator(0).allocate(n * 4);
  launch(k, [devPtr(buf), n], { grid: Math.ceil(n / 128), block: 128 }, a.defaultStream(0));
  const host = new Uint8Array(n * 4);
  a.copyDeviceToHost(host, buf, 0);
  const f = new Float32Array(host.buffer);
  for (let i = 0; i < n; i++) assert.equal(f[i], i * 0.5);
  a.allocator(0).free(buf);
  assert.equal(cubinStats.compiled - before.compiled + (cubinStats.diskHits - before.diskHits), 1);
});

// 40 KiB of static shared memory plus 16 KiB dynamic: 56 KiB in all, past the 48 KiB a launch gets
// without the opt-in attribute, with a dynamic part under 48 KiB.
const STATIC_AND_DYNAMIC = `extern "C" __global__ void kiln_test_smem(float* x) {
  __shared__ float s[10240];
  extern __shared__ float d[];
  int t = threadIdx.x;
  for (int i = t; i < 10240; i += blockDim.x) s[i] = (float)i;
  for (int i = t; i < 4096; i += blockDim.x) d[i] = 2.0f * (float)i;
  __syncthreads();
  x[t] = s[10239 - t] + d[4095 - t];
}
`;

test('raw kernels: static plus dynamic shared memory past 48 KiB launches (the opt-in attribute is set for any dynamic part)', { skip }, () => {
  const a = acc();
  const k = kernelFromSource(0, STATIC_AND_DYNAMIC, 'kiln_test_smem', ['ptr'], [], 16384);
  const buf = a.allocator(0).allocate(128 * 4);
  launch(k, [devPtr(buf)], { grid: 1, block: 128, sharedBytes: 16384 }, a.defaultStream(0));
  const host = new Uint8Array(128 * 4);
  a.copyDeviceToHost(host, buf, 0);
  const f = new Float32Array(host.buffer);
  for (let t = 0; t < 128; t++) assert.equal(f[t], 10239 - t + 2 * (4095 - t));
  a.allocator(0).free(buf);
});

test('an NVRTC compile error shows the log and the numbered source lines around the error', { skip }, () => {
  const bad = GOOD.replace('(float)i * 0.5f', 'undefined_name * 2');
  let err: Error | undefined;
  try {
    compileToCubin(bad, { arch: acc().properties(0).arch as string, name: 'kiln_test_bad.cu' });
  } catch (e) {
    err = e as Error;
  }
  assert.ok(err);
  assert.match(err.message, /nvrtc: compiling kiln_test_bad\.cu for sm_\d+ failed/);
  assert.match(err.message, /identifier "undefined_name" is undefined/);
  assert.match(err.message, />\s*3 \|\s+if \(i < n\) x\[i\] = undefined_name \* 2;/);
});

test('the compile worker pool runs NVRTC in a worker and returns cubin bytes that load and run', { skip }, async () => {
  const arch = acc().properties(0).arch as string;
  const r = await compileInPool<NvrtcResult>({ kind: 'nvrtc', payload: { source: GOOD.replace(/kiln_test_iota/g, 'kiln_test_pool'), name: 'kiln_test_pool', arch } });
  assert.ok(r.ok, r.ok ? '' : r.error);
  if (!r.ok) return;
  assert.ok(r.cubin.byteLength > 100);
  assert.equal(r.arch, arch);
  const bad = await compileInPool<NvrtcResult>({ kind: 'nvrtc', payload: { source: 'extern "C" __global__ void kiln_test_bad2() { nope; }', name: 'kiln_test_bad2', arch } });
  assert.equal(bad.ok, false);
  if (!bad.ok) assert.match(bad.error, /identifier "nope" is undefined/);
  const { loadKernel } = await import('../src/runtime/cuda/launch.js');
  const k = loadKernel(0, r.cubin, 'kiln_test_pool', ['ptr', 'i32']);
  const a = acc();
  const buf = a.allocator(0).allocate(16);
  launch(k, [devPtr(buf), 4], { grid: 1, block: 32 }, a.defaultStream(0));
  const host = new Float32Array(4);
  a.copyDeviceToHost(new Uint8Array(host.buffer), buf, 0);
  assert.deepEqual([...host], [0, 0.5, 1, 1.5]);
  a.allocator(0).free(buf);
  await shutdownCompilePool();
});

test('an op without a cuda kernel fails naming the op and the device', { skip }, () => {
  // Every built-in op has a cuda kernel now: a test op with only a cpu kernel stands in.
  const cpuOnly = defineOp({
    name: 'test.cpuOnlyCudaRuntime',
    args: [{ name: 'input', type: 'Tensor' }],
    outputs: [{ name: 'out', type: 'Tensor' }],
    meta: (input: TensorMeta): OutMeta => ({ shape: input.shape, strides: input.strides, dtype: input.dtype, device: input.device }),
  });
  registerKernel(cpuOnly, 'cpu', (_ctx, input) => input.clone());
  const x = kiln.randn([4, 4]).to('cuda');
  let err: Error | undefined;
  try {
    dispatch(cpuOnly, x);
  } catch (e) {
    err = e as Error;
  }
  assert.ok(err);
  assert.match(err.message, /test\.cpuOnlyCudaRuntime/);
  assert.match(err.message, /cuda:0/);
});
