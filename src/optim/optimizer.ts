/**
 * Optimizer base (torch.optim.Optimizer): parameter groups with per-group options, per-parameter
 * state, zeroGrad and state dicts. Subclasses implement `update()`, which runs under noGrad and
 * writes the parameters in place so that module references to them stay valid.
 */
import { enableGrad, noGrad } from '../autograd/index.js';
import { fmtShape, shapeEquals } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';
import { keep, scope } from '../tensor/scope.js';

/** Options every optimizer has. */
export interface BaseOptions {
  lr: number;
}

/** One parameter group: its parameters and its options (mutable, as torch's param_groups dicts). */
export type ParamGroup<O extends BaseOptions> = O & {
  params: Tensor[];
  /** Set by LR schedulers: the lr the schedule is relative to. */
  initialLr?: number;
};

/** What a user passes for a group: parameters plus any options to override. */
export type ParamGroupInput<O extends BaseOptions> = Partial<O> & { params: Iterable<Tensor> };

export type ParamsInput<O extends BaseOptions> = Iterable<Tensor> | readonly ParamGroupInput<O>[];

/** Per-parameter state: tensors (moment buffers) and numbers (step counts). */
export type ParamState = Record<string, Tensor | number>;

export interface OptimizerStateDict<O extends BaseOptions> {
  /** State by parameter index (the order of parameters across groups). */
  state: Record<number, ParamState>;
  paramGroups: (O & { params: number[]; initialLr?: number })[];
}

export abstract class Optimizer<O extends BaseOptions = BaseOptions> {
  readonly paramGroups: ParamGroup<O>[] = [];
  readonly state = new Map<Tensor, ParamState>();

  constructor(
    params: ParamsInput<O>,
    readonly defaults: O,
    protected readonly name: string,
  ) {
    const list = [...(params as Iterable<Tensor | ParamGroupInput<O>>)];
    if (list.length === 0) throw new Error(`${name}: got an empty parameter list`);
    if (list.every((p) => p instanceof Tensor)) this.addParamGroup({ params: list as Tensor[] } as unknown as ParamGroupInput<O>);
    else if (list.every((p) => !(p instanceof Tensor) && typeof p === 'object' && p !== null && 'params' in p)) {
      for (const g of list as ParamGroupInput<O>[]) this.addParamGroup(g);
    } else throw new TypeError(`${name}: params must be tensors or parameter groups ({ params, ...options }), not a mix`);
  }

  /** Adds a group; options it leaves out take the optimizer's defaults. */
  addParamGroup(group: ParamGroupInput<O>): void {
    const params = [...group.params];
    for (const p of params) {
      if (!(p instanceof Tensor)) throw new TypeError(`${this.name}: a parameter group holds something that is not a Tensor`);
      if (p.gradFn !== null) throw new Error(`${this.name}: can't optimize a non-leaf tensor ${fmtShape(p.shape)}`);
    }
    const seen = new Set<Tensor>();
    for (const g of this.paramGroups) for (const p of g.params) seen.add(p);
    const local = new Set<Tensor>();
    for (const p of params) {
      if (seen.has(p)) throw new Error(`${this.name}: some parameters appear in more than one parameter group`);
      if (local.has(p)) throw new Error(`${this.name}: a parameter group contains the same parameter twice`);
      local.add(p);
    }
    const merged = { ...this.defaults, ...group, params } as ParamGroup<O>;
    this.validate(merged);
    this.paramGroups.push(merged);
  }

  /** Checks a group's options (subclasses throw on bad values). */
  protected validate(group: ParamGroup<O>): void {
    if (!(group.lr >= 0)) throw new Error(`${this.name}: invalid learning rate: ${group.lr}`);
  }

  /** Clears the gradients: to null (default, as torch), or to zeros in place. */
  zeroGrad(setToNone = true): void {
    noGrad(() => {
      for (const g of this.paramGroups) {
        for (const p of g.params) {
          if (p.grad === null) continue;
          if (setToNone) {
            // Gradients are created and owned by autograd: release their memory now rather than
            // when the garbage collector gets to them, so training loops stay flat.
            p.grad.dispose();
            p.grad = null;
          } else p.grad.zero_();
        }
      }
    });
  }

  /**
   * One update of every parameter that has a gradient. `closure`, if given, is run first with
   * gradients enabled (it should zero the grads, compute the loss and call backward) and its
   * result is returned.
   */
  step<T = undefined>(closure?: () => T): T | undefined {
    const result = closure ? enableGrad(closure) : undefined;
    // Temporaries of the update are released when it ends; state tensors are created with keep().
    scope(() =>
      noGrad(() => {
        for (const group of this.paramGroups) this.update(group);
      }),
    );
    return result;
  }

  protected abstract update(group: ParamGroup<O>): void;

  protected stateOf(p: Tensor): ParamState {
    let s = this.state.get(p);
    if (!s) {
      s = {};
      this.state.set(p, s);
    }
    return s;
  }

  /** Options of every group with parameters replaced by their indices, and the state by index. */
  stateDict(): OptimizerStateDict<O> {
    const index = new Map<Tensor, number>();
    const paramGroups = this.paramGroups.map((g) => {
      const ids = g.params.map((p) => {
        if (!index.has(p)) index.set(p, index.size);
        return index.get(p)!;
      });
      return { ...g, params: ids } as O & { params: number[] };
    });
    const state: Record<number, ParamState> = {};
    for (const [p, s] of this.state) {
      const i = index.get(p);
      if (i !== undefined) state[i] = { ...s };
    }
    return { state, paramGroups };
  }

  /** Restores options and state (state tensors are copied, cast to each parameter's dtype and device). */
  loadStateDict(sd: OptimizerStateDict<O>): void {
    if (sd.paramGroups.length !== this.paramGroups.length) {
      throw new Error(`${this.name}.loadStateDict: loaded state dict has ${sd.paramGroups.length} parameter groups, the optimizer has ${this.paramGroups.length}`);
    }
    sd.paramGroups.forEach((g, i) => {
      const own = this.paramGroups[i]!;
      if (g.params.length !== own.params.length) {
        throw new Error(`${this.name}.loadStateDict: parameter group ${i} has ${g.params.length} parameters in the state dict, ${own.params.length} in the optimizer`);
      }
    });
    const byIndex = new Map<number, Tensor>();
    sd.paramGroups.forEach((g, i) => g.params.forEach((id, j) => byIndex.set(id, this.paramGroups[i]!.params[j]!)));
    this.state.clear();
    noGrad(() => {
      for (const [key, s] of Object.entries(sd.state)) {
        const p = byIndex.get(Number(key));
        if (!p) continue;
        const copy: ParamState = {};
        for (const [k, v] of Object.entries(s)) {
          if (!(v instanceof Tensor)) copy[k] = v;
          else {
            if (v.ndim > 0 && !shapeEquals(v.shape, p.shape)) {
              throw new Error(`${this.name}.loadStateDict: state '${k}' of parameter ${key} has shape ${fmtShape(v.shape)}, the parameter ${fmtShape(p.shape)}`);
            }
            copy[k] = keep(v.to({ dtype: p.dtype, device: p.device, copy: true }));
          }
        }
        this.state.set(p, copy);
      }
    });
    sd.paramGroups.forEach((g, i) => {
      const own = this.paramGroups[i]!;
      const { params: _ids, ...opts } = g;
      Object.assign(own, opts);
    });
  }
}
