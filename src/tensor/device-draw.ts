/**
 * Device-side seeded uniform draws: the hook through which an accelerator's kernels (registered
 * from kernels/<device>/, which this layer cannot import) produce, on the device, the exact words
 * that tensor/random-fill.ts draws on the host: out[i] = u_i * scale - shift stored as the dtype
 * stores a number, u_i the generator's words from `state` on. models/init.ts asks for one before
 * drawing on the host and uploading (seeded random weights of a 0.6B model: 600M words, about a
 * second and a half of host work and a 1.2 GB upload that a GPU does in milliseconds).
 *
 * A draw leaves the generator alone: the caller advances it by the element count
 * (Generator.advance), as the host draw would have.
 */
import type { DrawDType } from './random-fill.js';
import type { GeneratorState } from './random.js';
import type { Tensor } from './tensor.js';

/**
 * Fills the contiguous tensor `t` (numel words of `dtype` from t.offset) on its device; returns
 * false where it cannot (the caller then draws on the host), never a partial fill.
 */
export type DeviceUniformDraw = (t: Tensor, dtype: DrawDType, scale: number, shift: number, state: GeneratorState) => boolean;

const draws = new Map<string, DeviceUniformDraw>();

export function registerDeviceUniformDraw(deviceType: string, fn: DeviceUniformDraw): void {
  draws.set(deviceType, fn);
}

/** The registered draw of a device type, if any. */
export function deviceUniformDraw(deviceType: string): DeviceUniformDraw | undefined {
  return draws.get(deviceType);
}
