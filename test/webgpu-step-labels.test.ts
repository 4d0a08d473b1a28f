/**
 * The per-step hook of compiled webgpu programs (WgslProgram.onStep, what bench/webgpu-profile.ts
 * records a timestamp event at) and the labels compile/codegen/step-runner.ts gives steps: every
 * step of a call is reported once, in order, a kernel with its ops and output shape, an extern with
 * its op, its tensor inputs' shapes and its output's. Needs a real adapter (SwiftShader in CI).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { WgslProgram } from '../src/compile/codegen/wgsl/program.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

test('webgpu onStep reports every step once with its label (ops or extern op, with shapes)', { skip }, () => {
  const x = kiln.randn([4, 5]).to('webgpu');
  const w = kiln.randn([6, 5]).to('webgpu');
  const cf = kiln.compile((a: Tensor, b: Tensor) => kiln.relu(kiln.add(kiln.nn.functional.linear(a, b), 0.5)).sum(-1));
  const first = cf(x, w);
  const program = cf.programs().inference[0];
  assert.ok(program instanceof WgslProgram, `a plain webgpu program (got ${program?.constructor.name})`);
  const seen: { i: number; label: string }[] = [];
  program.onStep = (i, label) => seen.push({ i, label });
  const again = cf(x, w);
  program.onStep = undefined;
  cf(x, w);
  assert.deepEqual(again.toFlatArray(), first.toFlatArray());
  assert.deepEqual(seen.map((s) => s.i), seen.map((_, k) => k), 'steps in order, each once');
  assert.equal(seen.length, program.stats.kernels + program.stats.externs + program.stats.views);
  assert.ok(seen.some((s) => s.label === 'extern linear [4, 5] [6, 5] -> [4, 6]'), seen.map((s) => s.label).join('; '));
  assert.ok(seen.some((s) => /^reduce .*sum.* \[4\]$/.test(s.label)), seen.map((s) => s.label).join('; '));
});
