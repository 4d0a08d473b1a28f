/** Memory introspection for any device: allocator statistics and cache control. */
import type { AllocatorStats } from './runtime/accelerator.js';
import type { DeviceLike } from './runtime/device.js';
import { acceleratorFor } from './runtime/registry.js';

export function memoryStats(device: DeviceLike = 'cpu'): AllocatorStats {
  const { accelerator, device: d } = acceleratorFor(device);
  return accelerator.allocator(d.index).stats();
}

export function emptyCache(device: DeviceLike = 'cpu'): void {
  const { accelerator, device: d } = acceleratorFor(device);
  accelerator.allocator(d.index).emptyCache();
}

export function resetPeakMemoryStats(device: DeviceLike = 'cpu'): void {
  const { accelerator, device: d } = acceleratorFor(device);
  accelerator.allocator(d.index).resetPeakStats();
}
