/**
 * Module and Parameter, shaped like torch.nn. A Module finds its parameters, buffers and children
 * by walking its own properties in insertion order (so `this.weight = new Parameter(...)` and
 * `this.fc1 = new Linear(...)` register themselves, as in PyTorch); buffers are registered with
 * registerBuffer so that plain tensor properties (caches, constants) are not mistaken for state.
 *
 * Modules are called as `m.forward(x)`, not `m(x)`. A callable instance would have to be a function
 * object or a Proxy returned from the constructor: subclass fields and `this` in constructors would
 * then land on a different object than the one returned, Object.entries (how parameters are found)
 * would see function internals, and every property access of a hot forward would go through a
 * trap; TypeScript also cannot give a class's instances a call signature without declaration
 * merging per subclass. `forward` with its precise per-module signature is the typed form.
 */
import { copy_ } from '../api/core.js';
import { noGrad } from '../autograd/index.js';
import type { DeviceLike } from '../runtime/device.js';
import { Device } from '../runtime/device.js';
import type { DType } from '../tensor/dtype.js';
import { isDType, isFloating } from '../tensor/dtype.js';
import { fmtShape, shapeEquals } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';
import { trackModule } from './module-registry.js';

/** A tensor that is a module's learnable parameter (requires grad by default). */
export class Parameter extends Tensor {
  constructor(data: Tensor, requiresGrad = true) {
    super(data.storage, data.dtype, data.shape, data.strides, data.offset);
    if (requiresGrad && !isFloating(data.dtype)) {
      throw new Error(`Parameter: only floating point tensors can require gradients, got ${data.dtype} ${fmtShape(data.shape)}`);
    }
    this.requiresGrad = requiresGrad;
  }
}

export interface LoadResult {
  missingKeys: string[];
  unexpectedKeys: string[];
}

export abstract class Module {
  training = true;
  private readonly bufferNames = new Set<string>();
  private readonly nonPersistent = new Set<string>();

  constructor() {
    // Weakly: kiln.compile finds the modules behind the tensors a compiled closure reads.
    trackModule(this);
  }

  /** Registers (or replaces) a buffer: state that is saved but not trained (running stats). */
  registerBuffer(name: string, value: Tensor | null, persistent = true): void {
    this.bufferNames.add(name);
    if (!persistent) this.nonPersistent.add(name);
    else this.nonPersistent.delete(name);
    (this as unknown as Record<string, unknown>)[name] = value;
  }

  private ownEntries(): [string, unknown][] {
    return Object.entries(this).filter(([k]) => k !== 'training' && k !== 'bufferNames' && k !== 'nonPersistent');
  }

  *namedChildren(): Generator<[string, Module]> {
    for (const [k, v] of this.ownEntries()) if (v instanceof Module) yield [k, v];
  }

  *children(): Generator<Module> {
    for (const [, m] of this.namedChildren()) yield m;
  }

  *namedModules(prefix = ''): Generator<[string, Module]> {
    yield [prefix, this];
    for (const [k, m] of this.namedChildren()) yield* m.namedModules(prefix ? `${prefix}.${k}` : k);
  }

  *modules(): Generator<Module> {
    for (const [, m] of this.namedModules()) yield m;
  }

  *namedParameters(prefix = '', recurse = true): Generator<[string, Parameter]> {
    const seen = new Set<Tensor>();
    for (const [mp, m] of recurse ? this.namedModules(prefix) : ([[prefix, this]] as [string, Module][])) {
      for (const [k, v] of m.ownEntries()) {
        if (v instanceof Parameter && !seen.has(v)) {
          seen.add(v);
          yield [mp ? `${mp}.${k}` : k, v];
        }
      }
    }
  }

  *parameters(recurse = true): Generator<Parameter> {
    for (const [, p] of this.namedParameters('', recurse)) yield p;
  }

  *namedBuffers(prefix = '', recurse = true): Generator<[string, Tensor]> {
    for (const [mp, m] of recurse ? this.namedModules(prefix) : ([[prefix, this]] as [string, Module][])) {
      for (const name of m.bufferNames) {
        const v = (m as unknown as Record<string, unknown>)[name];
        if (v instanceof Tensor) yield [mp ? `${mp}.${name}` : name, v];
      }
    }
  }

  *buffers(recurse = true): Generator<Tensor> {
    for (const [, b] of this.namedBuffers('', recurse)) yield b;
  }

  train(mode = true): this {
    for (const m of this.modules()) m.training = mode;
    return this;
  }

  eval(): this {
    return this.train(false);
  }

  /** Parameters and persistent buffers by dotted name (torch's state_dict). */
  stateDict(): Record<string, Tensor> {
    const out: Record<string, Tensor> = {};
    for (const [name, m] of this.namedModules()) {
      for (const [k, v] of m.ownEntries()) if (v instanceof Parameter) out[name ? `${name}.${k}` : k] = v;
      for (const b of m.bufferNames) {
        const v = (m as unknown as Record<string, unknown>)[b];
        if (v instanceof Tensor && !m.nonPersistent.has(b)) out[name ? `${name}.${b}` : b] = v;
      }
    }
    return out;
  }

  /**
   * Copies values from `state` into this module's parameters and buffers (shapes must match;
   * dtypes and devices are converted). strict: missing or unexpected keys are an error.
   */
  loadStateDict(state: Record<string, Tensor>, options: { strict?: boolean } = {}): LoadResult {
    const strict = options.strict ?? true;
    const own = this.stateDict();
    const missingKeys = Object.keys(own).filter((k) => !(k in state));
    const unexpectedKeys = Object.keys(state).filter((k) => !(k in own));
    if (strict && (missingKeys.length > 0 || unexpectedKeys.length > 0)) {
      throw new Error(
        `loadStateDict: ${missingKeys.length ? `missing keys: ${missingKeys.join(', ')}` : ''}` +
          `${missingKeys.length && unexpectedKeys.length ? '; ' : ''}${unexpectedKeys.length ? `unexpected keys: ${unexpectedKeys.join(', ')}` : ''}`,
      );
    }
    noGrad(() => {
      for (const [k, dst] of Object.entries(own)) {
        const src = state[k];
        if (!src) continue;
        if (!shapeEquals(src.shape, dst.shape)) {
          throw new Error(`loadStateDict: size mismatch for '${k}': checkpoint has ${fmtShape(src.shape)}, the module has ${fmtShape(dst.shape)}`);
        }
        copy_(dst, src.dtype === dst.dtype ? src : src.to(dst.dtype));
      }
    });
    return { missingKeys, unexpectedKeys };
  }

  /** Moves or casts every parameter and buffer (floating ones only for a dtype), in place; gradients are cleared. */
  to(target: DType | DeviceLike): this {
    const dtype = typeof target === 'string' && isDType(target) ? target : undefined;
    const device = dtype ? undefined : Device.from(target as DeviceLike);
    for (const m of this.modules()) {
      for (const [k, v] of m.ownEntries()) {
        if (!(v instanceof Tensor)) continue;
        const isParam = v instanceof Parameter;
        if (!isParam && !m.bufferNames.has(k)) continue;
        if (dtype && !isFloating(v.dtype)) continue;
        const moved = noGrad(() => (dtype ? v.to(dtype) : v.to(device!)));
        if (moved === v) continue;
        // Swap the data in place (like torch's param.data = ...), so optimizers and tied
        // references that hold this Parameter see the moved tensor.
        v.setData_(moved);
        moved.dispose();
        if (v.grad) v.grad = null;
      }
    }
    return this;
  }

  /** Clears .grad of every parameter, releasing the gradients' memory (autograd owns them). */
  zeroGrad(): void {
    for (const p of this.parameters()) {
      p.grad?.dispose();
      p.grad = null;
    }
  }

  /** Calls fn on every module (children first), like torch's Module.apply. */
  apply(fn: (m: Module) => void): this {
    for (const c of this.children()) c.apply(fn);
    fn(this);
    return this;
  }

  numParameters(): number {
    let n = 0;
    for (const p of this.parameters()) n += p.numel();
    return n;
  }
}
