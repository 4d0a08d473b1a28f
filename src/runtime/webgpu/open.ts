/**
 * Opens the Dawn device once per process, for both the probe and the loader: whether WebGPU is
 * usable is only known after asking Dawn for an adapter (on a machine without a GPU it finds none),
 * so the probe does the opening, keeps the device thread, and the loader reuses it.
 */
import { Bridge } from './bridge.js';
import { dawnOptions, WANTED_FEATURES } from './dawn-options.js';

let opened: { bridge: Bridge } | { error: Error } | undefined;

/** The device thread with its adapter open, or the error that says why there is none. */
export function openDawn(): { bridge: Bridge } | { error: Error } {
  if (opened) return opened;
  try {
    opened = { bridge: new Bridge(dawnOptions(), WANTED_FEATURES) };
  } catch (e) {
    opened = { error: e as Error };
  }
  return opened;
}
