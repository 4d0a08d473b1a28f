/**
 * Shared by the cuda tests: whether a CUDA device can be used here (else each test skips with the
 * reason), and comparison of a cuda result against the CPU kernel's result for the same inputs.
 */
import assert from 'node:assert/strict';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { tolFor, type Tolerance } from './helpers/assert.js';

let cached: { ok: boolean; reason: string } | undefined;

/** { ok: true } when a cuda device loads; otherwise the reason, for `test(..., { skip })`. */
export function cudaStatus(): { ok: boolean; reason: string } {
  if (cached) return cached;
  const probe = kiln.probeAccelerators().find((p) => p.type === 'cuda');
  if (!probe?.available) return (cached = { ok: false, reason: `no CUDA device: ${probe?.reason ?? 'cuda not registered'}` });
  try {
    const n = kiln.getAccelerator('cuda').deviceCount();
    cached = n > 0 ? { ok: true, reason: '' } : { ok: false, reason: 'no CUDA device: the driver reports 0 devices' };
  } catch (e) {
    cached = { ok: false, reason: `no CUDA device: ${(e as Error).message}` };
  }
  return cached;
}

/** `false` when cuda is usable, else the skip message (node:test prints it). */
export function skipUnlessCuda(): string | false {
  const s = cudaStatus();
  return s.ok ? false : s.reason;
}

/** Elementwise comparison of a cuda tensor with the CPU reference tensor (same shape and dtype). */
export function assertMatchesCpu(label: string, got: Tensor, want: Tensor, tol: Tolerance = {}): void {
  assert.equal(got.device.type, 'cuda', `${label}: result should live on cuda, got ${got.device.toString()}`);
  assert.deepEqual([...got.shape], [...want.shape], `${label}: shape`);
  assert.equal(got.dtype, want.dtype, `${label}: dtype`);
  const d = tolFor(want.dtype);
  const atol = tol.atol ?? d.atol;
  const rtol = tol.rtol ?? d.rtol;
  const g = got.toFlatArray();
  const w = want.toFlatArray();
  for (let i = 0; i < w.length; i++) {
    const e = w[i]!;
    const a = g[i]!;
    if (Number.isNaN(e)) {
      assert.ok(Number.isNaN(a), `${label}: element ${i}: expected NaN, got ${a}`);
      continue;
    }
    if (!Number.isFinite(e)) {
      assert.equal(a, e, `${label}: element ${i}`);
      continue;
    }
    if (!(Math.abs(a - e) <= atol + rtol * Math.abs(e))) assert.fail(`${label}: element ${i}: cuda ${a}, cpu ${e} (atol ${atol}, rtol ${rtol})`);
  }
}

/** Runs `fn` on CPU inputs and on the same inputs moved to cuda, and compares. */
export function checkOp(label: string, fn: (...xs: Tensor[]) => Tensor, inputs: Tensor[], tol: Tolerance = {}): void {
  const want = fn(...inputs);
  const onCuda = inputs.map((t) => t.to('cuda'));
  const got = fn(...onCuda);
  assertMatchesCpu(label, got, want, tol);
  // A result may be an input itself (contiguous() of a contiguous tensor): never dispose inputs.
  for (const t of [...onCuda, got, want]) if (!inputs.includes(t)) t.dispose();
}
