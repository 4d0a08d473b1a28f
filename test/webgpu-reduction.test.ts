/**
 * Values of the webgpu reductions against the CPU, eager and compiled: every case of
 * webgpu-reduction-cases.ts (sum, mean, prod, amax, amin, max, min, max/min with a dim, argmax,
 * argmin, softmax, logSoftmax; every dtype; odd sizes, transposed and step-sliced inputs, keepdim,
 * both reduce strategies) run eagerly on webgpu against the same op on the CPU, whose float inputs
 * are widened to float64 first (the reference is computed in float64 and rounded to the result's
 * dtype), and indices exactly (the first index among equals, as torch). Then programs compiled on
 * webgpu (fused pointwise chains, row kernels, a small MLP with softmax) against eager CPU.
 * Needs a real adapter: skips here (Dawn finds none on a machine without a GPU) and on the null
 * backend; scripts/device/webgpu.sh runs it on the GPU machine.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { isFloating } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { tolFor } from './helpers/assert.js';
import { compileCases, mlpInputs, mlpLinear, reductionCases } from './webgpu-reduction-cases.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

/** Element-wise closeness; NaN must match NaN. Returns the first mismatch or null. */
function mismatch(got: Tensor, want: Tensor, atol: number, rtol: number): string | null {
  if (got.shape.join(',') !== want.shape.join(',')) return `shape [${got.shape.join(', ')}], want [${want.shape.join(', ')}]`;
  if (got.dtype !== want.dtype) return `dtype ${got.dtype}, want ${want.dtype}`;
  const g = got.to('cpu').toFlatArray() as number[];
  const w = want.toFlatArray() as number[];
  for (let i = 0; i < w.length; i++) {
    const a = Number(g[i]);
    const b = Number(w[i]);
    if (Number.isNaN(b) ? Number.isNaN(a) : a === b || Math.abs(a - b) <= atol + rtol * Math.abs(b)) continue;
    return `element ${i}: got ${a}, want ${b} (atol ${atol}, rtol ${rtol})`;
  }
  return null;
}

/**
 * The result's tolerance: its dtype's, doubled for halves (one rounding of an f32 result either
 * side); float32 sums of a few thousand normal values are off by about 1e-5 absolute (f32 tree order).
 */
function tolerance(dtype: string): { atol: number; rtol: number } {
  const t = tolFor(dtype);
  if (dtype === 'float32') return { atol: 2e-5, rtol: 1e-5 };
  return { atol: 2 * t.atol, rtol: 2 * t.rtol };
}

test('eager webgpu reductions match the CPU in float64 (all dtypes, odd/strided/transposed, keepdim, both strategies)', { skip }, () => {
  const failures: string[] = [];
  let ran = 0;
  for (const c of reductionCases()) {
    const wide = isFloating(c.dtype) ? c.input.to('float64') : c.input;
    let got: Tensor[];
    let want: Tensor[];
    try {
      got = c.run(c.input.to('webgpu'));
      // The reference: the op in float64, rounded to each result's dtype.
      want = c.run(wide).map((w, k) => w.to(got[k]!.dtype));
    } catch (e) {
      failures.push(`${c.label}: ${(e as Error).message.split('\n')[0]}`);
      continue;
    }
    got.forEach((g, k) => {
      const exact = c.indices?.includes(k) === true || !isFloating(g.dtype);
      const { atol, rtol } = exact ? { atol: 0, rtol: 0 } : tolerance(g.dtype);
      const m = mismatch(g, want[k]!, atol, rtol);
      if (m) failures.push(`${c.label} result ${k}: ${m}`);
    });
    ran++;
  }
  assert.deepEqual(failures, [], `${failures.length} of ${ran} cases differ`);
});

test('programs compiled on webgpu match eager CPU (fused chains with casts, row kernels, MLP with softmax)', { skip }, () => {
  const failures: string[] = [];
  for (const c of compileCases()) {
    const f = kiln.compile(c.fn) as unknown as (...xs: Tensor[]) => unknown;
    const got = [f(...c.inputs.map((t) => t.to('webgpu')))].flat() as Tensor[];
    const want = [(c.reference ?? c.fn)(...c.inputs)].flat();
    got.forEach((g, k) => {
      assert.equal(g.device.type, 'webgpu', c.label);
      const tol = c.tol !== undefined ? { atol: c.tol, rtol: c.tol } : isFloating(g.dtype) ? tolerance(g.dtype) : { atol: 0, rtol: 0 };
      const m = mismatch(g, want[k]!, tol.atol, tol.rtol);
      if (m) failures.push(`${c.label} result ${k}: ${m}`);
    });
  }
  assert.deepEqual(failures, []);
});

test('compiled on webgpu: new sizes of the same ranks reuse the program and stay correct', { skip }, () => {
  const f = kiln.compile((x: Tensor) => kiln.logSoftmax(kiln.mul(x, 0.5), -1), { dynamic: true } as never);
  for (const shape of [[3, 17], [5, 300], [2, 1]]) {
    kiln.manualSeed(shape[1]!);
    const x = kiln.randn(shape);
    const m = mismatch(f(x.to('webgpu')), kiln.logSoftmax(kiln.mul(x, 0.5), -1), 4e-6, 4e-6);
    assert.equal(m, null, `[${shape.join(', ')}]: ${m}`);
  }
});

test('MLP with softmax compiled on webgpu with matmuls (where webgpu has a GEMM) matches eager CPU', { skip }, (t) => {
  const inputs = mlpInputs();
  const onGpu = inputs.map((x) => x.to('webgpu'));
  try {
    kiln.matmul(onGpu[0]!, onGpu[1]!);
  } catch (e) {
    t.skip(`no webgpu matmul kernel yet: ${(e as Error).message.split('\n')[0]}`);
    return;
  }
  const f = kiln.compile(mlpLinear) as unknown as (...xs: Tensor[]) => unknown;
  const m = mismatch(f(...onGpu) as Tensor, mlpLinear(...(inputs as [Tensor, Tensor, Tensor, Tensor, Tensor])), 2e-5, 2e-5);
  assert.equal(m, null, m ?? '');
});
