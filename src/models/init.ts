/**
 * Building large models quickly: nn.Linear / nn.Embedding instances whose weights are allocated but
 * not drawn by their constructors (kaiming / N(0, 1) through several temporary tensors would take
 * minutes and gigabytes for a 0.6B model), and a single-pass seeded initialiser that writes random
 * words straight into a parameter's storage.
 */
import { copy_ } from '../api/core.js';
import { noGrad } from '../autograd/index.js';
import { Embedding, Linear, type LayerOptions } from '../nn/layers/basic.js';
import { Parameter } from '../nn/module.js';
import type { DeviceLike } from '../runtime/device.js';
import { Device } from '../runtime/device.js';
import type { DType } from '../tensor/dtype.js';
import { defaultGenerator, type Generator } from '../tensor/random.js';
import { Tensor } from '../tensor/tensor.js';
import { encoder, storageArray } from '../tensor/typed.js';

export interface BuildOptions {
  dtype?: DType;
  device?: DeviceLike;
  /** Draw random weights (default) or leave them uninitialised (fromPretrained fills them). */
  init?: boolean;
  /** Generator for the weights (the global one by default). */
  generator?: Generator;
  /** Weights are drawn uniformly with this standard deviation (transformers' initializer_range). */
  initStd?: number;
}

/** The part of BuildOptions that nn layers take (they reject other keys, such as initStd). */
export function layerOptions(o: BuildOptions): LayerOptions {
  return { dtype: o.dtype, device: o.device, init: o.init, generator: o.generator };
}

/** Fills `t` in place with U(-a, a), a = std * sqrt(3), in one pass over a float32 buffer. */
export function fillUniformStd_(t: Tensor, std: number, generator: Generator = defaultGenerator): Tensor {
  const n = t.numel();
  const a = std * Math.sqrt(3);
  const scale = (2 * a) / 4294967296;
  if (t.device.type === 'cpu' && t.isContiguous() && (t.dtype === 'float32' || t.dtype === 'float64')) {
    const words = storageArray(t.dtype, t.storage.cpuArrayBuffer(), t.offset * t.elementSize(), n) as Float32Array | Float64Array;
    for (let i = 0; i < n; i++) words[i] = generator.nextUint32() * scale - a;
    t.storage.version++;
    return t;
  }
  if (t.device.type === 'cpu' && t.isContiguous() && (t.dtype === 'float16' || t.dtype === 'bfloat16')) {
    const enc = encoder(t.dtype) as (x: number) => number;
    const words = storageArray(t.dtype, t.storage.cpuArrayBuffer(), t.offset * t.elementSize(), n) as Uint16Array;
    for (let i = 0; i < n; i++) words[i] = enc(generator.nextUint32() * scale - a);
    t.storage.version++;
    return t;
  }
  const host = Tensor.empty(t.shape, 'float32', new Device('cpu'));
  fillUniformStd_(host, std, generator);
  noGrad(() => copy_(t, host));
  host.dispose();
  return t;
}

/** An nn.Linear whose weights are drawn by fillUniformStd_ (bias zero) when `init`, else left for loading. */
export function buildLinear(inFeatures: number, outFeatures: number, bias: boolean, o: BuildOptions): Linear {
  const l = new Linear(inFeatures, outFeatures, bias, { dtype: o.dtype, device: o.device, init: false });
  if (o.init ?? true) {
    fillUniformStd_(l.weight, o.initStd ?? 0.02, o.generator);
    if (l.bias) noGrad(() => copy_(l.bias!, 0));
  }
  return l;
}

/** An nn.Embedding whose weights are drawn by fillUniformStd_ when `init`, else left for loading. */
export function buildEmbedding(numEmbeddings: number, embeddingDim: number, o: BuildOptions): Embedding {
  const e = new Embedding(numEmbeddings, embeddingDim, null, { dtype: o.dtype, device: o.device, init: false });
  if (o.init ?? true) fillUniformStd_(e.weight, o.initStd ?? 0.02, o.generator);
  return e;
}

/** An nn.Linear around an existing weight Parameter (shared, e.g. a tied LM head). */
export function linearSharing(weight: Parameter, o: BuildOptions): Linear {
  const l = new Linear(weight.shape[1]!, weight.shape[0]!, false, { dtype: o.dtype, device: o.device, init: false });
  l.weight.dispose();
  l.weight = weight;
  return l;
}
