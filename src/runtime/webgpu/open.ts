/**
 * Opens the Dawn device once per process, for both the probe and the loader: whether WebGPU is
 * usable is only known after asking Dawn for an adapter (on a machine without a GPU it finds none),
 * so the probe does the opening, keeps the device thread, and the loader reuses it.
 *
 * In a browser the device worker can only be started asynchronously (bridge.ts,
 * Bridge.openInBrowser): `prepareWebgpu()` does it, and until then the probe reports webgpu
 * unavailable and says to call it.
 */
import { inNode } from '../../platform/index.js';
import { Bridge } from './bridge.js';
import { dawnOptions, WANTED_FEATURES } from './dawn-options.js';

let opened: { bridge: Bridge } | { error: Error } | undefined;

/** The device thread with its adapter open, or the error that says why there is none. */
export function openDawn(): { bridge: Bridge } | { error: Error } {
  if (opened) return opened;
  if (!inNode) {
    return { error: new Error('webgpu in a browser: call `await kiln.prepareWebgpu()` (in a Web Worker of a cross-origin isolated page) before using the device') };
  }
  try {
    opened = { bridge: new Bridge(dawnOptions(), WANTED_FEATURES) };
  } catch (e) {
    opened = { error: e as Error };
  }
  return opened;
}

/**
 * Opens the webgpu device where that must be asynchronous (a browser: navigator.gpu in a device
 * worker); in Node it opens Dawn as the probe would. Resolves to whether webgpu is available and why.
 */
export async function prepareWebgpu(): Promise<{ available: boolean; reason: string }> {
  if (!inNode && opened === undefined) {
    try {
      opened = { bridge: await Bridge.openInBrowser(WANTED_FEATURES) };
    } catch (e) {
      opened = { error: e as Error };
    }
  }
  const d = openDawn();
  if ('error' in d) return { available: false, reason: d.error.message };
  return { available: true, reason: describeAdapter(d.bridge) };
}

/** One line about the open adapter. */
export function describeAdapter(bridge: Bridge): string {
  const a = bridge.adapter;
  const name = a.description || a.device || a.vendor || 'adapter';
  if (a.backend === 'browser') return `the browser's WebGPU (navigator.gpu), ${name}${a.architecture ? ` ${a.architecture}` : ''}; features ${a.features.join(', ')}`;
  return `Dawn ${a.backend === 'default' ? '' : `${a.backend} backend, `}${name}; features ${a.features.join(', ')}`;
}
