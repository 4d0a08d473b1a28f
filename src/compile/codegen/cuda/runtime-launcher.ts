/**
 * The CudaLauncher over Kiln's cuda runtime (src/runtime/cuda): NVRTC in the compile worker pool,
 * cubins in the shared disk cache (namespace 'cuda-cubin', the runtime's own format and key), loads
 * and launches through the runtime's packed-argument path on the device's current Kiln stream.
 *
 * Compilation is batched: `compile()` only registers the source and returns lazy handles at once;
 * `flush()` compiles every registered source that is in neither cache in one parallel batch of
 * 'nvrtc' pool tasks (compileInPoolSync), and a handle still uncompiled at its first launch is
 * compiled then, on this thread. So `program.prepare(inputs)` (which registers every kernel, and in
 * max-autotune every candidate, of a call) followed by `flush()` compiles a whole program with as
 * many NVRTC processes as the pool has workers. Workers need nothing from the parent: the payload
 * names the architecture (read from the device here).
 *
 * Launches go through the device ABI's kernel half (`Accelerator.launchKernel`, the cuda
 * accelerator's packed launch on the device's current default stream): the same work as calling
 * the runtime's launch() directly, with no allocation added. Compiling does not: the ABI's
 * `compileKernel` answers one entry point with a promise and compiles on this thread, while a
 * compiled program needs handles at once (its first run, and a CUDA-graph capture, are
 * synchronous), many entry points per source, and hundreds of sources compiled in one parallel
 * pool batch; so compilation and module loading stay here, over the runtime's NVRTC, cubin cache
 * and loader.
 *
 * The runtime modules are imported statically: they load nothing native until a driver call, and
 * the registry imports them anyway (src/runtime/probes.ts).
 */
import { getDiskCache } from '../../../runtime/cache/disk-cache.js';
import { compileInPoolSync, compileTaskHandler, compileWorkers, registerCompileTaskHandler } from '../../../runtime/pool/index.js';
import type { NvrtcResult } from '../../../runtime/pool/nvrtc-task.js';
import { type CudaAccelerator, devPtr } from '../../../runtime/cuda/cuda-accelerator.js';
import { check, driver } from '../../../runtime/cuda/driver.js';
import { cubinCacheKey } from '../../../runtime/cuda/kernel-cache.js';
import { type CudaKernel, loadKernel } from '../../../runtime/cuda/launch.js';
import { hasPdlPrologue, withPdlPrologue } from '../../../runtime/cuda/pdl.js';
import { compileToCubin } from '../../../runtime/cuda/nvrtc.js';
import { deviceInfo } from '../../../runtime/cuda/properties.js';
import { timeBuild } from '../../../runtime/notes.js';
import { getAccelerator } from '../../../runtime/registry.js';
import type { Tensor } from '../../../tensor/tensor.js';
import { argLayout, type ParamType } from '../../../kernels/cuda/fused/args.js';
import type { CudaTarget } from './configs.js';
import type { CudaLauncher, KernelHandle } from './launcher.js';

/** Same namespace and record shape as src/runtime/cuda/kernel-cache.ts, so both share entries. */
const CUBIN_NAMESPACE = 'cuda-cubin';

interface Source {
  readonly source: string;
  /** NVRTC options besides the architecture and language standard (compileToCubin adds those). */
  readonly options: readonly string[];
  readonly key: string;
  /** Entry point used as the diagnostic file name. */
  readonly name: string;
  cubin?: Uint8Array;
}

interface LazyHandle extends KernelHandle {
  readonly params: readonly ParamType[];
  readonly src: Source;
  readonly maxDynamicShared: number;
  /** The argument block unpacked into the runtime's numbers: offsets and types, computed once. */
  readonly unpack: readonly { readonly offset: number; readonly wide: boolean }[];
  kernel?: CudaKernel;
}

export interface RuntimeLauncherStats {
  /** Sources compiled by NVRTC (in the pool or on this thread). */
  compiled: number;
  /** Of those, compiled in the worker pool. */
  pooled: number;
  /** Sources found in the disk cache. */
  diskHits: number;
  /** Pool batches run by flush(). */
  batches: number;
  /** Modules loaded (one per entry point). */
  loaded: number;
}

export interface RuntimeLauncher extends CudaLauncher {
  readonly deviceIndex: number;
  readonly stats: RuntimeLauncherStats;
  /** Compiles every registered source not yet compiled, in parallel in the compile pool. */
  flush(): void;
  /** Evicts the L2 cache (writes a buffer twice its size): the autotuner's flush between timed runs. */
  flushL2(): void;
}

let handlerRegistered = false;

function ensureNvrtcHandler(): void {
  if (handlerRegistered) return;
  if (!compileTaskHandler('nvrtc')) registerCompileTaskHandler('nvrtc', new URL('../../../runtime/pool/nvrtc-task.js', import.meta.url), 'nvrtcTask');
  handlerRegistered = true;
}

const launchers = new Map<number, RuntimeLauncher>();

/** The launcher of cuda device `deviceIndex` (one per device, shared by every program). */
export function cudaRuntimeLauncher(deviceIndex = 0): RuntimeLauncher {
  let l = launchers.get(deviceIndex);
  if (!l) launchers.set(deviceIndex, (l = makeLauncher(deviceIndex)));
  return l;
}

/** Kept for callers of the first version of this adapter (it was asynchronous). */
export function createCudaRuntimeLauncher(deviceIndex = 0): Promise<CudaLauncher> {
  return Promise.resolve(cudaRuntimeLauncher(deviceIndex));
}

function makeLauncher(deviceIndex: number): RuntimeLauncher {
  const info = deviceInfo(deviceIndex);
  const target: CudaTarget = { arch: info.arch, sms: info.smCount, maxThreadsPerSm: info.maxThreadsPerSM, halfMode: 'ptx' };
  const acc = getAccelerator('cuda') as CudaAccelerator;
  const sources = new Map<string, Source>();
  const pending = new Set<Source>();
  const stats: RuntimeLauncherStats = { compiled: 0, pooled: 0, diskHits: 0, batches: 0, loaded: 0 };
  const cache = (): ReturnType<typeof getDiskCache> => getDiskCache();

  const fromDisk = (s: Source): boolean => {
    const hit = cache().get(CUBIN_NAMESPACE, s.key) as { cubin?: unknown } | undefined;
    if (!hit || typeof hit.cubin !== 'string') return false;
    s.cubin = new Uint8Array(Buffer.from(hit.cubin, 'base64'));
    stats.diskHits++;
    return true;
  };
  const store = (s: Source, cubin: Uint8Array): void => {
    s.cubin = cubin;
    stats.compiled++;
    cache().put(CUBIN_NAMESPACE, s.key, { name: s.name, arch: target.arch, cubin: Buffer.from(cubin).toString('base64') });
  };
  const compileHere = (s: Source): void => {
    if (s.cubin || fromDisk(s)) return;
    store(s, timeBuild(`CUDA kernel ${s.name} (NVRTC, ${target.arch})`, () => compileToCubin(s.source, { arch: target.arch, name: `${s.name}.cu`, options: s.options })).cubin);
  };

  const flush = (): void => {
    const todo = [...pending].filter((s) => !s.cubin && !fromDisk(s));
    pending.clear();
    if (todo.length === 0) return;
    // One source compiles as fast here as in a worker, and a pool of 0 workers cannot run 'nvrtc'.
    if (todo.length === 1 || compileWorkers() === 0) {
      for (const s of todo) compileHere(s);
      return;
    }
    ensureNvrtcHandler();
    stats.batches++;
    // A generous limit: a cold pool start plus the largest generated sources (about 0.1-0.5 s each).
    const results = timeBuild(`${todo.length} CUDA kernels of a compiled program (NVRTC, ${target.arch})`, () =>
      compileInPoolSync<NvrtcResult>(
        todo.map((s) => ({ kind: 'nvrtc', payload: { source: s.source, name: s.name, arch: target.arch, options: [...s.options] } })),
        300_000,
      ),
    );
    results.forEach((r, i) => {
      if (!r.ok) throw new Error(`kiln cuda: ${r.error}`);
      store(todo[i]!, r.cubin);
      stats.pooled++;
    });
  };

  const kernelOf = (h: LazyHandle): CudaKernel => {
    if (h.kernel) return h.kernel;
    if (!h.src.cubin) {
      pending.delete(h.src);
      compileHere(h.src);
    }
    h.kernel = loadKernel(deviceIndex, h.src.cubin!, h.name, h.params, h.maxDynamicShared, hasPdlPrologue(h.src.source, h.name));
    stats.loaded++;
    return h.kernel;
  };

  let l2: { ptr: number; bytes: number } | undefined;
  const values: number[] = [];

  return {
    deviceIndex,
    target,
    stats,
    flush,
    compile(generated, names, options): KernelHandle[] {
      // The PDL wait at the top of every kernel body when PDL is on (runtime/cuda/pdl.ts).
      const source = withPdlPrologue(generated, deviceIndex);
      const extra = options.nvrtcOptions.filter((o) => !o.startsWith('--gpu-architecture') && !o.startsWith('--std'));
      const key = cubinCacheKey({ source, name: names[0] ?? 'kernel', arch: target.arch, options: extra });
      let src = sources.get(key);
      if (!src) {
        src = { source, options: extra, key, name: names[0] ?? 'kernel' };
        sources.set(key, src);
        pending.add(src);
      }
      const s = src;
      return names.map((name, i): LazyHandle => {
        const params = options.params[i]!;
        const layout = argLayout(params.map((type, k) => ({ name: `a${k}`, type, source: { kind: 'int', what: '' } })));
        return { name, params, src: s, maxDynamicShared: options.maxDynamicShared, unpack: layout.params.map((p) => ({ offset: p.offset, wide: p.type !== 'i32' })) };
      });
    },
    launch(handle, grid, block, sharedBytes, args): void {
      const h = handle as LazyHandle;
      const k = kernelOf(h);
      if (k.layout.size !== args.byteLength) throw new Error(`kiln cuda: argument block of ${args.byteLength} bytes for ${h.name}, which takes ${k.layout.size}`);
      // The runtime packs numbers itself with the same C ABI offsets: unpack the block into them.
      const dv = new DataView(args.buffer, args.byteOffset, args.byteLength);
      values.length = h.unpack.length;
      for (let i = 0; i < h.unpack.length; i++) {
        const p = h.unpack[i]!;
        values[i] = p.wide ? Number(dv.getBigInt64(p.offset, true)) : dv.getInt32(p.offset, true);
      }
      // No stream: the kernel's device's default stream (k was loaded on deviceIndex).
      acc.launchKernel(k, values, { grid, block, sharedBytes });
    },
    address(t: Tensor): number {
      return devPtr(t.storage.buffer, 0);
    },
    flushL2(): void {
      if (!l2) {
        // Twice the L2 so that nothing a candidate read before survives (the H200 has 60 MiB of L2).
        const bytes = 2 * Math.max(info.l2CacheBytes, 1 << 20);
        const out: [number] = [0];
        check(driver().cu.cuMemAlloc_v2(out, bytes), `allocating ${bytes} bytes to flush the L2 cache of cuda:${deviceIndex}`);
        l2 = { ptr: Number(out[0]), bytes };
      }
      check(driver().cu.cuMemsetD8Async(l2.ptr, 0, l2.bytes, acc.defaultStream(deviceIndex).handle), 'flushing the L2 cache');
    },
  };
}
