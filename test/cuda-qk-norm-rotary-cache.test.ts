/**
 * The cuda kernel of llm.qkNormRotaryCache (src/kernels/cuda/llm-qk-norm-rotary.ts, its cache
 * variant): q and the cache rows against a float64 loop and against the two kernels it replaces
 * (llm.qkNormRotary then llm.reshapeAndCache) for every float dtype, neox and gpt-j, partly filled
 * lanes, q/k/v as column slices of a fused qkv, int32 and int64 slots with a padding slot; a slot
 * past the cache is an error at the next sync; opcheck (kernel vs reference composition); and a
 * compiled, graph-captured Qwen3 decode step with KILN_QK_NORM_ROTARY_CACHE=1 against the same
 * step without it (one fused launch per layer, the same logits and caches).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { CompiledProgram } from '../src/compile/backend.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import type { DType } from '../src/tensor/dtype.js';
import { makeTensor, rand } from './helpers/make.js';
import { llmOpcheckSamples } from './samples/llm.js';
import { skipUnlessCuda } from './cuda-util.js';
import { refCacheWrite, refNormRotary } from './helpers/qk-norm-rotary-ref.js';
import { toBf16, toF16 as f16, hostF64, worstRel } from './helpers/rounding-ref.js';
import { withEnv } from './helpers/env.js';
import { DECODE_COMPILE_OPTIONS, decodeArgs, decodePair, maxAbsDiff } from './helpers/decode-pair.js';

const skip = skipUnlessCuda();

const roundOf = (dtype: DType): ((v: number) => number) => (dtype === 'bfloat16' ? toBf16 : dtype === 'float16' ? f16 : dtype === 'float32' ? Math.fround : (v: number) => v);
/** Relative tolerance of one output rounding plus a normalised value rounded the other way (see cuda-qk-norm-rotary.test.ts). */
const relTol = (dtype: DType): number => (dtype === 'bfloat16' ? 2 ** -6 : dtype === 'float16' ? 2 ** -9 : dtype === 'float32' ? 2e-6 : 1e-12);

/** Max |got - want| / tolerance (<= 1 passes). */
const worst = (got: readonly number[], want: readonly number[], dtype: DType): number => worstRel(got, want, relTol(dtype));
const host = hostF64;

test('cuda llm.qkNormRotaryCache equals the float64 loop and the two kernels it replaces: every float dtype, neox and gpt-j, D 8/80/128, slices of a fused qkv, int32/int64 slots', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16', 'float16', 'float64'] as DType[]) {
    for (const isNeox of [true, false]) {
      for (const d of [8, 80, 128]) {
        for (const slotDtype of ['int64', 'int32'] as DType[]) {
          const label = `${dtype} ${isNeox ? 'neox' : 'gpt-j'} d=${d} ${slotDtype}`;
          const [N, H, Hkv, NB, BS] = [4, 4, 2, 5, 3];
          // A fused qkv [N, (H + 2 Hkv) d]: q, k and v are column slices viewed [N, heads, d].
          const qkv = rand([N, (H + 2 * Hkv) * d], d + 1, 'contiguous', dtype).to('cuda');
          const q = qkv.narrow(-1, 0, H * d).view([N, H, d]);
          const k = qkv.narrow(-1, H * d, Hkv * d).view([N, Hkv, d]);
          const v = qkv.narrow(-1, (H + Hkv) * d, Hkv * d).view([N, Hkv, d]);
          const [qw, kw] = [rand([d], 2, 'contiguous', dtype, 0.5, 1.5).to('cuda'), rand([d], 3, 'contiguous', dtype, 0.5, 1.5).to('cuda')];
          const cos = rand([N, 1, d], 4, 'contiguous', dtype, -1, 1).to('cuda');
          const sin = rand([N, 1, d], 5, 'contiguous', dtype, -1, 1).to('cuda');
          // Token 1 is a padding row; the caches start random, so an unwritten slot keeps its values.
          const slotList = [13, -1, 0, 7];
          const slots = makeTensor(slotList, [N], slotDtype).to('cuda');
          const kc0 = rand([NB, BS, Hkv, d], 6, 'contiguous', dtype);
          const vc0 = rand([NB, BS, Hkv, d], 7, 'contiguous', dtype);
          const [kc, vc, kcU, vcU] = [kc0, vc0, kc0, vc0].map((t) => t.to('cuda'));
          const r = kiln.llm.qkNormRotaryCache(q, k, v, qw, kw, 1e-6, cos, sin, isNeox, kc!, vc!, slots);
          assert.equal(r.keyCache, kc, `${label}: the cache is written in place`);
          // The two kernels it replaces, on copies of the caches.
          const u = kiln.llm.qkNormRotary(q, k, qw, kw, 1e-6, cos, sin, isNeox);
          kiln.llm.reshapeAndCache(u.k, v, kcU!, vcU!, slots);

          const round = roundOf(dtype);
          const gq = host(r.q);
          assert.ok(worst(gq, refNormRotary(q, qw, 1e-6, cos, sin, isNeox, round), dtype) <= 1, `${label}: q vs float64`);
          const kr = refNormRotary(k, kw, 1e-6, cos, sin, isNeox, round);
          const { keys: wantK, values: wantV } = refCacheWrite(host(kc0), host(vc0), kr, host(v), slotList, Hkv * d);
          const gk = host(kc!);
          assert.ok(Math.max(...gq.map(Math.abs)) > 1e-2, `${label}: a real result (not all zeros)`);
          const gv = host(vc!);
          assert.ok(worst(gk, wantK, dtype) <= 1, `${label}: key cache vs float64`);
          assert.deepEqual(gv, wantV, `${label}: value cache (copied rows, others untouched)`);
          // Against the unfused kernels: the same arithmetic, so equal (a contraction into FMA
          // chosen differently would show as a last-place difference, within the tolerance).
          assert.deepEqual(gv, host(vcU!), `${label}: value cache equals reshapeAndCache's`);
          assert.ok(worst(gk, host(kcU!), dtype) <= 1 && worst(gq, host(u.q), dtype) <= 1, `${label}: fused vs unfused kernels`);
        }
      }
    }
  }
});

test('cuda llm.qkNormRotaryCache: a slot past the cache is an error at the next sync, naming the op', { skip }, () => {
  const [q, k, v] = [rand([2, 2, 8], 1).to('cuda'), rand([2, 1, 8], 2).to('cuda'), rand([2, 1, 8], 3).to('cuda')];
  const w = rand([8], 4).to('cuda');
  const cs = rand([2, 1, 8], 5).to('cuda');
  const kc = kiln.zeros([2, 2, 1, 8], { device: 'cuda' });
  const vc = kiln.zeros([2, 2, 1, 8], { device: 'cuda' });
  assert.throws(() => {
    kiln.llm.qkNormRotaryCache(q, k, v, w, w, 1e-6, cs, cs, true, kc, vc, makeTensor([1, 9], [2], 'int64').to('cuda'));
    kiln.synchronize('cuda');
  }, /llm\.qkNormRotaryCache: index 9 is out of range for the cache's slots of size 4/);
  assert.notDeepEqual(vc.toFlatArray().slice(8, 16), new Array(8).fill(0), 'the good token (slot 1) is written');
});

test('opcheck llm.qkNormRotaryCache on cuda: the kernel agrees with the reference composition', { skip }, () => {
  assert.equal(kiln.llm.llmChoice('llm.qkNormRotaryCache', 'cuda').name, 'cuda-kernel');
  const report = kiln.llm.opcheck('llm.qkNormRotaryCache', llmOpcheckSamples['llm.qkNormRotaryCache']!, { device: 'cuda' });
  assert.ok(report.implementations.includes('cuda-kernel'));
});

function program(cf: { programs(): { inference: readonly CompiledProgram[] } }): CudaGraphProgram {
  const p = cf.programs().inference.find((x) => x instanceof CudaGraphProgram);
  assert.ok(p instanceof CudaGraphProgram);
  return p;
}

test('a compiled Qwen3 decode step on cuda with KILN_QK_NORM_ROTARY_CACHE=1: one llm.qkNormRotaryCache per layer, captured, logits and caches equal the step without it', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16'] as DType[]) {
    const { caches, step } = decodePair('cuda', dtype, 'random');
    const fused = withEnv('KILN_QK_NORM_ROTARY_CACHE', '1', () => kiln.compile(step(caches[0]), DECODE_COMPILE_OPTIONS));
    const plain = withEnv('KILN_QK_NORM_ROTARY_CACHE', '0', () => kiln.compile(step(caches[1]), DECODE_COMPILE_OPTIONS));
    // Two rows and a padding row (slot -1, length 0); three steps, so the graph replays.
    for (let s = 0; s < 3; s++) {
      const args = decodeArgs(s, 3, 'cuda');
      const a = kiln.noGrad(() => fused(...args)).to('float32').toFlatArray();
      const b = kiln.noGrad(() => plain(...args)).to('float32').toFlatArray();
      const m = maxAbsDiff(a, b);
      const scale = Math.max(...b.map(Math.abs));
      assert.ok(m <= (dtype === 'float32' ? 1e-5 : 1e-2) * scale, `${dtype} step ${s}: max |fused - unfused| ${m} (logits up to ${scale})`);
    }
    for (const kind of ['keys', 'values'] as const) {
      for (let l = 0; l < 2; l++) {
        const x = caches[0]![kind][l]!.to('float32').toFlatArray();
        const y = caches[1]![kind][l]!.to('float32').toFlatArray();
        const m = maxAbsDiff(x, y);
        assert.ok(m <= (dtype === 'float32' ? 1e-5 : 2e-2), `${dtype} ${kind}[${l}]: max |fused - unfused| ${m}`);
      }
    }
    const text = program(fused).describe();
    assert.equal(text.match(/llm\.qkNormRotaryCache/g)?.length ?? 0, 2, `${dtype}: two fused launches in\n${text.slice(0, 600)}`);
    assert.ok(!text.includes('llm.reshapeAndCache'), `${dtype}: no separate cache write`);
    assert.ok(!program(plain).describe().includes('llm.qkNormRotaryCache'), 'KILN_QK_NORM_ROTARY_CACHE=0 keeps the unfused program');
    const [fs, ps] = [program(fused).stats, program(plain).stats];
    assert.ok(fs.captures >= 1 && fs.disabled === null, `${dtype}: captured (${fs.disabled})`);
    // One kernel node fewer per layer (the cache write); nothing else changes.
    assert.equal(fs.lastNodeCount, ps.lastNodeCount - 2, `${dtype}: graph nodes ${fs.lastNodeCount} fused, ${ps.lastNodeCount} unfused`);
  }
});
