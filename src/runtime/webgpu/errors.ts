/**
 * Errors of the webgpu accelerator. WebGPU reports validation errors, out-of-memory and device loss
 * asynchronously; the worker collects them and they surface here at the next point where the main
 * thread waits (a readback, synchronize, a pipeline compile), with what Kiln holds on the device,
 * so a failure far from its cause still says what Kiln was doing.
 */
import type { AllocatorStats } from '../accelerator.js';
import type { DeviceFault } from './protocol.js';

export class WebgpuError extends Error {
  constructor(
    message: string,
    readonly kind: DeviceFault['kind'] | 'compile' | 'worker',
  ) {
    super(message);
    this.name = 'WebgpuError';
  }
}

const MiB = 1 << 20;
const fmt = (n: number): string => (n >= MiB ? `${(n / MiB).toFixed(1)} MiB` : `${n} bytes`);

/** One error for the faults an answer carried (the first decides the kind; all are listed). */
export function faultError(faults: readonly DeviceFault[], doing: string, stats: AllocatorStats): WebgpuError {
  const first = faults[0]!;
  const holds = `Kiln holds ${fmt(stats.allocatedBytes)} in ${stats.activeAllocations} live buffers, ${fmt(stats.reservedBytes)} reserved (${fmt(stats.cachedBytes)} cached; kiln.emptyCache('webgpu') frees those)`;
  const head = ((): string => {
    switch (first.kind) {
      case 'lost':
        return `the webgpu device was lost (${first.message}); every webgpu tensor is gone. ${holds}`;
      case 'out-of-memory':
        return `webgpu out of memory: ${first.message}. ${holds}`;
      case 'validation':
        return `webgpu validation error: ${first.message}`;
      case 'internal':
        return `webgpu internal error: ${first.message}`;
      default:
        return first.kind satisfies never;
    }
  })();
  const more = faults.length > 1 ? `\n(and ${faults.length - 1} more: ${faults.slice(1).map((f) => `${f.kind}: ${f.message.split('\n')[0]}`).join('; ')})` : '';
  return new WebgpuError(`${head}\nreported while ${doing}${more}`, first.kind);
}
