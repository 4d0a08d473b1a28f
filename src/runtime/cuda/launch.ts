/**
 * Kernel modules and launches. A launch is one FFI call: the arguments are packed into one native
 * block with the C ABI's alignment rules and handed to cuLaunchKernel through `extra`
 * (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE). The block, its size word and the `extra` array are
 * allocated once per thread and rewritten in place; the size must be the kernel's exact parameter
 * size (a larger one fails with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES), so it is computed from the
 * declared parameter list, never rounded up.
 *
 * Kernels whose source starts with the PDL prologue (pdl.ts) go through cuLaunchKernelEx instead,
 * with a CUlaunchConfig carrying the PROGRAMMATIC_STREAM_SERIALIZATION attribute: still one FFI call
 * with the same packed arguments; the config block is also allocated once and rewritten in place.
 *
 * A cooperative launch (LaunchDims.cooperative: kernels whose blocks wait for each other, such as
 * the decode megakernel's grid barriers) carries the COOPERATIVE attribute instead: the driver then
 * starts every block at once or fails the launch (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE), where a
 * plain launch of such a kernel could leave a block waiting for one that never becomes resident.
 * Its arguments go as kernelParams (pointers into the same packed block), the form the driver
 * documents for cooperative launches (cuLaunchCooperativeKernel takes no `extra`).
 */
import type { KernelModule } from '../accelerator.js';
import { check, driver, makeCurrent } from './driver.js';
import type { Ptr } from './ffi.js';
import { pdlEnabled, pdlPolicy } from './pdl.js';
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
  /** The kernel body starts with the PDL prologue: it may be launched with programmatic serialization. */
  readonly pdl?: boolean;
}

// Parameter space is 4 KiB on every architecture Kiln targets (32 KiB from Volta with CUDA 12.1
// only through a special attribute, which the generators never need).
const ARG_BLOCK_BYTES = 4096;

interface LaunchState {
  view: DataView;
  /** The packed argument block's address (cooperative launches point into it). */
  block: Ptr;
  sizeView: DataView;
  extra: Ptr;
  /** kernelParams of a cooperative launch: one pointer per parameter, into `block`. */
  paramsView: DataView;
  params: Ptr;
  /** CUlaunchConfig (56 bytes) followed by its one CUlaunchAttribute (72 bytes). */
  configView: DataView;
  config: Ptr;
}

// CUlaunchConfig (cuda.h, CUDA 12/13, 64-bit): grid x/y/z, block x/y/z, sharedMemBytes (7 x u32 at
// 0..24), hStream at 32, attrs at 40, numAttrs at 48; 56 bytes. CUlaunchAttribute: id (u32) at 0,
// value (a 64-byte union) at 8; 72 bytes. Checked against offsetof() with the CUDA 13.0 header.
const CONFIG_BYTES = 56;
const ATTR_BYTES = 72;
const CFG_STREAM = 32;
const CFG_ATTRS = 40;
const CFG_NUM_ATTRS = 48;
const CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2;
const CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;
/** Most parameters a kernel can have (4-byte ones filling the argument block). */
const MAX_PARAMS = ARG_BLOCK_BYTES / 4;

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
  const config = koffi.alloc('uint64_t', (CONFIG_BYTES + ATTR_BYTES) / 8);
  const cv = new DataView(koffi.view(config, CONFIG_BYTES + ATTR_BYTES));
  cv.setBigUint64(CFG_ATTRS, addr(config) + BigInt(CONFIG_BYTES), true);
  cv.setUint32(CFG_NUM_ATTRS, 1, true);
  // The one attribute (its id set per launch: PDL or cooperative), value 1 (an int at the value's start).
  cv.setInt32(CONFIG_BYTES + 8, 1, true);
  const params = koffi.alloc('uint64_t', MAX_PARAMS);
  state = {
    view: new DataView(koffi.view(block, ARG_BLOCK_BYTES)),
    block: addr(block),
    sizeView: new DataView(koffi.view(size, 8)),
    extra: addr(extra),
    paramsView: new DataView(koffi.view(params, MAX_PARAMS * 8)),
    params: addr(params),
    configView: cv,
    config: addr(config),
  };
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
  /** Every block resident at once, or the launch fails (kernels with grid-wide waits). */
  cooperative?: boolean;
}

/** Launches so far with the PDL attribute, the cooperative one and neither (tests check which path really ran). */
export const launchStats = { pdl: 0, plain: 0, cooperative: 0 };

/** Whether launch() gives `kernel` the PDL attribute: only a kernel with the prologue, PDL on for its device. */
export function launchesWithPdl(kernel: CudaKernel): boolean {
  return kernel.pdl === true && pdlEnabled(kernel.deviceIndex);
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
  // A cooperative kernel waits on other blocks: no PDL overlap with the kernel before it.
  const pdl = dims.cooperative !== true && launchesWithPdl(kernel) && (stream.lastOpKernel || pdlPolicy() === 'all');
  if (dims.cooperative === true) launchStats.cooperative++;
  else if (pdl) launchStats.pdl++;
  else launchStats.plain++;
  const rc =
    dims.cooperative === true
      ? launchEx(st, kernel, dims, stream, CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
      : pdl
        ? launchEx(st, kernel, dims, stream, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
        : driver().cu.cuLaunchKernel(kernel.fn, dims.grid, dims.gridY ?? 1, dims.gridZ ?? 1, dims.block, 1, 1, dims.sharedBytes ?? 0, stream.handle, null, st.extra);
  stream.lastOpKernel = true;
  if (rc !== 0) {
    const what = `launching kernel '${kernel.name}' (grid ${dims.grid}x${dims.gridY ?? 1}x${dims.gridZ ?? 1}, block ${dims.block}, ${dims.sharedBytes ?? 0} bytes shared${dims.cooperative === true ? ', cooperative' : ''})`;
    // 720: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE.
    check(rc, rc === 720 ? `${what}: its blocks cannot all be resident at once on cuda:${kernel.deviceIndex} (another context or process holding SMs, or fewer SMs than the grid)` : what);
  }
}

/**
 * cuLaunchKernelEx with one attribute (PDL: the packed arguments as `extra`; cooperative: as
 * kernelParams pointing into the same block).
 */
function launchEx(st: LaunchState, kernel: CudaKernel, dims: LaunchDims, stream: CudaStream, attribute: number): number {
  const c = st.configView;
  c.setUint32(CONFIG_BYTES, attribute, true);
  c.setUint32(0, dims.grid, true);
  c.setUint32(4, dims.gridY ?? 1, true);
  c.setUint32(8, dims.gridZ ?? 1, true);
  c.setUint32(12, dims.block, true);
  c.setUint32(16, 1, true);
  c.setUint32(20, 1, true);
  c.setUint32(24, dims.sharedBytes ?? 0, true);
  c.setBigUint64(CFG_STREAM, addr(stream.handle), true);
  if (attribute !== CU_LAUNCH_ATTRIBUTE_COOPERATIVE) return driver().cu.cuLaunchKernelEx(st.config, kernel.fn, null, st.extra);
  const offsets = kernel.layout.offsets;
  if (offsets.length > MAX_PARAMS) throw new Error(`cuda: kernel '${kernel.name}' has ${offsets.length} parameters (limit ${MAX_PARAMS})`);
  for (let i = 0; i < offsets.length; i++) st.paramsView.setBigUint64(i * 8, st.block + BigInt(offsets[i]!), true);
  return driver().cu.cuLaunchKernelEx(st.config, kernel.fn, st.params, null);
}

const CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

/** Loads a cubin and looks up one entry point. */
export function loadKernel(deviceIndex: number, cubin: Uint8Array, name: string, params: readonly ParamType[], maxDynamicShared = 0, pdl = false): CudaKernel {
  makeCurrent(deviceIndex);
  const { cu } = driver();
  const mod: [Ptr | null] = [null];
  check(cu.cuModuleLoadData(mod, cubin), `loading the module of kernel '${name}' on cuda:${deviceIndex}`);
  const fn: [Ptr | null] = [null];
  check(cu.cuModuleGetFunction(fn, mod[0]!, name), `finding kernel '${name}' in its module`);
  // Any dynamic part gets the opt-in: a kernel's static shared memory plus a dynamic part under
  // 48 KiB can still pass 48 KiB, and such a launch fails (CUDA_ERROR_INVALID_VALUE) without it.
  if (maxDynamicShared > 0) {
    check(cu.cuFuncSetAttribute(fn[0]!, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, maxDynamicShared), `allowing ${maxDynamicShared} bytes of shared memory for '${name}'`);
  }
  return { name, fn: fn[0]!, params, layout: paramLayout(params), deviceIndex, pdl };
}
