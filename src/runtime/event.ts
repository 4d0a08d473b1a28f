/**
 * Device-neutral streams and events (`kiln.Stream`, `kiln.Event`). An Event is constructed for any
 * device and forwards to that accelerator's events, so timing code (the autotuner, benchmarks) is
 * written once for every accelerator.
 */
import type { DeviceEvent, DeviceStream } from './accelerator.js';
import { Device, type DeviceLike } from './device.js';
import { acceleratorFor } from './registry.js';

export class Stream {
  readonly device: Device;
  /** The accelerator's stream. */
  readonly raw: DeviceStream;

  constructor(device: DeviceLike = 'cpu', raw?: DeviceStream) {
    const { accelerator, device: d } = acceleratorFor(device);
    this.device = d;
    this.raw = raw ?? accelerator.createStream(d.index);
  }

  static default(device: DeviceLike = 'cpu'): Stream {
    const { accelerator, device: d } = acceleratorFor(device);
    return new Stream(d, accelerator.defaultStream(d.index));
  }

  synchronize(): void {
    this.raw.synchronize();
  }

  query(): boolean {
    return this.raw.query();
  }
}

export interface EventOptions {
  enableTiming?: boolean;
}

export class Event {
  readonly device: Device;
  private readonly raw: DeviceEvent;
  private recorded = false;

  constructor(device: DeviceLike = 'cpu', options: EventOptions = {}) {
    const { accelerator, device: d } = acceleratorFor(device);
    this.device = d;
    this.raw = accelerator.createEvent(d.index, { enableTiming: options.enableTiming ?? true });
  }

  /** Records the event on `stream` (default: the device's default stream). */
  record(stream?: Stream): this {
    const s = stream ?? Stream.default(this.device);
    if (!s.device.equals(this.device)) {
      throw new Error(`Event.record: event is on ${this.device.toString()} but stream is on ${s.device.toString()}`);
    }
    this.raw.record(s.raw);
    this.recorded = true;
    return this;
  }

  synchronize(): void {
    this.raw.synchronize();
  }

  query(): boolean {
    return this.raw.query();
  }

  /** Milliseconds between this event and `end`. */
  elapsedTime(end: Event): number {
    if (!this.device.equals(end.device)) {
      throw new Error(`Event.elapsedTime: events are on different devices (${this.device.toString()}, ${end.device.toString()})`);
    }
    if (!this.recorded || !end.recorded) throw new Error('Event.elapsedTime: both events must be recorded first');
    return this.raw.elapsedTime(end.raw);
  }
}

/** Waits for all work on a device. */
export function synchronize(device: DeviceLike = 'cpu'): void {
  const { accelerator, device: d } = acceleratorFor(device);
  accelerator.synchronize(d.index);
}
