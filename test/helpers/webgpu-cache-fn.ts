/** The function and inputs of the webgpu program-cache test (its child process and the parent's cpu reference). */
import * as kiln from '../../src/index.js';

/** A pointwise chain into a softmax: one fused reduce kernel on webgpu. */
export const webgpuCacheFn = (x: kiln.Tensor, b: kiln.Tensor): kiln.Tensor => kiln.softmax(kiln.add(kiln.mul(x, 1.5), kiln.sigmoid(b)), -1);

/** Fixed cpu inputs [x, b] of shape [8, 96]. */
export function webgpuCacheInputs(): [kiln.Tensor, kiln.Tensor] {
  const g = new kiln.Generator(7);
  return [kiln.randn([8, 96], { generator: g }), kiln.randn([8, 96], { generator: g })];
}
