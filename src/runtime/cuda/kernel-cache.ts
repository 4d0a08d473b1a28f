/**
 * Compiled kernels, cached twice: on disk (the compile DiskCache, namespace 'cuda-cubin'; key: the
 * source's hash, the NVRTC options, the architecture and the NVRTC version, plus Kiln's version) so a
 * new process skips NVRTC, and in memory per device (source -> loaded CUfunction) so a kernel is
 * loaded once. The DiskCache is a leaf module of src/compile with no imports from above runtime.
 */
import { createHash } from '../../platform/index.js';
import { cacheKey } from '../cache/key.js';
import { getDiskCache } from '../cache/disk-cache.js';
import { compileToCubin, nvrtcVersion } from './nvrtc.js';
import { type CudaKernel, loadKernel, type ParamType } from './launch.js';
import { hasPdlPrologue, withPdlPrologue } from './pdl.js';
import { deviceInfo } from './properties.js';
import { runtimeLog, timeBuild } from '../notes.js';

const NAMESPACE = 'cuda-cubin';

export interface CubinRequest {
  source: string;
  /** Entry point (extern "C" name). */
  name: string;
  arch: string;
  options?: readonly string[];
}

export const cubinStats = { compiled: 0, diskHits: 0, loaded: 0 };

export function cubinCacheKey(req: CubinRequest): string {
  const sourceHash = createHash('sha256').update(req.source, 'utf8').digest('hex');
  return cacheKey(['nvrtc-cubin', sourceHash, req.options ?? [], req.arch, nvrtcVersion()]);
}

/** The cubin for `req`, from the disk cache or NVRTC (synchronously, on this thread). */
export function cubinFor(req: CubinRequest): Uint8Array {
  const key = cubinCacheKey(req);
  const cache = getDiskCache();
  const hit = cache.get(NAMESPACE, key) as { cubin?: unknown } | undefined;
  if (hit && typeof hit.cubin === 'string') {
    cubinStats.diskHits++;
    runtimeLog('cache', () => `cubin ${req.name} (${req.arch}) from disk`);
    return new Uint8Array(Buffer.from(hit.cubin, 'base64'));
  }
  const { cubin } = timeBuild(`CUDA kernel ${req.name} (NVRTC, ${req.arch})`, () => compileToCubin(req.source, { arch: req.arch, name: `${req.name}.cu`, options: req.options }));
  cubinStats.compiled++;
  cache.put(NAMESPACE, key, { name: req.name, arch: req.arch, cubin: Buffer.from(cubin).toString('base64') });
  return cubin;
}

const loaded = new Map<string, CudaKernel>();

/** The loaded kernel for `source` on device `index`, compiling (or reading the disk cache) on first use. */
export function kernelFromSource(index: number, original: string, name: string, params: readonly ParamType[], options: readonly string[] = [], maxDynamicShared = 0): CudaKernel {
  // Every kernel body starts with the PDL wait when PDL is on (pdl.ts); the key holds the result.
  const source = withPdlPrologue(original, index);
  const mk = `${index}\0${name}\0${options.join(' ')}\0${source}`;
  const hit = loaded.get(mk);
  if (hit) return hit;
  const cubin = cubinFor({ source, name, arch: deviceInfo(index).arch, options });
  // Only a kernel whose body starts with the PDL wait may be launched early (pdl.ts).
  const k = loadKernel(index, cubin, name, params, maxDynamicShared, hasPdlPrologue(source, name));
  cubinStats.loaded++;
  loaded.set(mk, k);
  return k;
}
