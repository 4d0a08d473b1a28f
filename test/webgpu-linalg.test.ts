/**
 * Values of the webgpu matrix products (mm, bmm, matmul, linear, addmm, dot; float32, float16,
 * bfloat16; transposed, strided, broadcast-batched and 1-D operands) against float64 references on
 * the CPU computed from the same rounded inputs, within a bound of |A| @ |B| times the output's ulp
 * plus f32 accumulation over K steps; and kiln.Event timing on webgpu in device time. Needs
 * a real adapter: skips here (Dawn finds none on a machine without a GPU) and on the null backend;
 * scripts/device/webgpu.sh runs it on the GPU machine.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { dispatch } from '../src/ops/dispatch.js';
import { getOp } from '../src/ops/registry.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { absArgs, argsFor, GEMM_CASES, GEMM_TEST_DTYPES } from './webgpu-linalg-cases.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

/** One ulp of the output's dtype at 1 (relative), and the f32 unit roundoff of the accumulation. */
const OUT_ULP: Partial<Record<DType, number>> = { float32: 2 ** -23, float16: 2 ** -10, bfloat16: 2 ** -7 };
const ACC_U = 2 ** -24;
/** The largest contracted size in GEMM_CASES (bounds the accumulation error). */
const K_MAX = 300;

test('every webgpu matrix product matches a float64 reference (float32, float16, bfloat16)', { skip }, () => {
  const failures: string[] = [];
  let ran = 0;
  for (const dtype of GEMM_TEST_DTYPES) {
    for (const c of GEMM_CASES) {
      const op = getOp(c.op);
      const refArgs = argsFor(c, dtype, 'cpu', true);
      const want = dispatch(op, ...(refArgs as never[])) as Tensor;
      const bound = dispatch(op, ...(absArgs(refArgs) as never[])) as Tensor;
      try {
        const got = dispatch(op, ...(argsFor(c, dtype, 'webgpu') as never[])) as Tensor;
        assert.deepEqual([...got.shape], [...want.shape], 'shape');
        assert.equal(got.dtype, dtype, 'dtype');
        const g = got.to('cpu').toFlatArray();
        const w = want.toFlatArray();
        const b = bound.toFlatArray();
        for (let i = 0; i < w.length; i++) {
          // One output rounding (two where linear adds a broadcast bias after the GEMM), bounded by
          // |A| @ |B| (+ |bias|) since cancellation may leave the result itself small.
          const tol = (OUT_ULP[dtype]! + 2 * (K_MAX + 2) * ACC_U) * b[i]! + 1e-30;
          const err = Math.abs(g[i]! - w[i]!);
          if (!(err <= tol)) throw new Error(`element ${i}: got ${g[i]}, want ${w[i]} (|err| ${err.toExponential(2)} > ${tol.toExponential(2)})`);
        }
        ran++;
      } catch (e) {
        failures.push(`${c.label} ${dtype}: ${(e as Error).message.split('\n')[0]}`);
      }
    }
  }
  assert.deepEqual(failures, [], `${failures.length} of ${GEMM_CASES.length * GEMM_TEST_DTYPES.length} cases differ`);
  assert.equal(ran, GEMM_CASES.length * GEMM_TEST_DTYPES.length);
});

test('a large float32 GEMM (512x768 @ 768x384) matches a float64 reference', { skip }, () => {
  kiln.manualSeed(3);
  const a = kiln.randn([512, 768]);
  const b = kiln.randn([768, 384]);
  const want = kiln.matmul(a.to('float64'), b.to('float64')).toFlatArray();
  const got = kiln.matmul(a.to('webgpu'), b.to('webgpu')).to('cpu').toFlatArray();
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
  // |A| @ |B| is about 768 * 0.8 here; f32 accumulation over 768 terms stays far below 1e-2.
  assert.ok(worst < 1e-2, `max |err| ${worst}`);
});

test('kiln.Event on webgpu measures device time (timestamp queries)', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu');
  assert.ok((acc.properties(0).features as readonly string[]).includes('timestamp-query'), "Kiln's Dawn toggles should expose timestamp-query");
  // 512: ample device time on a GPU, and a few seconds, not half a minute, on SwiftShader (CI).
  const a = kiln.randn([512, 512]).to('webgpu');
  kiln.matmul(a, a).dispose(); // compile the pipeline outside the window
  kiln.synchronize('webgpu');
  const start = new kiln.Event('webgpu');
  const end = new kiln.Event('webgpu');
  const host0 = performance.now();
  start.record();
  for (let i = 0; i < 8; i++) kiln.matmul(a, a).dispose();
  end.record();
  end.synchronize();
  const host = performance.now() - host0;
  const ms = start.elapsedTime(end);
  // 8 x 0.27 GFLOP: well above a microsecond, and device time cannot exceed the host's window.
  assert.ok(ms > 0.001 && ms <= host + 0.5, `device ${ms} ms, host window ${host} ms`);
  // Two records with nothing between them: (nearly) no device time.
  const e0 = new kiln.Event('webgpu').record();
  const e1 = new kiln.Event('webgpu').record();
  const idle = e0.elapsedTime(e1);
  assert.ok(idle >= 0 && idle < ms, `empty window ${idle} ms vs ${ms} ms`);
  a.dispose();
});
