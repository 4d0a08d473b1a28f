/**
 * Values of every webgpu pointwise kernel against the CPU kernels on the same inputs (every op the
 * WGSL table gives a kernel, every dtype, broadcast, transposed and scalar operands, in-place forms),
 * plus copies, casts and readback. Needs a real adapter: skips here (Dawn finds none on a machine
 * without a GPU) and on the null backend; scripts/device/webgpu.sh runs it on the GPU machine.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { dispatch } from '../src/ops/dispatch.js';
import { getOp } from '../src/ops/registry.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { tolFor } from './helpers/assert.js';
import { argsOn, pointwiseCases } from './webgpu-cases.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

/** Transcendentals on the GPU may differ by a few ulp more than the CPU's libm (Vulkan's precision rules). */
const LOOSE = new Set(['exp', 'exp_', 'expm1', 'log', 'log2', 'log10', 'log1p', 'sin', 'cos', 'tan', 'tanh', 'tanh_', 'sigmoid', 'sigmoid_', 'erf', 'silu', 'gelu', 'softplus', 'pow', 'powScalar', 'atan2', 'logaddexp', 'hypot', 'rsqrt']);

function compare(label: string, got: Tensor, want: Tensor, loose: boolean): void {
  assert.deepEqual([...got.shape], [...want.shape], `${label}: shape`);
  assert.equal(got.dtype, want.dtype, `${label}: dtype`);
  const d = tolFor(want.dtype);
  const atol = loose && want.dtype === 'float32' ? 2e-5 : d.atol;
  const rtol = loose && want.dtype === 'float32' ? 2e-5 : d.rtol;
  const g = got.to('cpu').toFlatArray() as number[];
  const w = want.toFlatArray() as number[];
  for (let i = 0; i < w.length; i++) {
    const a = Number(g[i]);
    const b = Number(w[i]);
    if (Number.isNaN(b)) {
      assert.ok(Number.isNaN(a), `${label}: element ${i}: got ${a}, want NaN`);
      continue;
    }
    if (a === b) continue;
    assert.ok(Math.abs(a - b) <= atol + rtol * Math.abs(b), `${label}: element ${i}: got ${a}, want ${b} (atol ${atol}, rtol ${rtol})`);
  }
}

test('webgpu tensors round-trip and cast like the CPU', { skip }, () => {
  const x = kiln.tensor([[1.5, -2.25, 3], [4, 5.5, -6]]);
  const g = x.to('webgpu');
  assert.equal(g.device.toString(), 'webgpu:0');
  assert.deepEqual(g.to('cpu').toArray(), x.toArray());
  for (const dt of ['float16', 'bfloat16', 'int32', 'uint8', 'bool'] as const) compare(`toDtype ${dt}`, g.to(dt), x.to(dt), false);
  compare('transpose contiguous', g.t().contiguous(), x.t().contiguous(), false);
  // Odd element counts of 1- and 2-byte dtypes: partial words at the ends of uploads and copies.
  const h = kiln.tensor([1, 2, 3], { dtype: 'float16' });
  assert.deepEqual(h.to('webgpu').to('cpu').toFlatArray(), [1, 2, 3]);
  assert.deepEqual(kiln.ones([5], { dtype: 'bool', device: 'webgpu' }).to('cpu').toFlatArray(), [true, true, true, true, true].map(Number));
});

test('every webgpu pointwise kernel matches the CPU (all dtypes, broadcast/strided/scalar, in place)', { skip }, () => {
  const failures: string[] = [];
  let ran = 0;
  for (const c of pointwiseCases()) {
    const op = getOp(c.op);
    const cpuArgs = argsOn(c, 'cpu');
    let want: Tensor;
    try {
      want = dispatch(op, ...(cpuArgs as never[])) as Tensor;
    } catch {
      continue; // the op rejects these dtypes (meta) or the CPU raises (integer division by zero)
    }
    try {
      const got = dispatch(op, ...(argsOn(c, 'webgpu') as never[])) as Tensor;
      compare(c.label, got, want, LOOSE.has(c.op));
      ran++;
    } catch (e) {
      if (/do not support dtype (int64|float64)/.test((e as Error).message)) continue; // WGSL has no 64-bit types
      failures.push(`${c.label}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  assert.deepEqual(failures, [], `${failures.length} of ${ran + failures.length} cases differ`);
  assert.ok(ran > 300, `ran ${ran} cases`);
});

test('memory: freed webgpu buffers are reused; emptyCache gives them back', { skip }, () => {
  kiln.emptyCache('webgpu');
  const before = kiln.memoryStats('webgpu');
  for (let i = 0; i < 10; i++) kiln.ones([1024], { device: 'webgpu' }).dispose();
  const after = kiln.memoryStats('webgpu');
  assert.ok(after.cacheHits - before.cacheHits >= 9, `cache hits ${after.cacheHits - before.cacheHits}`);
  kiln.emptyCache('webgpu');
  assert.equal(kiln.memoryStats('webgpu').cachedBytes, 0);
});
