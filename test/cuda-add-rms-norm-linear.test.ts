/**
 * The cuda kernel of llm.addRmsNormLinear (src/kernels/cuda/llm-add-rms-norm-linear.ts: the bf16
 * GEMV's norm-prologue variant in gemv.ts): against a float64 loop (the normalised row rounded to
 * bfloat16 before the linear, as the norm kernel stores it) for 1..8 rows, widths that pick each
 * split of K over warps, residual or none, bias or none, plain and gated; the residual output bit
 * for bit; the fallback (float32, too many rows) equal to its parts; opcheck; a compiled
 * add -> rmsNorm -> linear with KILN_ADD_RMSNORM_LINEAR=1 against the same compiled without it
 * (the generated reduce kernel: h bit for bit, the product within rounding); and a compiled,
 * graph-captured bf16 Qwen3 decode step at batch 1 with the option against without (five graph
 * nodes fewer: every layer norm runs in a GEMV's prologue).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { CompiledProgram } from '../src/compile/backend.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import { gemvStats } from '../src/kernels/cuda/gemv.js';
import { setOption } from '../src/runtime/config.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';
import { refAddRmsNormLinear } from './helpers/add-rms-norm-linear-ref.js';
import { llmOpcheckSamples } from './samples/llm.js';
import { skipUnlessCuda } from './cuda-util.js';
import { toBf16, hostF64, worstRel } from './helpers/rounding-ref.js';
import { withEnv } from './helpers/env.js';
import { DECODE_COMPILE_OPTIONS, decodeArgs, decodePair, maxAbsDiff } from './helpers/decode-pair.js';

const skip = skipUnlessCuda();

const host = hostF64;

/** Max |got - want| / (2^-7 (1 + |want|)): the output's bfloat16 rounding plus float32-sum order (<= 1 passes). */
const worst = (got: readonly number[], want: readonly number[]): number => worstRel(got, want, 2 ** -7);

test('cuda llm.addRmsNormLinear (norm-prologue GEMV) equals the float64 loop: rows 1..8, every K split, residual / bias or none, plain and gated', { skip }, () => {
  setOption('KILN_GEMV_MAX_ROWS', 8);
  try {
    // [output width, K]: Qwen3-0.6B's qkv (4096) and gate/up (I = 3072) at K = 1024, then narrower
    // outputs (wider splits of K over warps) and a small K.
    const shapes: Record<string, [number, number][]> = { plain: [[4096, 1024], [1024, 1024], [300, 512], [16, 64]], gated: [[3072, 1024], [256, 512], [16, 64]] };
    for (const gated of [false, true]) {
      for (const [n, k] of shapes[gated ? 'gated' : 'plain']!) {
        for (const m of [1, 3, 8]) {
          for (const [withRes, withBias] of [[true, false], [false, true], [true, true]] as const) {
            const label = `gated ${gated} N=${n} K=${k} M=${m} residual ${withRes} bias ${withBias}`;
            const seed = n + k + m;
            const x = rand([m, k], seed, 'contiguous', 'bfloat16', -2, 2).to('cuda');
            const r = withRes ? rand([m, k], seed + 1, 'contiguous', 'bfloat16', -2, 2).to('cuda') : null;
            const g = rand([k], seed + 2, 'contiguous', 'bfloat16', 0.5, 1.5).to('cuda');
            const rows = gated ? 2 * n : n;
            const w = rand([rows, k], seed + 3, 'contiguous', 'bfloat16', -0.1, 0.1).to('cuda');
            const b = withBias ? rand([rows], seed + 4, 'contiguous', 'bfloat16', -0.5, 0.5).to('cuda') : null;
            const before = gemvStats.runs;
            const got = kiln.llm.addRmsNormLinear(x, r, g, 1e-6, w, b, gated);
            assert.equal(gemvStats.runs, before + 1, `${label}: one GEMV launch`);
            const want = refAddRmsNormLinear(x, r, g, 1e-6, w, b, gated, toBf16);
            const o = host(got.out);
            assert.ok(Math.max(...o.map(Math.abs)) > 1e-2, `${label}: a real result (not all zeros)`);
            assert.ok(worst(o, want.out) <= 1, `${label}: vs float64 ${worst(o, want.out)}`);
            assert.deepEqual(host(got.residual), want.h, `${label}: residual = bf16(x + r) exactly`);
          }
        }
      }
    }
  } finally {
    setOption('KILN_GEMV_MAX_ROWS', undefined);
  }
});

test('cuda llm.addRmsNormLinear falls back to its parts where the GEMV does not apply (float32; 4 rows over KILN_GEMV_MAX_ROWS=1)', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16'] as DType[]) {
    for (const gated of [false, true]) {
      const x = rand([4, 64], 1, 'contiguous', dtype, -1, 1).to('cuda');
      const r = rand([4, 64], 2, 'contiguous', dtype, -1, 1).to('cuda');
      const g = rand([64], 3, 'contiguous', dtype, 0.5, 1.5).to('cuda');
      const w = rand([32, 64], 4, 'contiguous', dtype, -0.2, 0.2).to('cuda');
      const before = gemvStats.runs;
      const got = kiln.llm.addRmsNormLinear(x, r, g, 1e-6, w, null, gated);
      assert.equal(gemvStats.runs, before, `${dtype} gated ${gated}: no GEMV`);
      const h = kiln.add(x, r);
      const lin = kiln.linear(kiln.rmsNorm(h, [64], g, 1e-6), w);
      assert.deepEqual(host(got.out), host(gated ? kiln.llm.siluAndMul(lin) : lin), `${dtype} gated ${gated}: the parts exactly`);
      assert.deepEqual(host(got.residual), host(h), `${dtype}: residual`);
    }
  }
});

test('opcheck llm.addRmsNormLinear on cuda: the kernel agrees with the reference composition', { skip }, () => {
  assert.equal(kiln.llm.llmChoice('llm.addRmsNormLinear', 'cuda').name, 'cuda-kernel');
  const report = kiln.llm.opcheck('llm.addRmsNormLinear', llmOpcheckSamples['llm.addRmsNormLinear']!, { device: 'cuda' });
  assert.ok(report.implementations.includes('cuda-kernel'));
});

test('compiled add -> rmsNorm -> linear (bf16, one row, Qwen3 sizes) with KILN_ADD_RMSNORM_LINEAR=1 equals the generated norm kernel + GEMV: residual bit for bit, the product within rounding', { skip }, () => {
  const [k, n] = [1024, 4096];
  const g = rand([k], 3, 'contiguous', 'bfloat16', 0.5, 1.5).to('cuda');
  const w = rand([n, k], 4, 'contiguous', 'bfloat16', -0.1, 0.1).to('cuda');
  const fn = (x: Tensor, r: Tensor): Tensor[] => {
    const s = kiln.add(x, r);
    return [kiln.linear(kiln.rmsNorm(s, [k], g, 1e-6), w), kiln.mul(s, 2)];
  };
  const opts = { dynamic: false, capturedTensors: 'allow' } as const;
  const fused = withEnv('KILN_ADD_RMSNORM_LINEAR', '1', () => kiln.compile(fn, opts));
  const plain = withEnv('KILN_ADD_RMSNORM_LINEAR', '0', () => kiln.compile(fn, opts));
  for (let s = 0; s < 3; s++) {
    const x = rand([1, k], 10 + s, 'contiguous', 'bfloat16', -3, 3).to('cuda');
    const r = rand([1, k], 20 + s, 'contiguous', 'bfloat16', -3, 3).to('cuda');
    const [fo, fh] = kiln.noGrad(() => fused(x, r));
    const [po, ph] = kiln.noGrad(() => plain(x, r));
    assert.deepEqual(host(fh!), host(ph!), `call ${s}: the residual stream bit for bit`);
    const [a, b] = [host(fo!), host(po!)];
    assert.ok(Math.max(...b.map(Math.abs)) > 0.1, 'real products');
    // The sum of squares is added in another order: rstd may move by an ulp, a normalised element
    // by one bfloat16 step here and there, and an output by one bfloat16 step.
    assert.ok(worst(a, b) <= 1, `call ${s}: fused vs unfused ${worst(a, b)}`);
  }
  const text = fused.programs().inference.map((p) => p.describe()).join('\n');
  assert.match(text, /extern llm\.addRmsNormLinear/, 'the fused program calls the op');
  assert.doesNotMatch(text, /_reduce/, 'and has no norm kernel left');
});

function program(cf: { programs(): { inference: readonly CompiledProgram[] } }): CudaGraphProgram {
  const p = cf.programs().inference.find((x) => x instanceof CudaGraphProgram);
  assert.ok(p instanceof CudaGraphProgram);
  return p;
}

test('a compiled bf16 Qwen3 decode step at batch 1 on cuda with KILN_ADD_RMSNORM_LINEAR=1: every layer norm in a GEMV prologue, five graph nodes fewer, logits equal the step without it', { skip }, () => {
  const { caches, step } = decodePair('cuda', 'bfloat16', 'zeros', 384);
  const fused = withEnv('KILN_ADD_RMSNORM_LINEAR', '1', () => kiln.compile(step(caches[0]), DECODE_COMPILE_OPTIONS));
  const plain = withEnv('KILN_ADD_RMSNORM_LINEAR', '0', () => kiln.compile(step(caches[1]), DECODE_COMPILE_OPTIONS));
  for (let s = 0; s < 3; s++) {
    const args = decodeArgs(s, 1, 'cuda');
    const a = kiln.noGrad(() => fused(...args)).to('float32').toFlatArray();
    const b = kiln.noGrad(() => plain(...args)).to('float32').toFlatArray();
    const d = maxAbsDiff(a, b);
    const scale = Math.max(...b.map(Math.abs));
    assert.ok(scale > 0, 'real logits');
    assert.ok(d <= 2e-2 * scale, `step ${s}: max |fused - unfused| ${d} (logits up to ${scale})`);
  }
  const text = program(fused).describe();
  // Layer 0's input norm (no add) -> qkv, then add + norm -> gate/up, qkv, gate/up, and the final norm -> lm_head.
  assert.equal(text.match(/llm\.addRmsNormLinear/g)?.length ?? 0, 5, `five fused launches in\n${text.slice(0, 600)}`);
  const [fs, ps] = [program(fused).stats, program(plain).stats];
  assert.ok(fs.captures >= 1 && fs.disabled === null, `captured (${fs.disabled})`);
  assert.equal(fs.lastNodeCount, ps.lastNodeCount - 5, `graph nodes ${fs.lastNodeCount} fused, ${ps.lastNodeCount} unfused`);
});

test('KILN_ADD_RMSNORM_LINEAR unset (the default): a compiled bf16 decode step on cuda keeps its norm kernels (the prologue pass fires on webgpu only)', { skip }, () => {
  const { caches, step } = decodePair('cuda', 'bfloat16', 'zeros', 384);
  const byDefault = withEnv('KILN_ADD_RMSNORM_LINEAR', undefined, () => kiln.compile(step(caches[0]), DECODE_COMPILE_OPTIONS));
  kiln.noGrad(() => byDefault(...decodeArgs(0, 1, 'cuda')));
  const text = byDefault.programs().inference.map((p) => p.describe()).join('\n');
  assert.doesNotMatch(text, /llm\.addRmsNormLinear/, 'no add + RMSNorm GEMV on cuda by default');
  assert.match(text, /_reduce/, 'the norm kernels stay');
});
