/**
 * The parts of the cuda compile path that run without a GPU: which graphs take the CUDA path, the
 * CUDA-graph policy per mode and KILN_CUDA_GRAPHS, and `kiln bench --dtype` with several dtypes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { cudaDeviceOf, graphPolicy } from '../src/compile/cuda-graphs/compile-cuda.js';
import { parseBenchArgs } from '../src/cli/bench.js';

test('graphs on the cpu do not take the cuda path', () => {
  const { graph } = trace((x: kiln.Tensor) => x.mul(2).add(1), [kiln.ones([3, 4])]);
  assert.equal(cudaDeviceOf(graph), null);
});

test('CUDA graph policy: reduce-overhead always, other modes measured, KILN_CUDA_GRAPHS overrides', () => {
  assert.equal(graphPolicy('reduce-overhead', undefined), 'always');
  assert.equal(graphPolicy('default', undefined), 'measure');
  assert.equal(graphPolicy('max-autotune', undefined), 'measure');
  for (const off of ['0', 'off', 'FALSE']) assert.equal(graphPolicy('reduce-overhead', off), 'off', off);
  for (const on of ['1', 'on', 'true']) assert.equal(graphPolicy('default', on), 'always', on);
  assert.equal(graphPolicy('default', ''), 'measure');
});

test('kiln bench --dtype takes several dtypes (listed, repeated or comma-separated)', () => {
  const listed = parseBenchArgs(['--device', 'cpu', '--dtype', 'float32', 'bfloat16', '--workload', 'mlp-64x512']);
  assert.ok(listed !== 'help');
  assert.deepEqual(listed.dtypes, ['float32', 'bfloat16']);
  assert.equal(listed.dtype, 'float32');
  const comma = parseBenchArgs(['--dtype', 'bfloat16,float32']);
  assert.ok(comma !== 'help');
  assert.deepEqual(comma.dtypes, ['bfloat16', 'float32']);
  const repeated = parseBenchArgs(['--dtype', 'bfloat16', '--dtype', 'bfloat16']);
  assert.ok(repeated !== 'help');
  assert.deepEqual(repeated.dtypes, ['bfloat16']);
  const dflt = parseBenchArgs([]);
  assert.ok(dflt !== 'help');
  assert.deepEqual(dflt.dtypes, ['float32']);
  assert.throws(() => parseBenchArgs(['--dtype', 'float32', 'float16']), /unexpected argument 'float16'/);
  assert.throws(() => parseBenchArgs(['--dtype', 'float32,float16']), /--dtype must be one of float32, bfloat16, got 'float16'/);
  assert.throws(() => parseBenchArgs(['bfloat16']), /dtypes go after --dtype/);
});
