/**
 * Runs a fuzz case's program in Kiln through the public API, the way a user would: each step is
 * the op spec's kiln call ('name' a kiln function, '.name' a Tensor method, the in-place variant a
 * method on the first argument), its arguments positional in the spec's order. The same function
 * runs eagerly and, traced, under kiln.compile.
 */
import * as kiln from '../../../src/index.js';
import type { Tensor } from '../../../src/index.js';
import type { EncArg, FuzzCase, OpSpec, Spec } from './fixture.js';

type AnyFn = (...args: unknown[]) => Tensor;

function resolve(a: EncArg, inputs: readonly Tensor[], results: readonly Tensor[]): unknown {
  if (a === null || typeof a !== 'object' || Array.isArray(a)) return a;
  if ('in' in a) return inputs[a.in];
  if ('step' in a) return results[a.step];
  if ('list' in a) return a.list.map((x) => resolve(x, inputs, results));
  return a.f === '-inf' ? -Infinity : a.f === 'inf' ? Infinity : NaN;
}

export function callKiln(spec: OpSpec, named: Record<string, unknown>, inplace: boolean): Tensor {
  const order = spec.kilnPos ?? spec.args.map((a) => a.name);
  const pos = order.map((n) => named[n]);
  const method = inplace ? spec.inplace : spec.kiln.startsWith('.') ? spec.kiln : null;
  if (method) {
    const self = pos[0] as Record<string, unknown>;
    const fn = self[method.slice(1)];
    if (typeof fn !== 'function') throw new Error(`fuzz: Tensor has no method ${method}`);
    return (fn as AnyFn).apply(self, pos.slice(1));
  }
  const fn = (kiln as unknown as Record<string, unknown>)[spec.kiln];
  if (typeof fn !== 'function') throw new Error(`fuzz: kiln has no function ${spec.kiln}`);
  return (fn as AnyFn)(...pos);
}

/**
 * Runs steps 0..n-1 on `inputs`; `onStep` sees each result right after its step (before a later
 * in-place step can change an aliased one), which is when the fixture recorded torch's.
 */
export function runProgram(spec: Spec, c: FuzzCase, inputs: readonly Tensor[], onStep?: (k: number, out: Tensor) => void): Tensor[] {
  const results: Tensor[] = [];
  c.steps.forEach((s, k) => {
    const op = spec.ops[s.op];
    if (!op) throw new Error(`fuzz: op ${s.op} is not in the spec`);
    const named: Record<string, unknown> = {};
    op.args.forEach((a, i) => (named[a.name] = resolve(s.args[i]!, inputs, results)));
    const out = callKiln(op, named, s.inplace);
    results.push(out);
    onStep?.(k, out);
  });
  return results;
}
