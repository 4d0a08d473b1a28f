/**
 * Guards: what must hold for a cached compiled entry to be reused.
 *
 * Arguments are walked like the tracer walks them (arrays and plain objects are containers,
 * tensors and everything else are leaves). Each tensor leaf is guarded on dtype, device, rank,
 * sizes ('?' for symbolic dims), layout class (contiguous / channelsLast / other, with the exact
 * strides for other) and requiresGrad; other leaves by value (numbers, strings, booleans, null,
 * undefined) or, for objects such as Modules, by identity. The leaves' encoding is the cache key.
 *
 * Symbolic dims: sizes 0 and 1 always stay specialised (as in torch.compile): layouts and
 * broadcasting behave differently at those sizes.
 *
 * Lifted tensors (parameters, closed-over constants) are guarded per compiled entry
 * (LiftedGuards): each must still be alive with the same requiresGrad, tensors whose values were
 * folded into the program must keep their storage version, and for root modules (a compiled
 * Module, Modules passed as arguments, `options.modules`) every named parameter/buffer must still
 * be the same tensor object and every submodule's `training` flag unchanged, so replacing
 * `model.weight` by a new Parameter, or switching train/eval, invalidates the entry. Writing new
 * values into a parameter in place does not: parameters are program inputs, read at every call.
 * A lifted tensor's dtype, device, shape and layout are guarded too (`module.to('float64')` swaps
 * them in place, keeping the object). Modules a compiled closure reaches without being given them
 * are found behind its lifted tensors (module-state.ts) and guarded the same way.
 */
import { autocastDtype } from '../api/autocast.js';
import { Module } from '../nn/module.js';
import { isChannelsLastStrides, isContiguousStrides } from '../tensor/layout.js';
import type { Storage } from '../tensor/storage.js';
import { Tensor } from '../tensor/tensor.js';
import type { Graph } from './ir.js';
import { checkSlots, type ModuleState, type StateSlot } from './module-state.js';
import { constKey } from './passes/util.js';

export interface TensorLeaf {
  readonly kind: 'tensor';
  readonly path: string;
  readonly dtype: string;
  readonly device: string;
  /** Concrete sizes of this call. */
  readonly sizes: readonly number[];
  /** Guarded sizes: '?' where the dim is symbolic. */
  readonly guard: readonly (number | '?')[];
  readonly layout: string;
  readonly requiresGrad: boolean;
}

export interface ValueLeaf {
  readonly kind: 'value';
  readonly path: string;
  readonly value: string;
}

export type GuardLeaf = TensorLeaf | ValueLeaf;

export interface ArgGuards {
  readonly leaves: readonly GuardLeaf[];
  /** The cache key: the leaves with symbolic sizes abstracted. */
  readonly key: string;
  /** The leaves with concrete sizes (one symbolic entry holds one trace per concrete key). */
  readonly concreteKey: string;
  /** Modules among the arguments (their parameters are guarded as roots). */
  readonly modules: readonly Module[];
}

/** Which dims are symbolic: every dim (dynamic: true), or a set of `path#dim`. */
export class SymbolicDims {
  private readonly dims = new Set<string>();
  constructor(readonly all = false) {}

  has(path: string, dim: number): boolean {
    return this.all || this.dims.has(`${path}#${dim}`);
  }

  add(path: string, dim: number): void {
    this.dims.add(`${path}#${dim}`);
  }

  get size(): number {
    return this.dims.size;
  }

  list(): string[] {
    return [...this.dims];
  }
}

export function layoutClass(t: { shape: readonly number[]; strides: readonly number[] }): string {
  if (isContiguousStrides(t.shape, t.strides)) return 'contiguous';
  if (t.shape.length === 4 && isChannelsLastStrides(t.shape, t.strides)) return 'channelsLast';
  return `strides(${t.strides.join(',')})`;
}

function isPlainObject(x: unknown): x is Record<string, unknown> {
  return x !== null && typeof x === 'object' && Object.getPrototypeOf(x) === Object.prototype;
}

function pathStr(path: readonly (string | number)[]): string {
  return path.map((p, i) => (typeof p === 'number' ? (i === 0 ? `arg${p}` : `[${p}]`) : `.${p}`)).join('');
}

export function computeArgGuards(args: readonly unknown[], symbolic: SymbolicDims): ArgGuards {
  const leaves: GuardLeaf[] = [];
  const modules: Module[] = [];
  const walk = (x: unknown, path: (string | number)[]): void => {
    if (x instanceof Tensor) {
      const p = pathStr(path);
      const guard = x.shape.map((s, d) => (s >= 2 && symbolic.has(p, d) ? ('?' as const) : s));
      leaves.push({ kind: 'tensor', path: p, dtype: x.dtype, device: x.device.toString(), sizes: x.shape, guard, layout: layoutClass(x), requiresGrad: x.requiresGrad });
      return;
    }
    if (Array.isArray(x)) {
      leaves.push({ kind: 'value', path: pathStr(path), value: `array(${x.length})` });
      x.forEach((e, i) => walk(e, [...path, i]));
      return;
    }
    if (isPlainObject(x)) {
      const keys = Object.keys(x);
      leaves.push({ kind: 'value', path: pathStr(path), value: `object(${keys.map((k) => JSON.stringify(k)).join(',')})` });
      for (const k of keys) walk(x[k], [...path, k]);
      return;
    }
    if (x instanceof Module) modules.push(x);
    leaves.push({ kind: 'value', path: pathStr(path), value: constKey(x) });
  };
  args.forEach((a, i) => walk(a, [i]));
  // Autocast changes which casts the trace records: a program traced under it serves only calls
  // under the same dtype (torch guards on the autocast state too).
  const ac = autocastDtype();
  if (ac !== null) leaves.push({ kind: 'value', path: 'autocast', value: ac });
  const enc = (l: GuardLeaf, concrete: boolean): string =>
    l.kind === 'value'
      ? `${l.path}=${l.value}`
      : `${l.path}:${l.dtype}@${l.device}[${(concrete ? l.sizes : l.guard).join(',')}]${l.layout}${l.requiresGrad ? '+grad' : ''}`;
  return {
    leaves,
    key: `${args.length}|${leaves.map((l) => enc(l, false)).join('|')}`,
    concreteKey: `${args.length}|${leaves.map((l) => enc(l, true)).join('|')}`,
    modules,
  };
}

/** Whether any tensor argument requires grad. */
export function anyRequiresGrad(g: ArgGuards): boolean {
  return g.leaves.some((l) => l.kind === 'tensor' && l.requiresGrad);
}

/**
 * If `next` differs from `prev` only in tensor sizes (both >= 2), the (path, dim) pairs that
 * differ; otherwise null.
 */
export function sizeOnlyDiff(prev: readonly GuardLeaf[], next: readonly GuardLeaf[]): { path: string; dim: number }[] | null {
  if (prev.length !== next.length) return null;
  const dims: { path: string; dim: number }[] = [];
  for (let i = 0; i < prev.length; i++) {
    const a = prev[i]!;
    const b = next[i]!;
    if (a.kind !== b.kind || a.path !== b.path) return null;
    if (a.kind === 'value' || b.kind === 'value') {
      if (a.kind === 'value' && b.kind === 'value' && a.value === b.value) continue;
      return null;
    }
    if (a.dtype !== b.dtype || a.device !== b.device || a.requiresGrad !== b.requiresGrad || a.sizes.length !== b.sizes.length) return null;
    // 'other' layouts carry exact strides, which change with sizes: compare the class only.
    if (a.layout !== b.layout && !(a.layout.startsWith('strides') && b.layout.startsWith('strides'))) return null;
    for (let d = 0; d < a.sizes.length; d++) {
      const x = a.guard[d] === '?' ? '?' : a.sizes[d]!;
      const y = b.sizes[d]!;
      if (x === '?' || x === y) continue;
      if (x < 2 || y < 2) return null;
      dims.push({ path: a.path, dim: d });
    }
  }
  return dims.length > 0 ? dims : null;
}

/** A constKey back in readable form: 'f:4' -> 4, 's:"a"' -> "a". */
function pretty(k: string): string {
  const m = /^[fsb]:(.*)$/.exec(k);
  if (m) return m[1]!;
  return ({ T: 'true', F: 'false', n: 'null', u: 'undefined' } as Record<string, string>)[k] ?? k;
}

/** A readable account of the first guard that differs between two calls (for warnings). */
export function describeGuardChange(prev: readonly GuardLeaf[] | undefined, next: readonly GuardLeaf[]): string {
  if (!prev) return 'no cached entry';
  if (prev.length !== next.length) return `argument structure changed (${prev.length} -> ${next.length} guarded leaves)`;
  for (let i = 0; i < prev.length; i++) {
    const a = prev[i]!;
    const b = next[i]!;
    if (a.kind !== b.kind || a.path !== b.path) return `${b.path}: kind changed`;
    if (a.kind === 'value' && b.kind === 'value') {
      if (a.value !== b.value) return `${b.path}: value ${pretty(a.value)} -> ${pretty(b.value)}`;
      continue;
    }
    if (a.kind === 'tensor' && b.kind === 'tensor') {
      if (a.dtype !== b.dtype) return `${b.path}: dtype ${a.dtype} -> ${b.dtype}`;
      if (a.device !== b.device) return `${b.path}: device ${a.device} -> ${b.device}`;
      if (a.sizes.length !== b.sizes.length) return `${b.path}: rank ${a.sizes.length} -> ${b.sizes.length}`;
      for (let d = 0; d < a.sizes.length; d++) {
        if (a.guard[d] !== '?' && a.sizes[d] !== b.sizes[d]) return `${b.path}: size of dim ${d} ${a.sizes[d]} -> ${b.sizes[d]}`;
      }
      if (a.layout !== b.layout) return `${b.path}: layout ${a.layout} -> ${b.layout}`;
      if (a.requiresGrad !== b.requiresGrad) return `${b.path}: requiresGrad ${a.requiresGrad} -> ${b.requiresGrad}`;
    }
  }
  return 'lifted tensors or module state changed';
}

// ---------------------------------------------------------------------------------------------
// Lifted tensors and root modules

/**
 * A root module's state as a flat list, so the per-call check is a loop of identity comparisons
 * (walking the tree through namedParameters/namedBuffers/modules generators on every call cost
 * about 1-6 ms for Qwen3-0.6B's 340 modules, more than a CUDA-graph decode step): every module
 * under the root with its training flag, and every own property of those modules that holds a
 * module or a tensor (parameters, buffers, submodules, plain tensor properties) with its value.
 * Reassigning any of them, or train()/eval(), fails the check. A property added under a new name
 * does not: the traced program cannot have read it.
 */
interface RootState {
  readonly module: Module;
  readonly modules: readonly Module[];
  readonly training: readonly boolean[];
  readonly owners: readonly Module[];
  readonly keys: readonly string[];
  readonly values: readonly unknown[];
}

/** What a lifted tensor looked like when traced (module.to() changes it in place: setData_). */
interface LiftedState {
  readonly tensor: Tensor;
  readonly requiresGrad: boolean;
  readonly dtype: string;
  readonly device: string;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly offset: number;
}

export interface LiftedGuards {
  readonly lifted: readonly LiftedState[];
  /** Folded constants: the storage they had and its version (a new storage or a write fails). */
  readonly folded: readonly { readonly tensor: Tensor; readonly version: number; readonly storage?: Storage }[];
  readonly roots: readonly RootState[];
  /** Module properties on the way to the lifted tensors (module-state.ts). */
  readonly slots: readonly StateSlot[];
}

function rootState(m: Module): RootState {
  const modules = [...m.modules()];
  const owners: Module[] = [];
  const keys: string[] = [];
  const values: unknown[] = [];
  for (const owner of modules) {
    for (const [k, v] of Object.entries(owner)) {
      if (v instanceof Module || v instanceof Tensor) {
        owners.push(owner);
        keys.push(k);
        values.push(v);
      }
    }
  }
  return { module: m, modules, training: modules.map((x) => x.training), owners, keys, values };
}

/**
 * The lifted guards of a traced graph: its lifted tensors, the folded constants, the given roots
 * (compiled module, module arguments, options.modules) and the module state discovered behind
 * the lifted tensors (`state`, from discoverModuleState).
 */
export function captureLiftedGuards(traced: Graph, folded: LiftedGuards['folded'], roots: readonly Module[], state?: ModuleState): LiftedGuards {
  const lifted = traced.inputs.flatMap((i): LiftedState[] => {
    if (i.source.kind !== 'lifted') return [];
    const t = i.source.tensor;
    return [{ tensor: t, requiresGrad: t.requiresGrad, dtype: t.dtype, device: t.device.toString(), shape: t.shape, strides: t.strides, offset: t.offset }];
  });
  const folds = folded.map((f) => ({ ...f, storage: f.storage ?? f.tensor.storage }));
  return { lifted, folded: folds, roots: [...new Set([...roots, ...(state?.roots ?? [])])].map(rootState), slots: state?.slots ?? [] };
}

const sameList = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** Null when the guards hold, else the reason they fail. */
export function checkLiftedGuards(g: LiftedGuards): string | null {
  for (const l of g.lifted) {
    const t = l.tensor;
    if (t.isDisposed) return `a lifted tensor ${JSON.stringify(l.shape)} was disposed`;
    if (t.requiresGrad !== l.requiresGrad) return `a lifted tensor's requiresGrad changed to ${t.requiresGrad}`;
    if (t.dtype !== l.dtype || t.shape !== l.shape || t.strides !== l.strides || t.offset !== l.offset || t.device.toString() !== l.device) {
      if (t.dtype !== l.dtype) return `a lifted tensor's dtype changed (${l.dtype} -> ${t.dtype})`;
      if (t.device.toString() !== l.device) return `a lifted tensor moved (${l.device} -> ${t.device.toString()})`;
      if (!sameList(t.shape, l.shape)) return `a lifted tensor's shape changed ([${l.shape.join(', ')}] -> [${t.shape.join(', ')}])`;
      if (!sameList(t.strides, l.strides) || t.offset !== l.offset) return `a lifted tensor's layout changed`;
    }
  }
  for (const f of g.folded) {
    if (f.tensor.storage !== f.storage || f.tensor.storage.version !== f.version) return `a constant folded into the program was written in place`;
  }
  const slot = checkSlots(g.slots);
  if (slot) return slot;
  for (const r of g.roots) {
    for (let i = 0; i < r.owners.length; i++) {
      const owner = r.owners[i]!;
      if ((owner as unknown as Record<string, unknown>)[r.keys[i]!] !== r.values[i]) return owner === r.module ? `${owner.constructor.name}.${r.keys[i]} was replaced` : `${owner.constructor.name}.${r.keys[i]} (under ${r.module.constructor.name}) was replaced`;
    }
    for (let i = 0; i < r.modules.length; i++) if (r.modules[i]!.training !== r.training[i]) return `${r.module.constructor.name}: training mode changed`;
  }
  return null;
}

/** Whether grad mode would need to record through a lifted tensor. */
export function liftedRequireGrad(g: LiftedGuards): boolean {
  return g.lifted.some((l) => l.requiresGrad);
}
