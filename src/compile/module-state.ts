/**
 * Which module state a traced function read, found after the trace (JS has no way to watch a
 * closure read `model.fc.weight`). For every real tensor the trace lifted, the live modules
 * (nn/module-registry.ts) that hold it as a property are its owners; their parents, up to the
 * top-most module, are found the same way. The result:
 *
 * - slots: each (holder, key, value) on the way from a top module down to a lifted tensor. A
 *   slot whose property no longer holds the same object (`model.fc = new Linear(...)`,
 *   `model.fc.weight = new Parameter(...)`, a plain tensor property reassigned) fails the
 *   entry's guards, so the function is traced again instead of running the stale program;
 * - roots: the top-most modules, guarded like a compiled Module (every parameter/buffer by
 *   identity, every training flag), so a closure over a model behaves like `kiln.compile(model)`;
 * - owned: the lifted tensors some module holds. The others are captured constants, which
 *   kiln.compile cannot guard and warns about (captured-warning.ts).
 */
import { Module } from '../nn/module.js';
import { liveModules } from '../nn/module-registry.js';
import { Tensor } from '../tensor/tensor.js';

/** A property that must still hold `value` for a compiled entry to stay valid. */
export interface StateSlot {
  readonly holder: object;
  readonly key: string;
  readonly value: unknown;
}

export interface ModuleState {
  readonly slots: readonly StateSlot[];
  readonly roots: readonly Module[];
  readonly owned: ReadonlySet<Tensor>;
}

const EMPTY: ModuleState = { slots: [], roots: [], owned: new Set() };

/** The module state behind `tensors` (one pass over the live modules' own properties). */
export function discoverModuleState(tensors: readonly Tensor[]): ModuleState {
  if (tensors.length === 0) return EMPTY;
  const wanted = new Set(tensors);
  const owners: StateSlot[] = [];
  const parents = new Map<Module, StateSlot[]>();
  for (const m of liveModules()) {
    for (const [key, value] of Object.entries(m)) {
      if (value instanceof Tensor && wanted.has(value)) owners.push({ holder: m, key, value });
      else if (value instanceof Module) {
        let ps = parents.get(value);
        if (!ps) parents.set(value, (ps = []));
        ps.push({ holder: m, key, value });
      }
    }
  }
  if (owners.length === 0) return EMPTY;
  const slots = [...owners];
  const roots = new Set<Module>();
  const seen = new Set<Module>();
  const up = (m: Module): void => {
    if (seen.has(m)) return;
    seen.add(m);
    const ps = parents.get(m);
    if (!ps) {
      roots.add(m);
      return;
    }
    for (const p of ps) {
      slots.push(p);
      up(p.holder as Module);
    }
  };
  for (const o of owners) up(o.holder as Module);
  return { slots, roots: [...roots], owned: new Set(owners.map((o) => o.value as Tensor)) };
}

/** Null when every slot still holds its value, else which property was reassigned. */
export function checkSlots(slots: readonly StateSlot[]): string | null {
  for (const s of slots) {
    if ((s.holder as Record<string, unknown>)[s.key] !== s.value) return `${s.holder.constructor.name}.${s.key} was reassigned`;
  }
  return null;
}
