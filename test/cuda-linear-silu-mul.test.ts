/**
 * The cuda kernel of llm.linearSiluAndMul (src/kernels/cuda/llm-linear-silu-mul.ts: the bf16
 * GEMV's gated variant in gemv.ts): against a float64 loop (the projection rounded to bfloat16, as
 * the linear stores it) for 1..8 rows, widths that pick each split of K over warps, with and
 * without bias; against the two ops it replaces; the fallback (float32, too many rows) equal to
 * linear + siluAndMul; opcheck; and a compiled, graph-captured Qwen3 decode step at batch 1 with
 * KILN_LINEAR_SILU_MUL=1 against the same step without it (one graph node fewer per layer).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { CompiledProgram } from '../src/compile/backend.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import { gemvStats } from '../src/kernels/cuda/gemv.js';
import { setOption } from '../src/runtime/config.js';
import type { DType } from '../src/tensor/dtype.js';
import { rand } from './helpers/make.js';
import { refLinearSiluMul } from './helpers/linear-silu-mul-ref.js';
import { llmOpcheckSamples } from './samples/llm.js';
import { skipUnlessCuda } from './cuda-util.js';
import { toBf16, hostF64, worstRel } from './helpers/rounding-ref.js';
import { withEnv } from './helpers/env.js';
import { DECODE_COMPILE_OPTIONS, decodeArgs, decodePair, maxAbsDiff } from './helpers/decode-pair.js';

const skip = skipUnlessCuda();

const host = hostF64;

/** Max |got - want| / (2^-7 (1 + |want|)): the output's bfloat16 rounding plus float32-sum order (<= 1 passes). */
const worst = (got: readonly number[], want: readonly number[]): number => worstRel(got, want, 2 ** -7);

test('cuda llm.linearSiluAndMul (gated GEMV) equals the float64 loop and linear + silu * mul: rows 1..8, every K split, bias or none', { skip }, () => {
  setOption('KILN_GEMV_MAX_ROWS', 8);
  try {
    // I = 3072 (Qwen3-0.6B: 2I = 6144 rows, one warp per row), 256, 64, 16 (wider splits of K).
    for (const [half, k] of [[3072, 1024], [256, 512], [64, 1024], [16, 64]] as const) {
      for (const m of [1, 3, 8]) {
        for (const withBias of [false, true]) {
          const label = `I=${half} K=${k} M=${m} bias ${withBias}`;
          const x = rand([m, k], half + m, 'contiguous', 'bfloat16', -1, 1).to('cuda');
          const w = rand([2 * half, k], 2, 'contiguous', 'bfloat16', -0.1, 0.1).to('cuda');
          const b = withBias ? rand([2 * half], 3, 'contiguous', 'bfloat16', -0.5, 0.5).to('cuda') : null;
          const before = gemvStats.runs;
          const got = kiln.llm.linearSiluAndMul(x, w, b);
          assert.equal(gemvStats.runs, before + 1, `${label}: the gated GEMV ran`);
          const g = host(got);
          assert.ok(Math.max(...g.map(Math.abs)) > 1e-2, `${label}: a real result (not all zeros)`);
          assert.ok(worst(g, refLinearSiluMul(x, w, b, toBf16)) <= 1, `${label}: vs float64 ${worst(g, refLinearSiluMul(x, w, b, toBf16))}`);
          // The two ops (the GEMV's linear, the generated silu * mul) round the same way: equal up to
          // an exp/rcp approximation that differs in the last bit here and there.
          const y = kiln.linear(x, w, b);
          const unfused = host(kiln.mul(kiln.silu(kiln.narrow(y, -1, 0, half)), kiln.narrow(y, -1, half, half)));
          assert.ok(worst(g, unfused) <= 1, `${label}: vs unfused ${worst(g, unfused)}`);
        }
      }
    }
  } finally {
    setOption('KILN_GEMV_MAX_ROWS', undefined);
  }
});

test('cuda llm.linearSiluAndMul falls back to linear + siluAndMul where the GEMV does not apply (float32; 4 rows over KILN_GEMV_MAX_ROWS=1)', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16'] as DType[]) {
    const x = rand([4, 64], 1, 'contiguous', dtype, -1, 1).to('cuda');
    const w = rand([32, 64], 2, 'contiguous', dtype, -0.2, 0.2).to('cuda');
    const got = host(kiln.llm.linearSiluAndMul(x, w));
    const want = host(kiln.llm.siluAndMul(kiln.linear(x, w)));
    assert.deepEqual(got, want, `${dtype}: the two ops exactly`);
  }
});

test('opcheck llm.linearSiluAndMul on cuda: the kernel agrees with the reference composition', { skip }, () => {
  assert.equal(kiln.llm.llmChoice('llm.linearSiluAndMul', 'cuda').name, 'cuda-kernel');
  const report = kiln.llm.opcheck('llm.linearSiluAndMul', llmOpcheckSamples['llm.linearSiluAndMul']!, { device: 'cuda' });
  assert.ok(report.implementations.includes('cuda-kernel'));
});

function program(cf: { programs(): { inference: readonly CompiledProgram[] } }): CudaGraphProgram {
  const p = cf.programs().inference.find((x) => x instanceof CudaGraphProgram);
  assert.ok(p instanceof CudaGraphProgram);
  return p;
}

test('a compiled bf16 Qwen3 decode step at batch 1 on cuda with KILN_LINEAR_SILU_MUL=1: one llm.linearSiluAndMul per layer, one node fewer per layer, logits equal the step without it', { skip }, () => {
  const { caches, step } = decodePair('cuda', 'bfloat16', 'zeros', 384);
  const fused = withEnv('KILN_LINEAR_SILU_MUL', '1', () => kiln.compile(step(caches[0]), DECODE_COMPILE_OPTIONS));
  const plain = withEnv('KILN_LINEAR_SILU_MUL', '0', () => kiln.compile(step(caches[1]), DECODE_COMPILE_OPTIONS));
  for (let s = 0; s < 3; s++) {
    const args = decodeArgs(s, 1, 'cuda');
    const a = kiln.noGrad(() => fused(...args)).to('float32').toFlatArray();
    const b = kiln.noGrad(() => plain(...args)).to('float32').toFlatArray();
    const d = maxAbsDiff(a, b);
    const scale = Math.max(...b.map(Math.abs));
    assert.ok(d <= 2e-2 * scale, `step ${s}: max |fused - unfused| ${d} (logits up to ${scale})`);
  }
  const text = program(fused).describe();
  assert.equal(text.match(/llm\.linearSiluAndMul/g)?.length ?? 0, 2, `two fused launches in\n${text.slice(0, 600)}`);
  const [fs, ps] = [program(fused).stats, program(plain).stats];
  assert.ok(fs.captures >= 1 && fs.disabled === null, `captured (${fs.disabled})`);
  assert.equal(fs.lastNodeCount, ps.lastNodeCount - 2, `graph nodes ${fs.lastNodeCount} fused, ${ps.lastNodeCount} unfused`);
});
