/**
 * How a lowered program's object graph is stored (cache/object-graph.ts's extension codec), shared
 * by the cpu and webgpu program caches: devices by name; lifted tensors and the derived tensors
 * behind some lifted inputs become markers that a rebuilt program replaces with the fresh trace's.
 */
import { Device } from '../../runtime/device.js';
import { Tensor } from '../../tensor/tensor.js';
import { ConcatConstant } from '../passes/horizontal.js';
import type { ExtensionCodec } from './object-graph.js';

/**
 * Devices are the only class instances in a lowered program (value metadata); lifted tensors and
 * the derived tensors behind some lifted inputs (horizontal fusion's concatenated weights) become
 * markers: a rebuilt program takes every input's source from the fresh trace.
 */
export const PROGRAM_CODEC: ExtensionCodec = {
  encode(v) {
    if (v instanceof Device) return { kind: 'device', data: v.toString() };
    if (v instanceof Tensor) return { kind: 'lifted-tensor', data: null };
    if (v instanceof ConcatConstant) return { kind: 'derived-tensor', data: null };
    return undefined;
  },
  decode(kind, data) {
    if (kind === 'device' && typeof data === 'string') return Device.from(data);
    if (kind === 'lifted-tensor') return { liftedPlaceholder: true };
    if (kind === 'derived-tensor') return { derivedPlaceholder: true };
    throw new Error(`program cache: unknown extension '${kind}'`);
  },
};
