/**
 * Kernel modules and launches. A launch is one FFI call: the arguments are packed into one native
 * block with the C ABI's alignment rules and handed to cuLaunchKernel through `extra`
 * (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE). The block, its size word and the `extra` array are
 * allocated once per thread and rewritten in place; the size must be the kernel's exact parameter
 * size (a larger one fails with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES), so it is computed from the
 * declared parameter list, never rounded up.
 */
import type { KernelModule } from '../accelerator.js';
import { check, driver, makeCurrent } from './driver.js';
import type { Ptr } from './ffi.js';
import type { CudaStream } from './stream.js';

/** Kernel parameter types as the generated CUDA C declares them. */
export type ParamType = 'ptr' | 'i32' | 'u32' | 'i64' | 'f32' | 'f64';

const SIZE: Record<ParamType, number> = { ptr: 8, i32: 4, u32: 4, i64: 8, f32: 4, f64: 8 };

export interface ParamLayout {
  offsets: number[];
  /** Exact byte size of the parameter list (end of the last parameter, no tail padding). */
  size: number;
}

/** Offsets of each parameter, each aligned to its own size (the C ABI for these scalar types). */
export function paramLayout(params: readonly ParamType[]): ParamLayout {
  const offsets: number[] = [];
  let off = 0;
  for (const p of params) {
    const s = SIZE[p];
    off = Math.ceil(off / s) * s;
    offsets.push(off);
    off += s;
  }
  return { offsets, size: off };
}

export interface CudaKernel extends KernelModule {
  readonly fn: Ptr;
  readonly params: readonly ParamType[];
  readonly layout: ParamLayout;
  readonly deviceIndex: number;
}

// Parameter space is 4 KiB on every architecture Kiln targets (32 KiB from Volta with CUDA 12.1
// only through a special attribute, which the generators never need).
const ARG_BLOCK_BYTES = 4096;

interface LaunchState {
  view: DataView;
  sizeView: DataView;
  extra: Ptr;
}

let state: LaunchState | undefined;

function addr(p: unknown): bigint {
  const { koffi } = driver();
  return typeof p === 'bigint' ? p : koffi.address(p);
}

function launchState(): LaunchState {
  if (state) return state;
  const { koffi } = driver();
  const block = koffi.alloc('uint8_t', ARG_BLOCK_BYTES);
  const size = koffi.alloc('uint64_t', 1);
  const extra = koffi.alloc('uint64_t', 5);
  const ev = new DataView(koffi.view(extra, 40));
  // CU_LAUNCH_PARAM_BUFFER_POINTER = 1, CU_LAUNCH_PARAM_BUFFER_SIZE = 2, CU_LAUNCH_PARAM_END = 0.
  ev.setBigUint64(0, 1n, true);
  ev.setBigUint64(8, addr(block), true);
  ev.setBigUint64(16, 2n, true);
  ev.setBigUint64(24, addr(size), true);
  ev.setBigUint64(32, 0n, true);
  state = { view: new DataView(koffi.view(block, ARG_BLOCK_BYTES)), sizeView: new DataView(koffi.view(size, 8)), extra: addr(extra) };
  return state;
}

const TWO32 = 2 ** 32;

function write64(v: DataView, off: number, x: number): void {
  // Two 32-bit halves avoid a BigInt per argument; floor keeps negative strides two's complement.
  const hi = Math.floor(x / TWO32);
  v.setUint32(off, x - hi * TWO32, true);
  v.setInt32(off + 4, hi, true);
}

export interface LaunchDims {
  grid: number;
  block: number;
  /** Second and third grid dimensions (default 1). */
  gridY?: number;
  gridZ?: number;
  sharedBytes?: number;
}

/** Packs `args` by the kernel's declared parameter types and launches it on `stream`. */
export function launch(kernel: CudaKernel, args: readonly number[], dims: LaunchDims, stream: CudaStream): void {
  const st = launchState();
  const { params, layout } = kernel;
  if (args.length !== params.length) {
    throw new Error(`cuda: kernel '${kernel.name}' takes ${params.length} arguments, got ${args.length}`);
  }
  if (layout.size > ARG_BLOCK_BYTES) throw new Error(`cuda: kernel '${kernel.name}' has ${layout.size} bytes of parameters (limit ${ARG_BLOCK_BYTES})`);
  const v = st.view;
  for (let i = 0; i < params.length; i++) {
    const off = layout.offsets[i]!;
    const x = args[i]!;
    switch (params[i]!) {
      case 'ptr':
      case 'i64':
        write64(v, off, x);
        break;
      case 'i32':
        v.setInt32(off, x, true);
        break;
      case 'u32':
        v.setUint32(off, x, true);
        break;
      case 'f32':
        v.setFloat32(off, x, true);
        break;
      case 'f64':
        v.setFloat64(off, x, true);
        break;
    }
  }
  // Several devices: the kernel's context must be current (a compare when it already is).
  makeCurrent(kernel.deviceIndex);
  st.sizeView.setUint32(0, layout.size, true);
  st.sizeView.setUint32(4, 0, true);
  const rc = driver().cu.cuLaunchKernel(kernel.fn, dims.grid, dims.gridY ?? 1, dims.gridZ ?? 1, dims.block, 1, 1, dims.sharedBytes ?? 0, stream.handle, null, st.extra);
  if (rc !== 0) check(rc, `launching kernel '${kernel.name}' (grid ${dims.grid}x${dims.gridY ?? 1}x${dims.gridZ ?? 1}, block ${dims.block}, ${dims.sharedBytes ?? 0} bytes shared)`);
}

const CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

/** Loads a cubin and looks up one entry point. */
export function loadKernel(deviceIndex: number, cubin: Uint8Array, name: string, params: readonly ParamType[], maxDynamicShared = 0): CudaKernel {
  makeCurrent(deviceIndex);
  const { cu } = driver();
  const mod: [Ptr | null] = [null];
  check(cu.cuModuleLoadData(mod, cubin), `loading the module of kernel '${name}' on cuda:${deviceIndex}`);
  const fn: [Ptr | null] = [null];
  check(cu.cuModuleGetFunction(fn, mod[0]!, name), `finding kernel '${name}' in its module`);
  if (maxDynamicShared > 48 * 1024) {
    check(cu.cuFuncSetAttribute(fn[0]!, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, maxDynamicShared), `allowing ${maxDynamicShared} bytes of shared memory for '${name}'`);
  }
  return { name, fn: fn[0]!, params, layout: paramLayout(params), deviceIndex };
}
