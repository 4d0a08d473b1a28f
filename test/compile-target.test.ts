/**
 * Compile targets (src/compile/target.ts): the registry, lowering asking the target what it may
 * fuse (a toy target on a made-up device type), and the built-in targets' decisions on the bench
 * workloads (size 'tiny'), which must stay what they were before targets existed. The expected
 * schedules were computed with the compiler of main at 1a48dc8, before the refactor (the cuda path
 * then lowered its graphs relabelled as cpu values: the same decisions as the cpu's).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { getBackend, type CompiledProgram } from '../src/compile/backend.js';
import { trace } from '../src/compile/capture.js';
import { CPU_FUSION } from '../src/compile/codegen/js/fusion.js';
import type { KilnProgram } from '../src/compile/kiln-backend.js';
import type { Graph } from '../src/compile/ir.js';
import { templateFusion, type FusionRules } from '../src/compile/lower/fusion-rules.js';
import { lower, type Lowered } from '../src/compile/lower/lower.js';
import { schedule, type Schedule } from '../src/compile/lower/schedule.js';
import { type CompileTarget, compileTargetFor, listCompileTargets, lowerFor, registerCompileTarget, targetDevice } from '../src/compile/target.js';
import { WORKLOADS } from '../src/bench/workloads.js';
import { Device, type DeviceType } from '../src/runtime/device.js';
import type { Tensor } from '../src/tensor/tensor.js';

type Fn = (...args: never[]) => unknown;

/** `graph` with every value moved (in its metadata only) to `device`. */
function relabel(graph: Graph, device: Device): Graph {
  return { ...graph, values: new Map([...graph.values].map(([id, v]) => [id, { ...v, device }])) };
}

function structure(sched: Schedule): { kernels: string[]; steps: string } {
  return { kernels: sched.kernels.map((g) => `${g.kind}(${g.nodes.map((n) => n.op).join('+')})`), steps: sched.steps.map((s) => s.kind).join(',') };
}

const kinds = (low: Lowered): string => low.nodes.map((n) => `${n.op}:${n.kind}`).join(' ');

test('the cpu and cuda targets are registered; an unknown device type names itself and the registered targets', () => {
  assert.ok(listCompileTargets().includes('cpu'));
  assert.ok(listCompileTargets().includes('cuda'));
  assert.equal(compileTargetFor('cpu').fusion, CPU_FUSION);
  assert.ok(compileTargetFor('cuda').fusion.gemm === null, 'no GEMM steps on cuda (linears run cuBLASLt through dispatch)');
  assert.throws(() => compileTargetFor('tpu'), /no compile target for device type 'tpu' \(registered: cpu, cuda/);
  assert.throws(() => registerCompileTarget('cpu', compileTargetFor('cpu')), /'cpu' already has a compile target/);
});

test('targetDevice: the first device with a target of its own, else the host', () => {
  const { graph } = trace(((x: Tensor) => x.mul(2)) as Fn, [kiln.ones([3])]);
  assert.equal(targetDevice(graph).type, 'cpu');
  const onCuda = targetDevice(relabel(graph, new Device('cuda', 1)));
  assert.equal(`${onCuda.type}:${onCuda.index}`, 'cuda:1');
  assert.equal(targetDevice(relabel(graph, new Device('webgpu', 0))).type, 'webgpu');
  // A device type without a target: the cpu target runs such graphs through the dispatcher.
  assert.equal(targetDevice(relabel(graph, new Device('tpu' as DeviceType, 0))).type, 'cpu');
});

/** The template rules on 'toy' devices, refusing exp. */
const TOY = 'toy' as DeviceType;
const toyFusion = (): FusionRules => {
  const base = templateFusion((d) => d.type === TOY, null);
  return { ...base, pointwise: (n, values) => n.op !== 'exp' && base.pointwise(n, values) };
};

test('lowering asks the target: a toy target on a made-up device type that refuses exp gets it as an extern', () => {
  const seen: { device: string; low: Lowered; sched: Schedule }[] = [];
  const toy: CompileTarget = {
    description: 'toy: the template rules without exp',
    fusion: toyFusion(),
    program: () => ({ run: () => null, kernelCount: 0, describe: () => 'toy' }),
    compile(graph, device, options): CompiledProgram {
      const { low, sched } = lowerFor(graph, this);
      seen.push({ device: `${device.type}:${device.index}`, low, sched });
      return this.program(low, sched, device, options);
    },
  };
  registerCompileTarget(TOY, toy);
  const { graph } = trace(((x: Tensor) => kiln.exp(x.mul(2)).add(1)) as Fn, [kiln.ones([4])]);
  const onToy = relabel(graph, new Device(TOY, 3));
  // The kiln backend picks the toy target by the graph's device and never tests a device type.
  getBackend('kiln').compile(onToy, { mode: 'default', logCode: false });
  assert.equal(seen.length, 1);
  const [{ device, low, sched }] = seen as [(typeof seen)[0]];
  assert.equal(device, 'toy:3');
  assert.equal(kinds(low), 'mul:pointwise exp:extern add:pointwise');
  assert.deepEqual(structure(sched), { kernels: ['pointwise(mul)', 'pointwise(add)'], steps: 'kernel,extern,kernel' });
  // The same graph under the cpu's rules: nothing on a toy device is the cpu's to fuse.
  assert.equal(kinds(lower(onToy, CPU_FUSION)), 'mul:extern exp:extern add:extern');
  // And on the cpu, the cpu's rules fuse all three.
  assert.equal(kinds(lower(graph, CPU_FUSION)), 'mul:pointwise exp:pointwise add:pointwise');
});

test('a cpu program built from rules that refuse exp runs exp through the dispatcher, with eager results', () => {
  const fn = (x: Tensor): Tensor => kiln.exp(x.mul(2)).add(1);
  const x = kiln.linspace(-1, 1, 6);
  const { graph } = trace(fn as Fn, [x]);
  const noExp = templateFusion((d) => d.type === 'cpu', null);
  const rules: FusionRules = { ...noExp, pointwise: (n, values) => n.op !== 'exp' && noExp.pointwise(n, values) };
  const low = lower(graph, rules);
  const program = compileTargetFor('cpu').program(low, schedule(low), new Device('cpu'), { mode: 'default', logCode: false }) as KilnProgram;
  assert.equal(program.kernelCount, 2);
  assert.equal(program.stats.externs, 1);
  const got = program.run([x]) as Tensor;
  assert.deepEqual(got.toArray(), fn(x).toArray());
});

/** Kernel groups and step kinds of each bench workload at size 'tiny', from main before the refactor. */
const EXPECTED: Record<string, { kernels: string[]; steps: string }> = {
  'elementwise-4096': {
    kernels: ['pointwise(mul+add+relu+neg+exp+add+reciprocal+mul+mul+tanh+add+mul+neg+exp+mul+sub+mul+sub)'],
    steps: 'kernel',
  },
  'elementwise-1024': {
    kernels: ['pointwise(mul+add+relu+neg+exp+add+reciprocal+mul+mul+tanh+add+mul+neg+exp+mul+sub+mul+sub)'],
    steps: 'kernel',
  },
  'mlp-2048x4096': { kernels: ['pointwise(mul+mul+erf+add+mul)'], steps: 'extern,kernel,extern' },
  'mlp-64x512': { kernels: ['pointwise(mul+mul+erf+add+mul)'], steps: 'extern,kernel,extern' },
  'transformer-block': {
    kernels: ['reduce(mean+sub+mul+mean+add+rsqrt+mul+mul+add)', 'reduce(add+mean+sub+mul+mean+add+rsqrt+mul+mul+add)', 'pointwise(mul+mul+erf+add+mul)', 'pointwise(add)'],
    steps: 'kernel,extern,view,view,view,view,view,extern,view,extern,extern,kernel,extern,kernel,extern,kernel',
  },
  'conv-stack': { kernels: [], steps: 'extern,extern' },
  'qwen3-0.6b-forward': {
    kernels: [
      'reduce(mul+mean+add+rsqrt+mul+mul)',
      'reduce(mul+mean+add+rsqrt+mul+mul)',
      'reduce(mul+mean+add+rsqrt+mul+mul)',
      'reduce(add+mul+mean+add+rsqrt+mul+mul)',
      'pointwise(neg+exp+add+div+mul)',
      'reduce(add+mul+mean+add+rsqrt+mul+mul)',
    ],
    steps:
      'extern,kernel,extern,view,view,view,view,kernel,view,view,kernel,view,view,view,extern,extern,extern,view,extern,extern,kernel,extern,view,view,kernel,extern,kernel,extern',
  },
};

test('the cpu and cuda targets fuse the bench workloads (tiny) exactly as before targets existed', () => {
  assert.deepEqual(
    WORKLOADS.map((w) => w.name),
    Object.keys(EXPECTED),
  );
  for (const w of WORKLOADS) {
    const b = w.build({ size: 'tiny' });
    try {
      const f = kiln.compile(b.forward);
      kiln.noGrad(() => f(...b.inputs));
      const program = f.programs().inference[0] as KilnProgram;
      assert.deepEqual(structure(program.sched), EXPECTED[w.name], `${w.name}: the compiled cpu program`);
      assert.equal(program.kernelCount, EXPECTED[w.name]!.kernels.length);
      const graph = program.low.graph;
      const cpu = lowerFor(graph, compileTargetFor('cpu'));
      assert.deepEqual(structure(cpu.sched), EXPECTED[w.name], `${w.name}: cpu`);
      // The cuda target lowers a graph on cuda as the cpu target lowers it on the cpu (metadata only: no device needed).
      const cuda = lowerFor(relabel(graph, new Device('cuda', 0)), compileTargetFor('cuda'));
      assert.deepEqual(structure(cuda.sched), EXPECTED[w.name], `${w.name}: cuda`);
      assert.equal(kinds(cuda.low), kinds(cpu.low), `${w.name}: cuda node kinds`);
    } finally {
      b.dispose();
    }
  }
});
