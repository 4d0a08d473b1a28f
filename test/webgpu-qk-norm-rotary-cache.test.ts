/**
 * The webgpu kernel of llm.qkNormRotaryCache (kernels/webgpu/llm-rotary.ts, its cache mode): q and
 * the cache rows against a float64 loop and against the two kernels it replaces (llm.qkNormRotary
 * then llm.reshapeAndCache), in one dispatch, for float32 / float16 / bfloat16, neox and gpt-j,
 * head dims 8 / 80 / 128, q/k/v as column slices of a fused qkv, int32 and int64 slots with a
 * padding slot (-1) and one past the cache (skipped: a WebGPU kernel cannot raise; the cpu and cuda
 * kernels do). On webgpu the op is what kiln.compile's KILN_QK_NORM_ROTARY_CACHE pass maps a decode
 * layer's qkNormRotary + reshapeAndCache onto: a compiled tiny Qwen3 decode step with it (and
 * KILN_LINEAR_SILU_MUL, the gated GEMV) against the step without, logits, caches and dispatches.
 * Needs an adapter that computes (SwiftShader here).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../src/tensor/dtype.js';
import { makeTensor, rand } from './helpers/make.js';
import { refCacheWrite, refNormRotary } from './helpers/qk-norm-rotary-ref.js';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { toBf16, toF16 as f16, hostF64, worstRel } from './helpers/rounding-ref.js';
import { withEnv } from './helpers/env.js';
import { DECODE_COMPILE_OPTIONS, decodeArgs, decodePair, maxAbsDiff } from './helpers/decode-pair.js';

const skip = webgpuSkipReason();

const roundOf = (dtype: DType): ((v: number) => number) => (dtype === 'bfloat16' ? toBf16 : dtype === 'float16' ? f16 : Math.fround);
const relTol = (dtype: DType): number => (dtype === 'bfloat16' ? 2 ** -6 : dtype === 'float16' ? 2 ** -9 : 2e-6);

const worst = (got: readonly number[], want: readonly number[], dtype: DType): number => worstRel(got, want, relTol(dtype));
const host = hostF64;

test('webgpu llm.qkNormRotaryCache equals the float64 loop and the two kernels it replaces, in one dispatch', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  for (const dtype of ['float32', 'bfloat16', 'float16'] as DType[]) {
    for (const isNeox of [true, false]) {
      for (const d of [8, 80, 128]) {
        for (const slotDtype of ['int64', 'int32'] as DType[]) {
          const label = `${dtype} ${isNeox ? 'neox' : 'gpt-j'} d=${d} ${slotDtype}`;
          const [N, H, Hkv, NB, BS] = [5, 4, 2, 5, 3];
          const qkv = rand([N, (H + 2 * Hkv) * d], d + 1, 'contiguous', dtype).to('webgpu');
          const q = qkv.narrow(-1, 0, H * d).view([N, H, d]);
          const k = qkv.narrow(-1, H * d, Hkv * d).view([N, Hkv, d]);
          const v = qkv.narrow(-1, (H + Hkv) * d, Hkv * d).view([N, Hkv, d]);
          const [qw, kw] = [rand([d], 2, 'contiguous', dtype, 0.5, 1.5).to('webgpu'), rand([d], 3, 'contiguous', dtype, 0.5, 1.5).to('webgpu')];
          const cos = rand([N, 1, d], 4, 'contiguous', dtype, -1, 1).to('webgpu');
          const sin = rand([N, 1, d], 5, 'contiguous', dtype, -1, 1).to('webgpu');
          // Token 1 pads (-1), token 4's slot is past the cache (15 slots): both skipped.
          const slotList = [13, -1, 0, 7, 15];
          const slots = makeTensor(slotList, [N], slotDtype).to('webgpu');
          const kc0 = rand([NB, BS, Hkv, d], 6, 'contiguous', dtype);
          const vc0 = rand([NB, BS, Hkv, d], 7, 'contiguous', dtype);
          const [kc, vc, kcU, vcU] = [kc0, vc0, kc0, vc0].map((t) => t.to('webgpu'));
          const d0 = acc.dispatchCount;
          const r = kiln.llm.qkNormRotaryCache(q, k, v, qw, kw, 1e-6, cos, sin, isNeox, kc!, vc!, slots);
          assert.equal(acc.dispatchCount - d0, 1, `${label}: one dispatch`);
          assert.equal(r.keyCache, kc, `${label}: the cache is written in place`);
          const u = kiln.llm.qkNormRotary(q, k, qw, kw, 1e-6, cos, sin, isNeox);
          kiln.llm.reshapeAndCache(u.k, v, kcU!, vcU!, slots);

          const round = roundOf(dtype);
          const gq = host(r.q);
          assert.ok(worst(gq, refNormRotary(q, qw, 1e-6, cos, sin, isNeox, round), dtype) <= 1, `${label}: q vs float64`);
          const kr = refNormRotary(k, kw, 1e-6, cos, sin, isNeox, round);
          const { keys: wantK, values: wantV } = refCacheWrite(host(kc0), host(vc0), kr, host(v), slotList, Hkv * d);
          const gk = host(kc!);
          const gv = host(vc!);
          assert.ok(Math.max(...gq.map(Math.abs)) > 1e-2, `${label}: a real result (not all zeros)`);
          assert.ok(worst(gk, wantK, dtype) <= 1, `${label}: key cache vs float64`);
          assert.deepEqual(gv, wantV, `${label}: value cache (copied rows, others untouched)`);
          assert.deepEqual(gv, host(vcU!), `${label}: value cache equals reshapeAndCache's`);
          assert.ok(worst(gk, host(kcU!), dtype) <= 1 && worst(gq, host(u.q), dtype) <= 1, `${label}: fused vs unfused kernels`);
        }
      }
    }
  }
});

test('a compiled Qwen3 decode step on webgpu with KILN_QK_NORM_ROTARY_CACHE=1 and KILN_LINEAR_SILU_MUL=1: fused ops in the program, logits and caches equal the step without them', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  // The fused rotary + cache kernel binds nine buffers: below that it runs the two ops.
  const fusedKernel = (acc.bridge.adapter.limits.maxStorageBuffersPerShaderStage ?? 8) > 9;
  for (const dtype of ['float32', 'float16'] as DType[]) {
    const { caches, step } = decodePair('webgpu', dtype, 'random');
    const fused = withEnv('KILN_QK_NORM_ROTARY_CACHE', '1', () => withEnv('KILN_LINEAR_SILU_MUL', '1', () => kiln.compile(step(caches[0]), DECODE_COMPILE_OPTIONS)));
    const plain = withEnv('KILN_QK_NORM_ROTARY_CACHE', '0', () => withEnv('KILN_LINEAR_SILU_MUL', '0', () => kiln.compile(step(caches[1]), DECODE_COMPILE_OPTIONS)));
    const dispatches: number[][] = [[], []];
    // Two rows and a padding row (slot -1, length 0); three steps, so the recording replays.
    for (let s = 0; s < 3; s++) {
      const args = decodeArgs(s, 3, 'webgpu');
      let d0 = acc.dispatchCount;
      const a = kiln.noGrad(() => fused(...args)).to('cpu').to('float32').toFlatArray() as number[];
      dispatches[0]!.push(acc.dispatchCount - d0);
      d0 = acc.dispatchCount;
      const b = kiln.noGrad(() => plain(...args)).to('cpu').to('float32').toFlatArray() as number[];
      dispatches[1]!.push(acc.dispatchCount - d0);
      const m = maxAbsDiff(a, b);
      const scale = Math.max(...b.map(Math.abs));
      assert.ok(m <= (dtype === 'float32' ? 1e-5 : 1e-2) * scale, `${dtype} step ${s}: max |fused - unfused| ${m} (logits up to ${scale})`);
    }
    for (const kind of ['keys', 'values'] as const) {
      for (let l = 0; l < 2; l++) {
        const x = caches[0]![kind][l]!.to('cpu').to('float32').toFlatArray() as number[];
        const y = caches[1]![kind][l]!.to('cpu').to('float32').toFlatArray() as number[];
        const m = maxAbsDiff(x, y);
        assert.ok(m <= (dtype === 'float32' ? 1e-5 : 2e-2), `${dtype} ${kind}[${l}]: max |fused - unfused| ${m}`);
      }
    }
    // Per layer: the silu * mul pointwise kernel and (with the fused kernel) the cache write go.
    const saved = 2 * (1 + (fusedKernel ? 1 : 0));
    assert.equal(dispatches[1]![2]! - dispatches[0]![2]!, saved, `${dtype}: dispatches per replayed step fused ${dispatches[0]!.join(',')}, unfused ${dispatches[1]!.join(',')}`);
  }
});
