/** Device strings (`cpu`, `cuda:0`, `webgpu:1`) and their parsed form. */

export type DeviceType = 'cpu' | 'cuda' | 'webgpu';
export const DEVICE_TYPES: readonly DeviceType[] = ['cpu', 'cuda', 'webgpu'];

export class Device {
  readonly type: DeviceType;
  readonly index: number;

  constructor(type: DeviceType, index = 0) {
    if (!Number.isInteger(index) || index < 0) throw new Error(`Device: index must be a non-negative integer, got ${index}`);
    this.type = type;
    this.index = index;
  }

  /** Parses `cpu`, `cuda`, `cuda:1`, `webgpu:0`; a Device passes through. */
  static from(spec: DeviceLike): Device {
    if (spec instanceof Device) return spec;
    const m = /^(cpu|cuda|webgpu)(?::(\d+))?$/.exec(spec);
    if (!m) {
      throw new Error(`Device: cannot parse device string '${spec}'; expected 'cpu', 'cuda[:N]' or 'webgpu[:N]'`);
    }
    return new Device(m[1] as DeviceType, m[2] === undefined ? 0 : Number(m[2]));
  }

  equals(other: Device): boolean {
    return this.type === other.type && this.index === other.index;
  }

  toString(): string {
    return this.type === 'cpu' && this.index === 0 ? 'cpu' : `${this.type}:${this.index}`;
  }
}

export type DeviceLike = Device | string;

export const CPU = new Device('cpu', 0);
