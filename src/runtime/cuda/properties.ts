/**
 * Device properties read once per device through cuDeviceGetAttribute: what code generators and
 * launch heuristics need (SM count, compute capability and the NVRTC arch string, L2 and shared
 * memory limits, total memory).
 */
import { check, driver, driverVersion } from './driver.js';

// CUdevice_attribute values (cuda.h).
const ATTR = {
  maxThreadsPerBlock: 1,
  sharedMemPerBlock: 8,
  warpSize: 10,
  clockRateKHz: 13,
  smCount: 16,
  memoryClockKHz: 36,
  memoryBusWidthBits: 37,
  l2CacheBytes: 38,
  maxThreadsPerSM: 39,
  ccMajor: 75,
  ccMinor: 76,
  sharedMemPerSM: 81,
  sharedMemPerBlockOptin: 97,
} as const;

export interface CudaDeviceInfo {
  index: number;
  name: string;
  smCount: number;
  computeCapability: string;
  /** NVRTC's --gpu-architecture value for this device (sm_90 on an H200). */
  arch: string;
  l2CacheBytes: number;
  sharedMemPerBlock: number;
  sharedMemPerBlockOptin: number;
  sharedMemPerSM: number;
  maxThreadsPerBlock: number;
  maxThreadsPerSM: number;
  warpSize: number;
  totalMemoryBytes: number;
  clockRateKHz: number;
  memoryClockKHz: number;
  memoryBusWidthBits: number;
  driverVersion: string;
}

const cache = new Map<number, CudaDeviceInfo>();

export function deviceInfo(index: number): CudaDeviceInfo {
  const hit = cache.get(index);
  if (hit) return hit;
  const { cu } = driver();
  const dev: [number] = [0];
  check(cu.cuDeviceGet(dev, index), `getting device ${index}`);
  const attr = (a: number, what: string): number => {
    const v: [number] = [0];
    check(cu.cuDeviceGetAttribute(v, a, dev[0]), `reading ${what} of cuda:${index}`);
    return v[0];
  };
  const nameBuf = new Uint8Array(256);
  check(cu.cuDeviceGetName(nameBuf, nameBuf.length, dev[0]), `reading the name of cuda:${index}`);
  const end = nameBuf.indexOf(0);
  const total: [number] = [0];
  check(cu.cuDeviceTotalMem_v2(total, dev[0]), `reading the memory size of cuda:${index}`);
  const major = attr(ATTR.ccMajor, 'the compute capability');
  const minor = attr(ATTR.ccMinor, 'the compute capability');
  const v = driverVersion();
  const info: CudaDeviceInfo = {
    index,
    name: new TextDecoder().decode(nameBuf.subarray(0, end < 0 ? nameBuf.length : end)),
    smCount: attr(ATTR.smCount, 'the SM count'),
    computeCapability: `${major}.${minor}`,
    arch: `sm_${major}${minor}`,
    l2CacheBytes: attr(ATTR.l2CacheBytes, 'the L2 size'),
    sharedMemPerBlock: attr(ATTR.sharedMemPerBlock, 'the shared memory per block'),
    sharedMemPerBlockOptin: attr(ATTR.sharedMemPerBlockOptin, 'the opt-in shared memory per block'),
    sharedMemPerSM: attr(ATTR.sharedMemPerSM, 'the shared memory per SM'),
    maxThreadsPerBlock: attr(ATTR.maxThreadsPerBlock, 'the threads per block'),
    maxThreadsPerSM: attr(ATTR.maxThreadsPerSM, 'the threads per SM'),
    warpSize: attr(ATTR.warpSize, 'the warp size'),
    totalMemoryBytes: Number(total[0]),
    clockRateKHz: attr(ATTR.clockRateKHz, 'the clock rate'),
    memoryClockKHz: attr(ATTR.memoryClockKHz, 'the memory clock'),
    memoryBusWidthBits: attr(ATTR.memoryBusWidthBits, 'the memory bus width'),
    driverVersion: `${Math.floor(v / 1000)}.${(v % 1000) / 10}`,
  };
  cache.set(index, info);
  return info;
}
