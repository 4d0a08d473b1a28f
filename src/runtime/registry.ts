/**
 * Accelerator registry. `cpu` is built in; other accelerators register a probe and a loader and are
 * loaded only on first use, so a missing native dependency (koffi, libcuda, Dawn) never breaks cpu.
 */
import type { Accelerator, AcceleratorProbe } from './accelerator.js';
import { CpuAccelerator } from './cpu/cpu-accelerator.js';
import { Device, type DeviceLike, type DeviceType } from './device.js';
import { runtimeLog } from './notes.js';

export interface AcceleratorEntry {
  /** Cheap check that loads nothing heavy. */
  probe(): AcceleratorProbe;
  /** Loads the accelerator; throws an explanatory error when it cannot. */
  load(): Accelerator;
}

const entries = new Map<DeviceType, AcceleratorEntry>();
const loaded = new Map<DeviceType, Accelerator>();
const failures = new Map<DeviceType, Error>();

export function registerAccelerator(type: DeviceType, entry: AcceleratorEntry): void {
  if (loaded.has(type)) throw new Error(`registerAccelerator: '${type}' is already loaded`);
  entries.set(type, entry);
  failures.delete(type);
}

const cpu = new CpuAccelerator();
loaded.set('cpu', cpu);
entries.set('cpu', { probe: () => ({ available: true, reason: 'built in' }), load: () => cpu });

/** Returns the accelerator for a device type, loading it on first use. */
export function getAccelerator(type: DeviceType): Accelerator {
  const acc = loaded.get(type);
  if (acc) return acc;
  const prior = failures.get(type);
  if (prior) throw prior;
  const entry = entries.get(type);
  if (!entry) throw new Error(`accelerator '${type}' is not registered in this build of kiln`);
  try {
    const a = entry.load();
    loaded.set(type, a);
    runtimeLog('device', () => `accelerator ${type} loaded: ${a.deviceCount()} device(s)`);
    return a;
  } catch (e) {
    const err = new Error(`accelerator '${type}' is not available: ${(e as Error).message}`);
    runtimeLog('device', () => err.message);
    failures.set(type, err);
    throw err;
  }
}

/** Resolves a device and checks that its index exists. */
export function acceleratorFor(device: DeviceLike): { accelerator: Accelerator; device: Device } {
  const d = Device.from(device);
  const accelerator = getAccelerator(d.type);
  const n = accelerator.deviceCount();
  if (d.index >= n) throw new Error(`device ${d.toString()} does not exist: ${d.type} has ${n} device(s)`);
  return { accelerator, device: d };
}

export interface AcceleratorReport {
  type: DeviceType;
  available: boolean;
  reason: string;
}

/** Probes every registered accelerator without loading the unavailable ones. */
export function probeAccelerators(): AcceleratorReport[] {
  return [...entries.entries()].map(([type, e]) => {
    try {
      return { type, ...e.probe() };
    } catch (err) {
      return { type, available: false, reason: (err as Error).message };
    }
  });
}

export function isAvailable(type: DeviceType): boolean {
  return probeAccelerators().some((r) => r.type === type && r.available);
}
