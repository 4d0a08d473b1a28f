/**
 * KILN_CUDA_REPLAY_SKIP (compile/codegen/cuda/program.ts), the measurement-only option that leaves
 * classes of steps out of a compiled cuda program: on cuda (skipped without a device), a compiled
 * function gives the eager result without the option and with a name that matches no step, and
 * with an extern or a fused kernel named in it that step's output is no longer computed, so the
 * result differs from eager. Each run takes a fresh input: a skipped step's buffer may still hold
 * an earlier run's values, which for the same input would be the right ones.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

test('KILN_CUDA_REPLAY_SKIP leaves the named steps out of a compiled cuda program, and only those', { skip }, () => {
  const w = kiln.randn([64, 64]).to('cuda');
  const fn = (x: kiln.Tensor): kiln.Tensor => kiln.linear(x.mul(2).add(1), w, null).relu();
  /** The compiled result and eager's for a fresh input, with the option set to `option`. */
  const run = (option: string | undefined, name: string): { got: number[]; eager: number[] } => {
    const x = kiln.randn([4, 64]).to('cuda');
    setOption('KILN_CUDA_REPLAY_SKIP', option);
    try {
      const c = kiln.compile(fn, { name, mode: 'default' });
      return { got: c(x).toFlatArray(), eager: fn(x).toFlatArray() };
    } finally {
      setOption('KILN_CUDA_REPLAY_SKIP', undefined);
    }
  };
  const near = (a: number, b: number): boolean => Math.abs(a - b) <= 1e-3 * (1 + Math.abs(b));
  for (const [option, label] of [[undefined, 'no skip'], ['extern softmax|no such step', 'a name no step has']] as const) {
    const { got, eager } = run(option, `skip-${label.replace(/\W/g, '')}`);
    got.forEach((v, i) => assert.ok(near(v, eager[i]!), `${label}: element ${i}: ${v} vs ${eager[i]}`));
  }
  for (const name of ['extern linear', 'pointwise']) {
    const { got, eager } = run(name, `skip-${name.replace(/\W/g, '')}`);
    assert.ok(got.some((v, i) => !near(v, eager[i]!)), `${name}: that step no longer computes (the result differs from eager)`);
  }
});
