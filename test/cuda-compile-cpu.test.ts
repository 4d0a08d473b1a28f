/**
 * The parts of the cuda compile path that run without a GPU: which graphs take the CUDA path, the
 * CUDA-graph policy per mode and KILN_CUDA_GRAPHS, how a call is split into captured pieces around
 * host-synchronising ops (planned only: nothing compiles), and `kiln bench --dtype` lists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { cudaDeviceOf, graphPolicy } from '../src/compile/cuda-graphs/compile-cuda.js';
import { parseBenchArgs } from '../src/cli/bench.js';
import { HOST_SYNC_OPS, PiecewiseGraphProgram, splittable } from '../src/compile/cuda-graphs/piecewise.js';
import type { RuntimeLauncher } from '../src/compile/codegen/cuda/runtime-launcher.js';
import { H200_TARGET } from '../src/compile/codegen/cuda/configs.js';
import { runPasses } from '../src/compile/passes/index.js';

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
  const three = parseBenchArgs(['--dtype', 'float32', 'float16', 'bfloat16']);
  assert.ok(three !== 'help');
  assert.deepEqual(three.dtypes, ['float32', 'float16', 'bfloat16']);
  assert.throws(() => parseBenchArgs(['--dtype', 'float32', 'float64']), /unexpected argument 'float64'/);
  assert.throws(() => parseBenchArgs(['--dtype', 'float32,float64']), /--dtype must be one of float32, bfloat16, float16, got 'float64'/);
  assert.throws(() => parseBenchArgs(['bfloat16']), /dtypes go after --dtype/);
});

/** A launcher that only carries the target: enough to build programs (nothing is compiled or run). */
function planningLauncher(): RuntimeLauncher {
  const fail = (): never => assert.fail('nothing may compile or launch while planning');
  return { deviceIndex: 0, target: H200_TARGET, stats: { compiled: 0, pooled: 0, diskHits: 0, batches: 0, loaded: 0 }, flush: fail, flushL2: fail, compile: fail, launch: fail, address: fail };
}

test('piecewise CUDA graphs: a graph is split at host-synchronising ops, pieces read what they need', () => {
  const table = kiln.randn([50, 8]);
  const w = kiln.randn([8, 8]);
  const fn = (ids: kiln.Tensor, x: kiln.Tensor): kiln.Tensor => {
    const e = kiln.scatterAdd(x, 0, ids.view([3, 1]).expand([3, 8]), table.narrow(0, 0, 3));
    const h = kiln.relu(kiln.linear(e, w));
    // A second synchronising op between two capturable runs.
    return kiln.scatterAdd(h, 0, ids.view([3, 1]).narrow(0, 0, 2).expand([2, 8]), h.narrow(0, 0, 2)).mul(2).sum(-1);
  };
  const { graph: traced } = trace(fn as (...a: never[]) => unknown, [kiln.tensor([1, 0, 2], { dtype: 'int64' }), kiln.randn([3, 8])]);
  const { graph } = runPasses(traced, { decompose: true });
  assert.ok(splittable(graph));
  const pw = new PiecewiseGraphProgram(graph, planningLauncher(), { tuneOnFirstRun: false, aliasOutputs: false });
  const text = pw.describe();
  const kinds = [...text.matchAll(/\/\/ piece \d+: (CUDA graph|eager \w+)/g)].map((m) => m[1]);
  // Every node that reads indices on the host is an eager piece; every other node is in a graph piece.
  const syncNodes = graph.nodes.filter((n) => HOST_SYNC_OPS.has(n.op)).map((n) => `eager ${n.op}`);
  assert.deepEqual(kinds.filter((k) => k !== 'CUDA graph'), syncNodes);
  assert.ok(syncNodes.length >= 2, `expected two scatterAdds in the graph, got ${graph.nodes.map((n) => n.op).join(', ')}`);
  const pieces = pw.graphPieces();
  assert.equal(pieces.length, kinds.filter((k) => k === 'CUDA graph').length);
  const inPieces = pieces.reduce((n, p) => n + p.program.low.graph.nodes.length, 0);
  assert.equal(inPieces + syncNodes.length, graph.nodes.length, 'every node runs exactly once');
  // Pieces after the first read values made before them as their inputs; the last one makes the output.
  for (const p of pieces) assert.ok(p.program.low.graph.inputs.length > 0);
  const last = pieces[pieces.length - 1]!.program.low.graph;
  assert.equal(last.output.kind, 'list');
});

test('a graph without host-synchronising ops is not split; the gathers (checked on the device) are not host-synchronising', () => {
  const { graph } = trace((x: kiln.Tensor) => kiln.softmax(x, -1), [kiln.randn([4, 8])]);
  assert.equal(splittable(graph), false);
  const table = kiln.randn([50, 8]);
  const gathers = (ids: kiln.Tensor): kiln.Tensor => kiln.indexSelect(kiln.nn.functional.embedding(ids, table), 1, ids.narrow(0, 0, 2)).gather(0, ids.view([3, 1]).narrow(0, 0, 1));
  const { graph: g2 } = trace(gathers as (...a: never[]) => unknown, [kiln.tensor([1, 4, 7], { dtype: 'int64' })]);
  assert.deepEqual(g2.nodes.map((n) => n.op).filter((o) => ['embedding', 'indexSelect', 'gather'].includes(o)), ['embedding', 'indexSelect', 'gather']);
  assert.equal(splittable(g2), false);
});
