/**
 * Building large models quickly: nn.Linear / nn.Embedding instances whose weights are allocated but
 * not drawn by their constructors (kaiming / N(0, 1) through several temporary tensors would take
 * minutes and gigabytes for a 0.6B model), and a single-pass seeded initialiser that draws random
 * words in the parameter's dtype straight into its storage (or uploads them), over several
 * threads for large parameters.
 */
import { copy_ } from '../api/core.js';
import { noGrad } from '../autograd/index.js';
import { Embedding, Linear, type LayerOptions } from '../nn/layers/basic.js';
import { Parameter } from '../nn/module.js';
import type { DeviceLike } from '../runtime/device.js';
import { Device } from '../runtime/device.js';
import { acceleratorFor } from '../runtime/registry.js';
import { compileInPoolSync, compileWorkers, registerCompileTaskHandler } from '../runtime/pool/index.js';
import { inNode } from '../platform/index.js';
import type { DType } from '../tensor/dtype.js';
import { defaultGenerator, type Generator } from '../tensor/random.js';
import { deviceUniformDraw } from '../tensor/device-draw.js';
import { Tensor } from '../tensor/tensor.js';
import { drawItemSize, drawUniformTask, drawUniformWords, drawWords, isDrawDType, type DrawUniformPayload } from '../tensor/random-fill.js';

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

// A fill of at least PARALLEL_MIN elements is split over the worker pool (when it has 2+ workers):
// rounds of up to ROUND elements, each cut into one part per worker (at least PART_MIN each; a
// part costs a message round trip, ~0.1 ms), drawn into a shared buffer from the generator state
// at the part's start (Generator.advance), then copied into the tensor's storage or uploaded.
const PARALLEL_MIN = 1 << 20;
const PART_MIN = 1 << 18;
const ROUND = 1 << 23;
/** Elements per host-to-device upload of a single-threaded fill on an accelerator. */
const UPLOAD_CHUNK = 1 << 21;

registerCompileTaskHandler('random-uniform', new URL('../tensor/random-fill.js', import.meta.url), 'drawUniformTask', (p) => drawUniformTask(p as DrawUniformPayload));

// The shared buffer of the parallel rounds, kept across the fills of one model build and dropped
// at the next turn of the event loop (a build is synchronous, so that is after it).
let shared: SharedArrayBuffer | undefined;
let dropTimer: ReturnType<typeof setTimeout> | undefined;

function sharedBuffer(bytes: number): SharedArrayBuffer {
  if (shared === undefined || shared.byteLength < bytes) shared = new SharedArrayBuffer(bytes);
  if (dropTimer === undefined) {
    dropTimer = setTimeout(() => {
      shared = undefined;
      dropTimer = undefined;
    }, 0);
    (dropTimer as { unref?: () => void }).unref?.();
  }
  return shared;
}

/** Workers a fill of n elements is spread over (0: this thread draws it). */
function fillWorkers(n: number): number {
  if (n < PARALLEL_MIN || !inNode || typeof SharedArrayBuffer === 'undefined') return 0;
  const w = compileWorkers();
  return w >= 2 ? w : 0;
}

/**
 * Fills `t` in place with U(-a, a), a = std * sqrt(3): word u of the generator's stream becomes
 * u * 2a / 2^32 - a, rounded once to t's dtype (through float32 for the 16-bit types, as the
 * element encoder rounds); the generator ends where t.numel() nextUint32() calls leave it. The
 * values are drawn on the host in t's dtype (tensor/random-fill.ts) straight into a cpu tensor's
 * storage, or into host chunks that are uploaded into an accelerator tensor's storage (no float32
 * staging tensor, no device-side cast: the bits a cpu draw gives). Large fills are spread over
 * the worker pool, each part from its own position in the stream, with the same result. An
 * accelerator with a device draw (cuda: kernels/cuda/random-draw.ts) makes the same bits itself.
 */
export function fillUniformStd_(t: Tensor, std: number, generator: Generator = defaultGenerator): Tensor {
  const n = t.numel();
  const a = std * Math.sqrt(3);
  const scale = (2 * a) / 4294967296;
  const dtype = t.dtype;
  if (!isDrawDType(dtype) || !t.isContiguous()) {
    // Other layouts and dtypes: draw a contiguous cpu tensor (of t's dtype, float32 for the rest) and copy.
    const host = Tensor.empty(t.shape, isDrawDType(dtype) ? dtype : 'float32', new Device('cpu'));
    fillUniformStd_(host, std, generator);
    noGrad(() => copy_(t, host));
    host.dispose();
    return t;
  }
  const onCpu = t.device.type === 'cpu';
  // An accelerator that draws the same words itself (tensor/device-draw.ts) needs no host draw and
  // no upload; the generator moves on as the host draw would have moved it.
  if (!onCpu && deviceUniformDraw(t.device.type)?.(t, dtype, scale, a, generator.getState()) === true) {
    generator.advance(n);
    t.storage.version++;
    return t;
  }
  const size = drawItemSize(dtype);
  const byteOffset = t.offset * size;
  const put = (bytes: Uint8Array, at: number): void => {
    if (onCpu) new Uint8Array(t.storage.cpuArrayBuffer(), byteOffset + at * size, bytes.byteLength).set(bytes);
    else acceleratorFor(t.device).accelerator.copyHostToDevice(t.storage.buffer, byteOffset + at * size, bytes);
  };
  const workers = fillWorkers(n);
  if (workers > 0) {
    for (let base = 0; base < n; base += ROUND) {
      const len = Math.min(ROUND, n - base);
      const buffer = sharedBuffer(len * size);
      const parts = Math.max(1, Math.min(workers, Math.floor(len / PART_MIN)));
      const tasks = [];
      for (let p = 0; p < parts; p++) {
        const start = Math.floor((len * p) / parts);
        const end = Math.floor((len * (p + 1)) / parts);
        const payload: DrawUniformPayload = { buffer, byteOffset: start * size, length: end - start, dtype, scale, shift: a, state: generator.getState() };
        tasks.push({ kind: 'random-uniform', payload });
        generator.advance(end - start);
      }
      compileInPoolSync(tasks);
      put(new Uint8Array(buffer, 0, len * size), base);
    }
  } else if (onCpu) {
    drawUniformWords(drawWords(dtype, t.storage.cpuArrayBuffer(), byteOffset, n), dtype, scale, a, generator);
  } else {
    // Drawing the next chunk overlaps the upload of the last (cuda copies are asynchronous).
    const chunk = Math.min(n, UPLOAD_CHUNK);
    const host = new ArrayBuffer(chunk * size);
    for (let base = 0; base < n; base += chunk) {
      const len = Math.min(chunk, n - base);
      drawUniformWords(drawWords(dtype, host, 0, len), dtype, scale, a, generator);
      put(new Uint8Array(host, 0, len * size), base);
    }
  }
  t.storage.version++;
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
