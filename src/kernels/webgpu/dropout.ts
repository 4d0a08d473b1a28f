/**
 * webgpu dropout, in training and inside scaled_dot_product_attention: the keep mask is drawn on
 * the host from the same generator stream, in the same logical order, as the CPU kernel (so one
 * seed gives one mask on every device, as on cuda), uploaded as a multiplier tensor (the rounded
 * 1 / (1 - p), or 0) and applied by the webgpu pointwise multiply.
 */
import { dropout } from '../../ops/defs/nn.js';
import { mul } from '../../ops/defs/pointwise.js';
import { dispatch } from '../../ops/dispatch.js';
import { registerKernel } from '../../ops/registry.js';
import { CPU } from '../../runtime/device.js';
import { numel } from '../../tensor/layout.js';
import { defaultGenerator, type Generator } from '../../tensor/random.js';
import { Tensor } from '../../tensor/tensor.js';
import { dropoutScale } from '../cpu/nn.js';
import { copyTensor, fillTensor } from './core.js';
import { allocOut } from './device.js';

/** A float32 [shape] multiplier on `like`'s device and dtype from host values `fill(view)`. */
function multiplier(shape: readonly number[], like: Tensor, fill: (v: Float32Array) => void): Tensor {
  const host = Tensor.empty(shape, 'float32', CPU);
  fill(new Float32Array(host.storage.cpuArrayBuffer(), 0, numel(shape)));
  try {
    const dev = host.to(like.device);
    if (like.dtype === 'float32') return dev;
    try {
      return copyTensor(allocOut({ shape, strides: dev.strides, dtype: like.dtype, device: like.device }), dev);
    } finally {
      dev.dispose();
    }
  } finally {
    host.dispose();
  }
}

registerKernel(dropout, 'webgpu', (ctx, input, pArg, training, genArg) => {
  const p = pArg as number;
  const out = allocOut(ctx.out);
  if (!training || p === 0) return copyTensor(out, input);
  if (input.dtype === 'bool') return fillTensor(out, 0);
  if (p === 1) {
    const zero = dispatch(mul, input, 0) as Tensor;
    try {
      return copyTensor(out, zero);
    } finally {
      zero.dispose();
    }
  }
  // The CPU kernel's draws, in logical (row-major) order: gen.nextUint32() / 2^32 < 1 - p keeps.
  const gen = (genArg as Generator | null) ?? defaultGenerator;
  const scale = dropoutScale(input.dtype, p);
  const keep = 1 - p;
  const mask = multiplier(input.shape, input, (v) => {
    for (let i = 0; i < v.length; i++) v[i] = gen.nextUint32() / 4294967296 < keep ? scale : 0;
  });
  try {
    const prod = dispatch(mul, input, mask) as Tensor;
    try {
      return copyTensor(out, prod);
    } finally {
      prod.dispose();
    }
  } finally {
    mask.dispose();
  }
});

/**
 * The dropout multiplier of attention probabilities [...batch, L, S], drawn as the CPU's attention
 * kernel draws: per batch entry and query row, gen.nextDouble() < p drops each key it visits (the
 * keys j <= i under a causal mask). It does not skip the key blocks the CPU skips when every key of
 * a block is masked out, so masks that hide whole blocks draw differently.
 */
export function attentionDropout(shape: readonly number[], p: number, causal: boolean, generator: Generator | null, like: Tensor): Tensor {
  const gen = generator ?? defaultGenerator;
  const keepScale = p < 1 ? 1 / (1 - p) : 0;
  const L = shape[shape.length - 2]!;
  const S = shape[shape.length - 1]!;
  return multiplier(shape, like, (v) => {
    for (let r = 0; r < v.length / S; r++) {
      const i = r % L;
      const end = causal ? Math.min(S, i + 1) : S;
      for (let j = 0; j < end; j++) v[r * S + j] = gen.nextDouble() < p ? 0 : keepScale;
    }
  });
}
