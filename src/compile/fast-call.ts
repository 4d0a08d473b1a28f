/**
 * The steady-state fast path of a compiled call: a last-hit record per compiled function.
 *
 * The full guard check (guards.ts) encodes every argument leaf into two strings and looks them up
 * in maps: tens of microseconds per call from Node, more than a small CUDA graph replay costs.
 * Most calls repeat the previous one's metadata (a training or serving loop), so after a call
 * that ran a compiled inference program, compile.ts records here what that call's arguments
 * looked like, per leaf, as plain values: for a tensor its dtype, device, sizes, strides and
 * requiresGrad; for any other leaf the value itself (by Object.is: numbers, strings, ...; objects
 * such as Modules by identity); for arrays and plain objects their length or keys. The next
 * call compares its arguments against that record with no allocation and no string building,
 * and on a match runs the recorded program with inputs gathered by precomputed paths.
 *
 * A match implies the full check would find the same entry and variant: every component of the
 * guard key (guards.ts computeArgGuards) is a function of what is compared here (exact strides
 * imply the layout class; exact sizes imply both the symbolic and the concrete key), given that
 * the set of symbolic dims has not changed since the record was made (compile.ts drops the
 * record whenever it does, or takes the slow path for any other reason). Lifted tensors and
 * module state are not covered by the record: compile.ts still runs the variant's
 * checkLiftedGuards on every fast call.
 */
import { Tensor } from '../tensor/tensor.js';
import type { DType } from '../tensor/dtype.js';
import type { DeviceType } from '../runtime/device.js';
import type { Graph } from './ir.js';

type Template =
  | {
      readonly kind: 'tensor';
      readonly dtype: DType;
      readonly deviceType: DeviceType;
      readonly deviceIndex: number;
      readonly shape: readonly number[];
      readonly strides: readonly number[];
      readonly requiresGrad: boolean;
    }
  | { readonly kind: 'value'; readonly value: unknown }
  | { readonly kind: 'array'; readonly items: readonly Template[] }
  | { readonly kind: 'object'; readonly keys: readonly string[]; readonly items: readonly Template[] };

function isPlainObject(x: unknown): x is Record<string, unknown> {
  return x !== null && typeof x === 'object' && Object.getPrototypeOf(x) === Object.prototype;
}

/** Mirrors guards.ts's walk: the same things are containers, tensors and leaves there and here. */
function templateOf(x: unknown): Template {
  if (x instanceof Tensor) {
    return { kind: 'tensor', dtype: x.dtype, deviceType: x.device.type, deviceIndex: x.device.index, shape: x.shape, strides: x.strides, requiresGrad: x.requiresGrad };
  }
  if (Array.isArray(x)) return { kind: 'array', items: x.map(templateOf) };
  if (isPlainObject(x)) {
    const keys = Object.keys(x);
    return { kind: 'object', keys, items: keys.map((k) => templateOf(x[k])) };
  }
  return { kind: 'value', value: x };
}

function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function matches(t: Template, x: unknown): boolean {
  switch (t.kind) {
    case 'tensor':
      return (
        x instanceof Tensor &&
        x.dtype === t.dtype &&
        x.requiresGrad === t.requiresGrad &&
        x.device.type === t.deviceType &&
        x.device.index === t.deviceIndex &&
        sameNumbers(x.shape, t.shape) &&
        sameNumbers(x.strides, t.strides)
      );
    case 'value':
      // A Tensor, array or plain object where the record holds a leaf is a structural change.
      return Object.is(x, t.value);
    case 'array': {
      if (!Array.isArray(x) || x.length !== t.items.length) return false;
      for (let i = 0; i < x.length; i++) if (!matches(t.items[i]!, x[i])) return false;
      return true;
    }
    case 'object': {
      if (!isPlainObject(x)) return false;
      const keys = Object.keys(x);
      if (keys.length !== t.keys.length) return false;
      for (let i = 0; i < keys.length; i++) if (keys[i] !== t.keys[i] || !matches(t.items[i]!, x[keys[i]!])) return false;
      return true;
    }
  }
}

/** How one graph input is found at call time. */
// A lifted input may be derived from other tensors (passes/horizontal.ts's concatenated weights):
// its refresh() runs on every call, as joint-program.ts's inputTensor does on the full path.
type InputGetter = { readonly lifted: Tensor; readonly refresh?: () => void } | { readonly path: readonly (string | number)[] };

export interface FastCallRecord<V> {
  /** What the recorded call ran (compile.ts's variant). */
  readonly variant: V;
  /** The number of symbolic dims when recorded: a change invalidates the record. */
  readonly symbolicCount: number;
  /** Whether this variant takes the joint (grad) path when grad mode is on. */
  readonly needsGrad: boolean;
  /** Arguments match the recorded call's metadata leaf for leaf. */
  matches(args: readonly unknown[]): boolean;
  /** The program inputs for these (matching) arguments, in graph order. */
  inputs(args: readonly unknown[]): Tensor[];
}

/**
 * A record of `args` for `variant`. Modules among the arguments are compared by identity, as the
 * guard key does; their parameters and training flags are roots of the variant's lifted guards.
 */
export function recordFastCall<V>(variant: V, graph: Graph, args: readonly unknown[], symbolicCount: number, needsGrad: boolean): FastCallRecord<V> {
  const templates = args.map(templateOf);
  const getters: InputGetter[] = graph.inputs.map((inp) => {
    if (inp.source.kind !== 'lifted') return { path: inp.source.path };
    const derived = inp.source.derived;
    return derived ? { lifted: inp.source.tensor, refresh: () => derived.refresh() } : { lifted: inp.source.tensor };
  });
  return {
    variant,
    symbolicCount,
    needsGrad,
    matches(a) {
      if (a.length !== templates.length) return false;
      for (let i = 0; i < a.length; i++) if (!matches(templates[i]!, a[i])) return false;
      return true;
    },
    inputs(a) {
      const out = new Array<Tensor>(getters.length);
      for (let i = 0; i < getters.length; i++) {
        const g = getters[i]!;
        if ('lifted' in g) {
          g.refresh?.();
          out[i] = g.lifted;
          continue;
        }
        let x: unknown = a;
        for (const k of g.path) x = (x as Record<string | number, unknown>)[k];
        // matches() checked the structure, so a path that held a tensor holds one now.
        out[i] = x as Tensor;
      }
      return out;
    },
  };
}
