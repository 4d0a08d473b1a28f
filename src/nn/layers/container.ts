/**
 * Sequential and ModuleList. Children are stored as own properties named '0', '1', ... so that
 * parameter names read `layers.0.weight` as in PyTorch; both are indexable (`seq[0]`, negative
 * indices through `at`), iterable and have a `length`.
 */
import type { Tensor } from '../../tensor/tensor.js';
import { Module } from '../module.js';

/** A module with a one-tensor forward, as Sequential chains them. */
export interface ForwardModule extends Module {
  forward(x: Tensor): Tensor;
}

function hasForward(m: Module): m is ForwardModule {
  return typeof (m as unknown as { forward?: unknown }).forward === 'function';
}

function checkModule(owner: string, m: unknown, i: number): Module {
  if (!(m instanceof Module)) throw new TypeError(`${owner}: item ${i} is not a Module (got ${m === null ? 'null' : typeof m})`);
  return m;
}

abstract class IndexedModules<M extends Module> extends Module {
  [index: number]: M;
  protected abstract readonly owner: string;

  get length(): number {
    let n = 0;
    while ((this as Record<number, unknown>)[n] instanceof Module) n++;
    return n;
  }

  protected push(m: M): void {
    (this as Record<number, M>)[this.length] = m;
  }

  /** The i-th module; negative i counts from the end. */
  at(i: number): M {
    const n = this.length;
    const j = i < 0 ? i + n : i;
    if (!Number.isInteger(i) || j < 0 || j >= n) throw new RangeError(`${this.owner}: index ${i} is out of range for ${n} modules`);
    return this[j]!;
  }

  *[Symbol.iterator](): Iterator<M> {
    const n = this.length;
    for (let i = 0; i < n; i++) yield this[i]!;
  }
}

/** Chains modules: forward(x) = m_{n-1}(... m_1(m_0(x))). */
export class Sequential extends IndexedModules<Module> {
  protected readonly owner = 'Sequential';

  constructor(...modules: Module[]) {
    super();
    modules.forEach((m, i) => {
      checkModule('Sequential', m, i);
      if (!hasForward(m)) throw new TypeError(`Sequential: item ${i} (${m.constructor.name}) has no forward method`);
      this.push(m);
    });
  }

  append(m: ForwardModule): this {
    checkModule('Sequential', m, this.length);
    this.push(m);
    return this;
  }

  forward(x: Tensor): Tensor {
    let y = x;
    for (const m of this) y = (m as ForwardModule).forward(y);
    return y;
  }
}

/** A list of modules registered as children (torch.nn.ModuleList); no forward of its own. */
export class ModuleList<M extends Module = Module> extends IndexedModules<M> {
  protected readonly owner = 'ModuleList';

  constructor(modules: Iterable<M> = []) {
    super();
    this.extend(modules);
  }

  append(m: M): this {
    checkModule('ModuleList', m, this.length);
    this.push(m);
    return this;
  }

  extend(modules: Iterable<M>): this {
    for (const m of modules) this.append(m);
    return this;
  }
}
