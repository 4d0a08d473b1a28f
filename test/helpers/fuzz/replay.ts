/**
 * Replays fuzz cases in one mode (eager or compiled, on cpu or cuda) and lists how Kiln differs
 * from torch. Eager is checked step by step and stops at the first differing step, so a mismatch is
 * pinned on the op that made it; compiled is checked on the final result and on the inputs. Inputs
 * are checked after the program too: the ones torch's in-place steps changed must hold torch's
 * values, and the others must be untouched.
 *
 * A mismatch is 'unstable' rather than a failure when a discontinuous step (a comparison, a cast,
 * an integer result, rounding division) follows a float step whose result was within tolerance but
 * not bit-equal: the comparison then legitimately flips.
 */
import * as kiln from '../../../src/index.js';
import type { Tensor } from '../../../src/index.js';
import { buildInput } from './build.js';
import { compareTensor, compareValues, loosest } from './compare.js';
import type { FuzzCase, Spec } from './fixture.js';
import { runProgram } from './program.js';

export interface Mode {
  name: 'eager' | 'compile' | 'cuda-eager' | 'cuda-compile';
  device: 'cpu' | 'cuda';
  compiled: boolean;
}

export const MODES: Mode[] = [
  { name: 'eager', device: 'cpu', compiled: false },
  { name: 'compile', device: 'cpu', compiled: true },
  { name: 'cuda-eager', device: 'cuda', compiled: false },
  { name: 'cuda-compile', device: 'cuda', compiled: true },
];

export type MismatchKind = 'dtype' | 'shape' | 'value' | 'input' | 'missing-error' | 'unexpected-error' | 'unstable';

export interface Mismatch {
  caseId: number;
  mode: string;
  step: number;
  op: string;
  inplace: boolean;
  /** dtype of the step's first tensor argument. */
  dtype: string;
  kind: MismatchKind;
  detail: string;
}

class Stop extends Error {}

const FLOAT = new Set(['float32', 'float64', 'float16', 'bfloat16']);

function discontinuous(c: FuzzCase, k: number): boolean {
  const s = c.steps[k]!;
  const out = s.out?.dtype ?? '';
  return !FLOAT.has(out) || s.op === 'to' || (s.op === 'div' && s.args[2] !== null);
}

/** The dtypes a chain has gone through up to step k: its float inputs and every result. */
function chainDtypes(c: FuzzCase, k: number): string[] {
  return [...c.inputs.map((e) => e.dtype), ...c.steps.slice(0, k + 1).map((s) => s.out?.dtype ?? '')];
}

function selfDtype(c: FuzzCase, k: number): string {
  return k === 0 ? c.inputs[0]!.dtype : (c.steps[k - 1]!.out?.dtype ?? '?');
}

/** Per step: was the eager result bit-equal to torch's? Filled by the eager replay, read by compiled. */
export type Exactness = Map<number, boolean[]>;

export function replayCase(spec: Spec, c: FuzzCase, mode: Mode, exactness: Exactness): Mismatch[] {
  const found: Mismatch[] = [];
  const exact: boolean[] = exactness.get(c.id) ?? [];
  const unstableAt = (k: number): boolean => {
    for (let j = 1; j <= k; j++) if (discontinuous(c, j) && exact.slice(0, j).some((e) => !e)) return true;
    return false;
  };
  const add = (step: number, kind: MismatchKind, detail: string): void => {
    const s = c.steps[Math.min(step, c.steps.length - 1)]!;
    const k = ['dtype', 'shape', 'value', 'input'].includes(kind) && unstableAt(step) ? 'unstable' : kind;
    found.push({ caseId: c.id, mode: mode.name, step, op: s.op, inplace: s.inplace, dtype: selfDtype(c, step), kind: k, detail });
  };
  const inputs = c.inputs.map((e) => buildInput(e, mode.device));
  const last = c.steps.length - 1;
  let done = 0;
  try {
    if (mode.compiled) {
      const fn = kiln.compile((...ins: Tensor[]) => {
        const r = runProgram(spec, c, ins);
        return r[r.length - 1]!;
      });
      const out = fn(...inputs);
      done = c.steps.length;
      const want = c.steps[last]!.out;
      if (want) {
        const { diff } = compareTensor(out, want, loosest(chainDtypes(c, last)));
        if (diff) add(last, diff.kind, diff.detail);
      }
    } else {
      runProgram(spec, c, inputs, (k, out) => {
        done = k + 1;
        const want = c.steps[k]!.out;
        if (!want) return;
        const { diff, exact: e } = compareTensor(out, want, loosest(chainDtypes(c, k)));
        exact[k] = e;
        if (diff) {
          add(k, diff.kind, diff.detail);
          throw new Stop();
        }
      });
      exactness.set(c.id, exact);
    }
  } catch (e) {
    if (e instanceof Stop) return found;
    const msg = e instanceof Error ? e.message.split('\n')[0]!.slice(0, 200) : String(e);
    // Compiled code raises while tracing or running the whole program: any step will do.
    if (c.error && (mode.compiled || done === c.error.step)) return found;
    // Kiln's errors start with the op's name: pin a compiled failure on that step, not the last.
    const named = mode.compiled ? c.steps.findIndex((s) => msg.startsWith(`${spec.ops[s.op]?.kiln.replace(/^\./, '')}:`)) : -1;
    add(named >= 0 ? named : Math.min(done, last), 'unexpected-error', msg);
    return found;
  }
  if (c.error) {
    add(c.error.step, 'missing-error', `torch: ${c.error.type}: ${c.error.msg}`);
    return found;
  }
  c.inputs.forEach((e, i) => {
    const want = c.mutated?.[String(i)] ?? e.values;
    const { bad } = compareValues(inputs[i]!.toFlatArray(), want, e.dtype);
    if (bad) add(last, 'input', `input ${i} ${c.mutated?.[String(i)] ? 'after the in-place steps' : 'should be untouched'}: ${bad}`);
  });
  return found;
}
