/** The current-device guard: `withDevice('cuda:1', fn)` makes cuda:1 the default for creation ops. */
import { Device, type DeviceLike, CPU } from './device.js';
import { acceleratorFor } from './registry.js';

let current: Device = CPU;

export function currentDevice(): Device {
  return current;
}

export function setDefaultDevice(device: DeviceLike): void {
  current = acceleratorFor(device).device;
}

export function withDevice<T>(device: DeviceLike, fn: () => T): T {
  const prev = current;
  current = acceleratorFor(device).device;
  try {
    return fn();
  } finally {
    current = prev;
  }
}
