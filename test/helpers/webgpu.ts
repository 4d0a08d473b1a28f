/**
 * What the webgpu tests share: why they skip (no adapter, or Dawn's null backend, which computes
 * nothing), and moving sample arguments onto webgpu with their layout intact: a tensor's whole
 * storage is uploaded and the same view (shape, strides, offset) taken over it, so transposed,
 * sliced, broadcast (stride 0) and channels_last samples stay what they are; cpu devices among the
 * arguments become webgpu's.
 */
import assert from 'node:assert/strict';
import * as kiln from '../../src/index.js';
import { Device } from '../../src/runtime/device.js';
import { nativeF16Stores } from '../../src/kernels/webgpu/f16-store-probe.js';
import { itemSize } from '../../src/tensor/dtype.js';
import { Tensor } from '../../src/tensor/tensor.js';

export function webgpuSkipReason(): string | false {
  const probe = kiln.probeAccelerators().find((p) => p.type === 'webgpu');
  if (!probe?.available) return `no webgpu adapter: ${probe?.reason ?? 'webgpu not registered'}`;
  if (kiln.getAccelerator('webgpu').properties(0).backend === 'null') return "Dawn's null backend computes nothing (KILN_WEBGPU_BACKEND=null)";
  // The float16 store probe's one dispatch, now rather than inside a test that counts dispatches.
  nativeF16Stores();
  return false;
}

export const WEBGPU = new Device('webgpu');

/** `t` on webgpu with the same shape, strides and offset (its whole storage copied). */
export function sameLayoutOnWebgpu(t: Tensor): Tensor {
  if (t.device.type === 'webgpu') return t;
  const n = Math.floor(t.storage.nbytes / itemSize(t.dtype));
  const flat = new Tensor(t.storage, t.dtype, [n], [1], 0);
  const dev = flat.to('webgpu');
  const view = new Tensor(dev.storage, t.dtype, t.shape, t.strides, t.offset);
  flat.dispose();
  dev.dispose();
  if (t.requiresGrad) view.requiresGrad_();
  return view;
}

/** Sample arguments with every tensor (also inside arrays) on webgpu and cpu devices replaced by webgpu. */
export function argsOnWebgpu(args: readonly unknown[]): unknown[] {
  const move = (a: unknown): unknown => {
    if (a instanceof Tensor) return sameLayoutOnWebgpu(a);
    if (a instanceof Device) return a.type === 'cpu' ? WEBGPU : a;
    if (a === 'cpu') return 'webgpu';
    if (Array.isArray(a)) return a.map(move);
    return a;
  };
  return args.map(move);
}

/** float16 GEMM results against a float64 reference: |got - want| <= 2e-2 + 4e-3 |want| per element. */
export function closeF16(got: Tensor, want: Tensor, label: string): void {
  const g = got.to('cpu').to('float64').toFlatArray() as number[];
  const w = want.toFlatArray() as number[];
  assert.equal(g.length, w.length, label);
  for (let i = 0; i < w.length; i++) assert.ok(Math.abs(g[i]! - w[i]!) <= 2e-2 + 4e-3 * Math.abs(w[i]!), `${label}: element ${i} got ${g[i]}, want ${w[i]}`);
}

/** A standard-normal float16 sample (on the cpu). */
export const randnF16 = (shape: number[]): Tensor => kiln.randn(shape).to('float16');
