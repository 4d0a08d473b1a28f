/** ModuleList: children registered under '0', '1', ... (so parameter names read `layers.0.x`). */
import { Module } from '../nn/module.js';

export class ModuleList<M extends Module = Module> extends Module {
  private count = 0;

  constructor(modules: Iterable<M> = []) {
    super();
    for (const m of modules) this.push(m);
  }

  push(m: M): this {
    (this as unknown as Record<string, unknown>)[String(this.count++)] = m;
    return this;
  }

  get length(): number {
    return this.count;
  }

  at(i: number): M {
    const j = i < 0 ? i + this.count : i;
    if (!Number.isInteger(j) || j < 0 || j >= this.count) throw new RangeError(`ModuleList: index ${i} out of range for ${this.count} modules`);
    return (this as unknown as Record<string, M>)[String(j)]!;
  }

  *[Symbol.iterator](): Iterator<M> {
    for (let i = 0; i < this.count; i++) yield this.at(i);
  }
}
