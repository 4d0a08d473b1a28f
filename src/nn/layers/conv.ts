/** Conv2d with PyTorch's defaults and initialisation. */
import { empty } from '../../api/creation.js';
import { conv2d, type ConvPadding, type IntPair } from '../../api/nn.js';
import { checkOptionKeys, keysOf } from '../../runtime/option-keys.js';
import type { Tensor } from '../../tensor/tensor.js';
import { calculateFanInAndFanOut, kaimingUniform_, uniform_ } from '../init.js';
import { Module, Parameter } from '../module.js';
import { LAYER_KEYS, type LayerOptions } from './basic.js';

export interface Conv2dOptions extends LayerOptions {
  stride?: IntPair;
  /** A number, [ph, pw], 'valid' or 'same' (stride 1 only). */
  padding?: ConvPadding;
  dilation?: IntPair;
  groups?: number;
  bias?: boolean;
}

const CONV2D_KEYS = [...LAYER_KEYS, ...keysOf<Omit<Conv2dOptions, keyof LayerOptions>>({ stride: true, padding: true, dilation: true, groups: true, bias: true })];

function pair(name: string, v: IntPair): [number, number] {
  const p = typeof v === 'number' ? [v, v] : [...v];
  if (p.length !== 2 || !p.every((x) => Number.isInteger(x))) throw new Error(`Conv2d: '${name}' must be an integer or a pair of integers, got ${JSON.stringify(v)}`);
  return [p[0]!, p[1]!];
}

/**
 * torch.nn.Conv2d: weight [outChannels, inChannels / groups, kh, kw] kaiming_uniform(a = sqrt(5))
 * (U(-1/sqrt(fanIn), 1/sqrt(fanIn))), bias U(-1/sqrt(fanIn), 1/sqrt(fanIn)) with
 * fanIn = inChannels / groups * kh * kw.
 */
export class Conv2d extends Module {
  weight: Parameter;
  bias: Parameter | null;
  readonly kernelSize: [number, number];
  readonly stride: [number, number];
  readonly padding: [number, number] | 'same' | 'valid';
  readonly dilation: [number, number];
  readonly groups: number;

  constructor(
    readonly inChannels: number,
    readonly outChannels: number,
    kernelSize: IntPair,
    options: Conv2dOptions = {},
  ) {
    super();
    checkOptionKeys(`nn.${new.target.name}`, options, CONV2D_KEYS);
    this.kernelSize = pair('kernelSize', kernelSize);
    this.stride = pair('stride', options.stride ?? 1);
    this.dilation = pair('dilation', options.dilation ?? 1);
    const padding = options.padding ?? 0;
    this.padding = padding === 'same' || padding === 'valid' ? padding : pair('padding', padding);
    this.groups = options.groups ?? 1;
    const g = this.groups;
    if (!Number.isInteger(g) || g <= 0) throw new Error(`Conv2d: groups must be a positive integer, got ${g}`);
    if (inChannels % g !== 0) throw new Error(`Conv2d: inChannels (${inChannels}) must be divisible by groups (${g})`);
    if (outChannels % g !== 0) throw new Error(`Conv2d: outChannels (${outChannels}) must be divisible by groups (${g})`);
    if (padding === 'same' && (this.stride[0] !== 1 || this.stride[1] !== 1)) {
      throw new Error(`Conv2d: padding='same' is not supported for strided convolutions (stride [${this.stride.join(', ')}])`);
    }
    const o = { dtype: options.dtype, device: options.device };
    this.weight = new Parameter(empty([outChannels, inChannels / g, ...this.kernelSize], o));
    kaimingUniform_(this.weight, Math.sqrt(5), 'fanIn', 'leaky_relu', options.generator);
    this.bias = null;
    if (options.bias ?? true) {
      this.bias = new Parameter(empty([outChannels], o));
      const { fanIn } = calculateFanInAndFanOut(this.weight);
      const bound = fanIn > 0 ? 1 / Math.sqrt(fanIn) : 0;
      uniform_(this.bias, -bound, bound, options.generator);
    }
  }

  forward(x: Tensor): Tensor {
    return conv2d(x, this.weight, this.bias, this.stride, this.padding, this.dilation, this.groups);
  }
}
