/**
 * The cuda kernel of llm.qkNormRotary (src/kernels/cuda/llm-qk-norm-rotary.ts): against a float64
 * loop (norm rounded to the dtype, as the unfused ops store it) for every float dtype, neox and
 * gpt-j, head sizes with partly filled lanes, q/k as transposed column slices of a fused qkv;
 * opcheck (kernel vs reference composition); compiled equals eager bit for bit where both run
 * the kernel; and Qwen3 compiled on cuda with the fusion pass against the unfused program and eager.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { CompiledProgram } from '../src/compile/backend.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import { tinyQwen3Config } from '../src/bench/workloads.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';
import { llmOpcheckSamples } from './samples/llm.js';
import { skipUnlessCuda } from './cuda-util.js';
import { refNormRotary } from './helpers/qk-norm-rotary-ref.js';
import { toBf16, toF16 as f16 } from './helpers/rounding-ref.js';
import { withEnv } from './helpers/env.js';

const skip = skipUnlessCuda();

const roundOf = (dtype: DType): ((v: number) => number) => (dtype === 'bfloat16' ? toBf16 : dtype === 'float32' ? Math.fround : (v: number) => v);


/** Max |got - want| / (ulp-scale tolerance): <= 1 passes. */
function worst(got: Tensor, want: readonly number[], dtype: DType): number {
  const g = got.to('cpu').contiguous().toFlatArray();
  assert.equal(g.length, want.length);
  // One rounding of the output plus a possibly different rounding of the normalised value (a tie
  // broken the other way by float32 vs float64 accumulation) times |cos| + |sin| <= ~3 here.
  const rel = dtype === 'bfloat16' ? 2 ** -6 : dtype === 'float16' ? 2 ** -9 : dtype === 'float32' ? 2e-6 : 1e-12;
  let m = 0;
  for (let i = 0; i < g.length; i++) m = Math.max(m, Math.abs(g[i]! - want[i]!) / (rel * (1 + Math.abs(want[i]!))));
  return m;
}

test('cuda llm.qkNormRotary equals the float64 loop: every float dtype, neox and gpt-j, D 8/80/128, transposed slices of a fused qkv', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16', 'float16', 'float64'] as DType[]) {
    for (const isNeox of [true, false]) {
      for (const d of [8, 80, 128]) {
        const T = 5;
        // A fused qkv [1, T, (4 + 2 + 2) * d]: q and k are column slices viewed [1, T, H, d], transposed.
        const qkv = rand([1, T, 8 * d], d + 1, 'contiguous', dtype).to('cuda');
        const q = qkv.narrow(-1, 0, 4 * d).view([1, T, 4, d]).transpose(1, 2);
        const k = qkv.narrow(-1, 4 * d, 2 * d).view([1, T, 2, d]).transpose(1, 2);
        const [qw, kw] = [rand([d], 2, 'contiguous', dtype, 0.5, 1.5).to('cuda'), rand([d], 3, 'contiguous', dtype, 0.5, 1.5).to('cuda')];
        const cos = rand([1, 1, T, d], 4, 'contiguous', dtype, -1, 1).to('cuda');
        const sin = rand([T, d], 5, 'contiguous', dtype, -1, 1).to('cuda');
        const { q: qo, k: ko } = kiln.llm.qkNormRotary(q, k, qw, kw, 1e-6, cos, sin, isNeox);
        assert.deepEqual([...qo.strides], [...kiln.empty([1, T, 4, d]).transpose(1, 2).strides], 'layout of q kept (dense, transposed)');
        const round = dtype === 'float16' ? f16 : roundOf(dtype);
        const label = `${dtype} ${isNeox ? 'neox' : 'gpt-j'} d=${d}`;
        const eq = worst(qo, refNormRotary(q, qw, 1e-6, cos, sin, isNeox, round), dtype);
        const ek = worst(ko, refNormRotary(k, kw, 1e-6, cos, sin, isNeox, round), dtype);
        assert.ok(eq <= 1 && ek <= 1, `${label}: error ${eq}, ${ek} of the tolerance`);
      }
    }
  }
});

test('opcheck llm.qkNormRotary on cuda: the kernel agrees with the reference composition, meta and dynamic T', { skip }, () => {
  assert.equal(kiln.llm.llmChoice('llm.qkNormRotary', 'cuda').name, 'cuda-kernel');
  const report = kiln.llm.opcheck('llm.qkNormRotary', llmOpcheckSamples['llm.qkNormRotary']!, { device: 'cuda' });
  assert.ok(report.implementations.includes('cuda-kernel'));
});

test('compiled llm.qkNormRotary equals eager bit for bit on cuda (the same kernel)', { skip }, () => {
  const q = rand([1, 7, 4, 64], 1, 'contiguous', 'bfloat16').to('cuda').transpose(1, 2);
  const k = rand([1, 7, 2, 64], 2, 'contiguous', 'bfloat16').to('cuda').transpose(1, 2);
  const w = rand([64], 3, 'contiguous', 'bfloat16').to('cuda');
  const cs = rand([7, 64], 4, 'contiguous', 'bfloat16').to('cuda');
  const fn = (a: Tensor, b: Tensor): Tensor[] => {
    const r = kiln.llm.qkNormRotary(a, b, w, w, 1e-6, cs, cs, true);
    return [r.q, r.k];
  };
  const cf = kiln.compile(fn, { mode: 'reduce-overhead' });
  const got = kiln.noGrad(() => cf(q, k));
  const want = fn(q, k);
  for (let i = 0; i < 2; i++) assert.deepEqual(got[i]!.toFlatArray(), want[i]!.toFlatArray());
});

function program(cf: { programs(): { inference: readonly CompiledProgram[] } }): CudaGraphProgram {
  const p = cf.programs().inference.find((x) => x instanceof CudaGraphProgram);
  assert.ok(p instanceof CudaGraphProgram);
  return p;
}

test('Qwen3 on cuda (2 layers, head size 64): the compiled program uses one llm.qkNormRotary per layer and equals the unfused program and eager', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16'] as DType[]) {
    const config = tinyQwen3Config().with({ numHiddenLayers: 2, hiddenSize: 128, numAttentionHeads: 4, numKeyValueHeads: 2, headDim: 64 });
    const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 3, dtype, device: 'cuda' });
    model.eval();
    const ids = kiln.randint(0, config.vocabSize, [1, 9], { dtype: 'int64', generator: new kiln.Generator(4) }).to('cuda');
    const fn = (t: Tensor): Tensor => model.forward(t);
    const want = kiln.noGrad(() => fn(ids)).to('float32').toFlatArray();
    const fused = kiln.compile(fn, { mode: 'reduce-overhead' });
    const unfused = withEnv('KILN_QK_NORM_ROTARY', '0', () => kiln.compile(fn, { mode: 'reduce-overhead' }));
    const a = kiln.noGrad(() => fused(ids)).to('float32').toFlatArray();
    const b = kiln.noGrad(() => unfused(ids)).to('float32').toFlatArray();
    const text = program(fused).describe();
    assert.equal(text.match(/llm\.qkNormRotary/g)?.length ?? 0, 2, `${dtype}: two fused launches in\n${text.slice(0, 400)}`);
    assert.ok(!program(unfused).describe().includes('llm.qkNormRotary'), 'KILN_QK_NORM_ROTARY=0 keeps the unfused program');
    let ab = 0;
    let ae = 0;
    const scale = Math.max(...want.map(Math.abs));
    for (let i = 0; i < a.length; i++) {
      ab = Math.max(ab, Math.abs(a[i]! - b[i]!));
      ae = Math.max(ae, Math.abs(a[i]! - want[i]!));
    }
    // float32: the fused kernel computes what the unfused kernels do, to float32 rounding; bfloat16:
    // a different rounding here and there of bfloat16 values, on the logits' scale.
    const tol = dtype === 'float32' ? 1e-4 : 3e-2 * scale;
    assert.ok(ab <= tol, `${dtype}: max |fused - unfused| ${ab}`);
    assert.ok(ae <= tol, `${dtype}: max |fused - eager| ${ae}`);
    assert.equal(program(fused).stats.captures, 1, `${dtype}: captured as one graph (${program(fused).stats.disabled})`);
  }
});
