/**
 * The loaded CUDA driver for this thread: koffi + libcuda bound once, cuInit done, primary contexts
 * retained per device and made current on the calling thread (each worker thread that imports this
 * module gets its own binding and makes the context current itself). Also CUDA error translation:
 * every failing call becomes a CudaError naming the CUDA error (cuGetErrorName/String) and what
 * Kiln was doing.
 */
import { bindDriver, type DriverApi, type Koffi, loadKoffi, type Ptr } from './ffi.js';
import { findLibrary, missingMessage } from './discover.js';

export class CudaError extends Error {
  constructor(
    readonly code: number,
    readonly errorName: string,
    message: string,
  ) {
    super(message);
    this.name = 'CudaError';
  }
}

/** CUDA_ERROR_NOT_READY: returned by query calls while work is pending (not an error). */
export const CUDA_ERROR_NOT_READY = 600;
export const CUDA_ERROR_OUT_OF_MEMORY = 2;

interface Loaded {
  koffi: Koffi;
  cu: DriverApi;
  path: string;
}

let loaded: Loaded | undefined;
let loadFailure: Error | undefined;

/** Loads koffi and libcuda and calls cuInit; throws a message saying what is missing. */
export function driver(): Loaded {
  if (loaded) return loaded;
  if (loadFailure) throw loadFailure;
  try {
    const koffi = loadKoffi();
    const found = findLibrary('cuda');
    let cu: DriverApi | undefined;
    let usedPath = '';
    let lastErr = '';
    for (const c of found.candidates) {
      try {
        cu = bindDriver(koffi, c);
        usedPath = c;
        break;
      } catch (e) {
        lastErr = (e as Error).message;
      }
    }
    if (!cu) throw new Error(missingMessage(found, lastErr));
    const rc = cu.cuInit(0);
    if (rc !== 0) {
      throw new Error(`cuInit failed with ${errorName(cu, rc)} (${rc}): ${errorText(cu, rc)}; is an NVIDIA GPU visible to this process (CUDA_VISIBLE_DEVICES, container flags)?`);
    }
    loaded = { koffi, cu, path: usedPath };
    return loaded;
  } catch (e) {
    loadFailure = e as Error;
    throw e;
  }
}

function errorName(cu: DriverApi, code: number): string {
  const out: [string | null] = [null];
  try {
    if (cu.cuGetErrorName(code, out) === 0 && out[0]) return out[0];
  } catch {
    // fall through to the number
  }
  return `CUDA error ${code}`;
}

function errorText(cu: DriverApi, code: number): string {
  const out: [string | null] = [null];
  try {
    if (cu.cuGetErrorString(code, out) === 0 && out[0]) return out[0];
  } catch {
    // fall through
  }
  return 'no description';
}

/** Builds the error for a failed driver call: `<doing>: <CUDA_ERROR_NAME> (<code>): <text>`. */
export function cudaError(code: number, doing: string): CudaError {
  const cu = driver().cu;
  const name = errorName(cu, code);
  let hint = '';
  if (code === 700 || code === 719) hint = '; the CUDA context is now unusable (a kernel faulted); restart the process';
  if (code === 209 || code === 222 || code === 500) hint = '; the kernel was compiled for another architecture or a newer toolkit than the driver supports';
  return new CudaError(code, name, `cuda: ${doing}: ${name} (${code}): ${errorText(cu, code)}${hint}`);
}

/** Throws a CudaError for a non-zero driver result. */
export function check(code: number, doing: string | (() => string)): void {
  if (code !== 0) throw cudaError(code, typeof doing === 'string' ? doing : doing());
}

const contexts = new Map<number, Ptr>();
let currentIndex = -1;

/** Number of CUDA devices (0 when the driver loads but sees none). */
export function deviceCount(): number {
  const { cu } = driver();
  const n: [number] = [0];
  check(cu.cuDeviceGetCount(n), 'counting devices');
  return n[0];
}

/** Retains device `index`'s primary context and makes it current on this thread. */
export function makeCurrent(index: number): void {
  if (currentIndex === index) return;
  const { cu } = driver();
  let ctx = contexts.get(index);
  if (ctx === undefined) {
    const n = deviceCount();
    if (index >= n) throw new Error(`cuda: device cuda:${index} does not exist (${n} device(s) visible)`);
    const dev: [number] = [0];
    check(cu.cuDeviceGet(dev, index), `getting device ${index}`);
    const out: [Ptr | null] = [null];
    check(cu.cuDevicePrimaryCtxRetain(out, dev[0]), `retaining the primary context of cuda:${index}`);
    ctx = out[0]!;
    contexts.set(index, ctx);
  }
  check(cu.cuCtxSetCurrent(ctx), `making cuda:${index}'s context current`);
  currentIndex = index;
}

export function driverVersion(): number {
  const v: [number] = [0];
  check(driver().cu.cuDriverGetVersion(v), 'reading the driver version');
  return v[0];
}
