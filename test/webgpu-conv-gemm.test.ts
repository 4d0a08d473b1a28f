/**
 * The implicit-GEMM conv2d of webgpu (conv-gemm.ts) against the CPU in float64: every case of
 * webgpu-ops-cases.ts's convGemms (tile edges in M, N and K, stride 2, padding, dilation, groups,
 * channels_last, contiguous and strided operands, bias on and off, float32/float16/bfloat16) runs
 * with KILN_WEBGPU_CONV_GEMM on and off, and the dispatched kernels say which path ran: the GEMM
 * with the option on (the direct kernel for none of these cases), the direct kernel with it off;
 * and a depthwise convolution stays on the direct kernel with the option on.
 * Needs a real adapter (Dawn on a GPU, or SwiftShader's Vulkan on a CPU): skips without one.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { tolFor } from './helpers/assert.js';
import { sameLayoutOnWebgpu, webgpuSkipReason } from './helpers/webgpu.js';
import { convGemms, make } from './webgpu-ops-cases.js';

const skip = webgpuSkipReason();

/** The first element outside atol + rtol * |want|, or null. */
function mismatch(got: Tensor, want: Tensor, atol: number, rtol: number): string | null {
  if (got.shape.join(',') !== want.shape.join(',')) return `shape [${got.shape.join(', ')}], want [${want.shape.join(', ')}]`;
  const g = got.to('cpu').toFlatArray() as number[];
  const w = want.toFlatArray() as number[];
  for (let i = 0; i < w.length; i++) {
    if (Math.abs(g[i]! - w[i]!) <= atol + rtol * Math.abs(w[i]!)) continue;
    return `element ${i}: got ${g[i]}, want ${w[i]}`;
  }
  return null;
}

/** The names of the kernels `fn` dispatches on webgpu. */
function dispatched(fn: () => void): string[] {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const names: string[] = [];
  const orig = acc.dispatch.bind(acc);
  acc.dispatch = (k, bufs, meta, groups): void => {
    names.push(k.name);
    orig(k, bufs, meta, groups);
  };
  try {
    fn();
  } finally {
    acc.dispatch = orig;
  }
  return names;
}

test('conv2d on webgpu: the implicit GEMM and the direct kernel match the CPU in float64 (tile edges, stride, padding, dilation, groups, layouts, bias, dtypes)', { skip }, () => {
  const failures: string[] = [];
  for (const gemm of [true, false]) {
    setOption('KILN_WEBGPU_CONV_GEMM', gemm);
    try {
      for (const c of convGemms()) {
        let got: Tensor | undefined;
        const names = dispatched(() => {
          got = c.run(...c.inputs.map(sameLayoutOnWebgpu)) as Tensor;
        });
        const convs = names.filter((n) => n.startsWith('kiln.conv2d.'));
        // With the GEMM on, float16 one-group convolutions may take the im2col route (a gather, then the
        // staged subgroup-matrix GEMM: KILN_WEBGPU_CONV_IM2COL), also a GEMM.
        const gemmRoute = (n: string): boolean => n.startsWith('kiln.conv2d.gemm.') || n.startsWith('kiln.conv2d.im2col.');
        const onGemm = convs.length > 0 && convs.every(gemmRoute);
        const onDirect = convs.length > 0 && convs.every((n) => !gemmRoute(n));
        if (gemm ? !onGemm : !onDirect) failures.push(`${c.label} (gemm ${gemm}): dispatched ${names.join(', ')}`);
        const want = (c.run(...c.inputs.map((t) => t.to('float64'))) as Tensor).to(got!.dtype);
        const t = got!.dtype === 'float32' ? (c.tol ?? { atol: 2e-5, rtol: 1e-5 }) : { atol: 2 * tolFor(got!.dtype).atol, rtol: 2 * tolFor(got!.dtype).rtol };
        const m = mismatch(got!, want, t.atol, t.rtol);
        if (m) failures.push(`${c.label} (gemm ${gemm}): ${m}`);
      }
    } finally {
      setOption('KILN_WEBGPU_CONV_GEMM', undefined);
    }
  }
  assert.deepEqual(failures, []);
});

test('a depthwise conv2d stays on the direct kernel with the GEMM on', { skip }, () => {
  const x = sameLayoutOnWebgpu(make([2, 16, 9, 9], 'float32', 'channelsLast'));
  const w = sameLayoutOnWebgpu(make([16, 1, 3, 3]));
  const names = dispatched(() => {
    kiln.conv2d(x, w, null, 1, 1, 1, 16);
  }).filter((n) => n.startsWith('kiln.conv2d.'));
  assert.deepEqual(names, ['kiln.conv2d.f32.']);
});

test('conv2d backward on webgpu through the GEMM (the weight gradient splits K) matches the CPU in float64', { skip }, () => {
  // Weight gradient: a conv with M = 8 * 3 * 3, N = 24, K = 4 * 24 * 24 = 2304 (split); input gradient: 24 -> 8 channels.
  const x = make([4, 8, 24, 24], 'float32', 'channelsLast');
  const w = make([24, 8, 3, 3]);
  const b = make([24]);
  const grads = (on: (t: Tensor) => Tensor): { names: string[]; g: Tensor[] } => {
    const leaves = [on(x), on(w), on(b)].map((t) => t.detach().requiresGrad_());
    const names = dispatched(() => {
      const y = kiln.conv2d(leaves[0]!, leaves[1]!, leaves[2]!, 1, 1);
      kiln.sum(kiln.mul(y, y)).backward();
    });
    return { names, g: leaves.map((t) => t.grad!) };
  };
  const got = grads(sameLayoutOnWebgpu);
  const want = grads((t) => t.to('float64'));
  assert.ok(got.names.some((n) => n.startsWith('kiln.conv2d.gemm.combine.')), `split K ran: ${got.names.join(', ')}`);
  got.g.forEach((g, i) => {
    const scale = Math.max(...(want.g[i]!.abs().toFlatArray() as number[]));
    assert.equal(mismatch(g, want.g[i]!.to('float32'), 1e-5 * scale, 1e-4), null, `gradient ${i}`);
  });
});
