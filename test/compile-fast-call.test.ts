/**
 * The last-call fast path of a compiled call (src/compile/fast-call.ts) must decide exactly as
 * the full guard check does. Each scenario below runs one sequence of calls (argument metadata,
 * non-tensor arguments, lifted tensors and module state changing between them) twice: with the
 * fast path (default) and with KILN_COMPILE_FAST_CALL=0 (full guards on every call). After every
 * call the counters (traces, recompiles, hits, fallbacks, eager calls...) must be the same in
 * both runs, and every result must equal eager kiln's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { CompileCounters, CompileOptions } from '../src/compile/compile.js';
import { Tensor } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';

type Fn = (...args: never[]) => unknown;

/** One step: the arguments of a call, made fresh for each run, plus an optional state change before it. */
interface Step {
  readonly what: string;
  readonly before?: () => void;
  readonly args: () => unknown[];
  readonly grad?: boolean;
  /** Expected to take the fast path: the previous call ran this variant's inference program with the same metadata. */
  readonly fast?: boolean;
}

interface Scenario {
  readonly fn: Fn;
  readonly steps: readonly Step[];
  readonly options?: CompileOptions;
}

const flat = (x: unknown): number[] => (x instanceof Tensor ? x.toFlatArray().map(Number) : Array.isArray(x) ? x.flatMap(flat) : []);

function close(got: number[], want: number[], what: string): void {
  assert.equal(got.length, want.length, `${what}: result size`);
  got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) <= 1e-4 * (1 + Math.abs(want[i]!)), `${what}: element ${i}: ${v} vs eager ${want[i]}`));
}

/** The counters that record decisions (not fastHits, nor the disk cache, which the first run fills). */
type Decisions = Omit<CompileCounters, 'fastHits' | 'diskHits' | 'diskMisses'>;
const counted = (c: CompileCounters): Decisions => {
  const { fastHits: _f, diskHits: _h, diskMisses: _m, ...rest } = c;
  return rest;
};

/** Runs a scenario (built fresh, since steps mutate its state) with the fast path on or off. */
function runScenario(make: () => Scenario, fastCall: boolean): { counters: Decisions[]; fast: boolean[] } {
  const saved = process.env['KILN_COMPILE_FAST_CALL'];
  process.env['KILN_COMPILE_FAST_CALL'] = fastCall ? '1' : '0';
  const s = make();
  let f;
  try {
    f = kiln.compile(s.fn, { name: 'scenario', ...s.options });
  } finally {
    if (saved === undefined) delete process.env['KILN_COMPILE_FAST_CALL'];
    else process.env['KILN_COMPILE_FAST_CALL'] = saved;
  }
  const counters: Decisions[] = [];
  const fast: boolean[] = [];
  for (const step of s.steps) {
    const before = f.counters.fastHits;
    step.before?.();
    const args = step.args();
    const run = (g: Fn): unknown => (step.grad ? g(...(args as never[])) : kiln.noGrad(() => g(...(args as never[]))));
    const got = flat(run(f as Fn));
    const want = flat(run(s.fn));
    close(got, want, `${step.what} (fast path ${fastCall ? 'on' : 'off'})`);
    counters.push(counted({ ...f.counters }));
    fast.push(f.counters.fastHits > before);
  }
  return { counters, fast };
}

function sameDecisions(make: () => Scenario): void {
  const on = runScenario(make, true);
  const off = runScenario(make, false);
  const steps = make().steps;
  on.counters.forEach((c, i) => assert.deepEqual(c, off.counters[i], `after step ${i} (${steps[i]!.what}): counters differ between the fast path and full guards`));
  assert.deepEqual(on.fast, steps.map((st) => st.fast === true), 'the steps that took the fast path');
  assert.ok(off.fast.every((x) => !x), 'KILN_COMPILE_FAST_CALL=0 never takes the fast path');
}

const quietly = <T>(f: () => T): T => {
  const saved = process.emitWarning;
  process.emitWarning = () => undefined;
  try {
    return f();
  } finally {
    process.emitWarning = saved;
  }
};

test('tensor metadata: values, sizes (automatic dynamic), strides, dtype, requiresGrad', () => {
  quietly(() =>
    sameDecisions(() => {
      const gx = rand([2, 3], 9);
      gx.requiresGrad = true;
      return {
        fn: ((x: Tensor) => x.mul(2).add(x.exp())) as Fn,
        steps: [
          { what: 'first', args: () => [rand([2, 3], 1)] },
          { what: 'same metadata', args: () => [rand([2, 3], 2)], fast: true },
          { what: 'same again', args: () => [rand([2, 3], 3)], fast: true },
          { what: 'transposed strides', args: () => [rand([2, 3], 4, 'transposed')] },
          { what: 'back to contiguous', args: () => [rand([2, 3], 5)] },
          { what: 'float64', args: () => [rand([2, 3], 6, 'contiguous', 'float64')] },
          { what: 'requiresGrad under noGrad', args: () => [gx] },
          { what: 'requiresGrad with grad on', args: () => [gx], grad: true },
          { what: 'requiresGrad with grad on, again', args: () => [gx], grad: true },
          { what: 'other size: becomes symbolic', args: () => [rand([4, 3], 7)] },
          { what: 'another size under the symbolic entry', args: () => [rand([5, 3], 8)] },
          { what: 'the first size again', args: () => [rand([2, 3], 10)] },
          { what: 'and again', args: () => [rand([2, 3], 11)], fast: true },
          { what: 'size 1 stays specialised', args: () => [rand([1, 3], 12)] },
          { what: 'rank change', args: () => [rand([2, 3, 1], 13)] },
        ],
      };
    }),
  );
});

test('non-tensor arguments and containers', () => {
  quietly(() =>
    sameDecisions(() => ({
      fn: ((x: Tensor, s: number, opts: { y: Tensor; scale: number }, list: Tensor[]) => x.mul(s).add(opts.y.mul(opts.scale)).add(list[0]!)) as Fn,
      steps: [
        { what: 'first', args: () => [rand([3], 1), 2, { y: rand([3], 2), scale: 1 }, [rand([3], 3)]] },
        { what: 'same', args: () => [rand([3], 4), 2, { y: rand([3], 5), scale: 1 }, [rand([3], 6)]], fast: true },
        { what: 'scalar changed', args: () => [rand([3], 4), 3, { y: rand([3], 5), scale: 1 }, [rand([3], 6)]] },
        { what: 'scalar -0', args: () => [rand([3], 4), -0, { y: rand([3], 5), scale: 1 }, [rand([3], 6)]] },
        { what: 'scalar 0', args: () => [rand([3], 4), 0, { y: rand([3], 5), scale: 1 }, [rand([3], 6)]] },
        { what: 'nested scalar changed', args: () => [rand([3], 4), 0, { y: rand([3], 5), scale: 2 }, [rand([3], 6)]] },
        { what: 'key order changed', args: () => [rand([3], 4), 0, { scale: 2, y: rand([3], 5) }, [rand([3], 6)]] },
        { what: 'list grew', args: () => [rand([3], 4), 0, { scale: 2, y: rand([3], 5) }, [rand([3], 6), rand([3], 7)]] },
        { what: 'list grew, again', args: () => [rand([3], 4), 0, { scale: 2, y: rand([3], 5) }, [rand([3], 6), rand([3], 7)]], fast: true },
        { what: 'extra argument', args: () => [rand([3], 4), 0, { scale: 2, y: rand([3], 5) }, [rand([3], 6), rand([3], 7)], 'extra'] },
      ],
    })),
  );
});

test('lifted tensors and module state: requiresGrad, replaced parameters, training mode, folded constants', () => {
  quietly(() =>
    sameDecisions(() => {
      const lin = new kiln.nn.Linear(3, 2);
      const drop = new kiln.nn.Dropout(0);
      const c = rand([2], 3);
      const d = rand([2], 14);
      return {
        // c.mul(2) is folded at compile time (its version is guarded); d is a program input.
        fn: ((x: Tensor) => drop.forward(lin.forward(x)).add(c.mul(2)).add(d)) as Fn,
        options: { modules: [lin, drop] },
        steps: [
          { what: 'first', args: () => [rand([4, 3], 1)] },
          { what: 'same', args: () => [rand([4, 3], 2)], fast: true },
          { what: 'parameter values written in place (not guarded)', before: () => kiln.noGrad(() => void lin.weight.mul_(2)), args: () => [rand([4, 3], 3)], fast: true },
          { what: 'weight.requiresGrad off', before: () => (lin.weight.requiresGrad = false), args: () => [rand([4, 3], 4)] },
          { what: 'same', args: () => [rand([4, 3], 5)], fast: true },
          { what: 'weight.requiresGrad on, grad mode on', before: () => (lin.weight.requiresGrad = true), args: () => [rand([4, 3], 6)], grad: true },
          { what: 'bias replaced', before: () => (lin.bias = new kiln.nn.Parameter(rand([2], 7))), args: () => [rand([4, 3], 8)] },
          { what: 'same', args: () => [rand([4, 3], 9)], fast: true },
          { what: 'eval mode', before: () => void drop.train(false), args: () => [rand([4, 3], 10)] },
          { what: 'same', args: () => [rand([4, 3], 11)], fast: true },
          { what: 'closed-over constant written in place', before: () => kiln.noGrad(() => void c.add_(1)), args: () => [rand([4, 3], 12)] },
          { what: 'same', args: () => [rand([4, 3], 13)], fast: true },
          { what: 'lifted input written in place (read at every call)', before: () => kiln.noGrad(() => void d.add_(1)), args: () => [rand([4, 3], 15)], fast: true },
        ],
      };
    }),
  );
});

test('a Module argument is compared by identity and its state stays guarded', () => {
  quietly(() =>
    sameDecisions(() => {
      const a = new kiln.nn.Linear(3, 3);
      const b = new kiln.nn.Linear(3, 3);
      return {
        fn: ((m: kiln.nn.Linear, x: Tensor) => m.forward(x).relu()) as Fn,
        steps: [
          { what: 'module a', args: () => [a, rand([2, 3], 1)] },
          { what: 'module a again', args: () => [a, rand([2, 3], 2)], fast: true },
          { what: 'module b', args: () => [b, rand([2, 3], 3)] },
          { what: 'module b again', args: () => [b, rand([2, 3], 4)], fast: true },
          { what: 'module b, weight replaced', before: () => (b.weight = new kiln.nn.Parameter(rand([3, 3], 5))), args: () => [b, rand([2, 3], 6)] },
          { what: 'module b again', args: () => [b, rand([2, 3], 7)], fast: true },
          { what: 'module b in eval mode', before: () => void b.train(false), args: () => [b, rand([2, 3], 8)] },
          { what: 'module a', args: () => [a, rand([2, 3], 9)] },
        ],
      };
    }),
  );
});

test('recompile limit, graph breaks and resetCache decide the same with the fast path', () => {
  quietly(() =>
    sameDecisions(() => ({
      fn: ((x: Tensor) => x.add(1)) as Fn,
      options: { recompileLimit: 1, dynamic: false },
      steps: [
        { what: 'first', args: () => [rand([2], 1)] },
        { what: 'same', args: () => [rand([2], 2)], fast: true },
        { what: 'recompile 1', args: () => [rand([3], 3)] },
        { what: 'over the limit: eager', args: () => [rand([4], 4)] },
        { what: 'over the limit again', args: () => [rand([4], 5)] },
        { what: 'first shape again', args: () => [rand([2], 6)] },
        { what: 'second shape again', args: () => [rand([3], 7)] },
      ],
    })),
  );
  // A graph break: the entry runs eagerly, never through a fast record.
  const brk = kiln.compile((x: Tensor) => ((x.sum().item() as number) > 0 ? x.add(1) : x.sub(1)), { name: 'breaks' });
  quietly(() => {
    for (let i = 0; i < 3; i++) kiln.noGrad(() => brk(rand([3], i + 1)));
  });
  assert.equal(brk.counters.eagerCalls, 3);
  assert.equal(brk.counters.fastHits, 0);
  // resetCache drops the record with the entries: the next call traces again.
  const f = kiln.compile((x: Tensor) => x.mul(3), { name: 'reset' });
  kiln.noGrad(() => f(rand([2], 1)));
  kiln.noGrad(() => f(rand([2], 2)));
  assert.equal(f.counters.fastHits, 1);
  f.resetCache();
  kiln.noGrad(() => f(rand([2], 3)));
  assert.equal(f.counters.traces, 2);
  assert.equal(f.counters.fastHits, 1);
});
