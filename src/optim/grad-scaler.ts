/**
 * Loss scaling for float16 training (torch.amp.GradScaler). float16 gradients underflow where
 * float32 ones would not, so the loss is multiplied by a large scale before backward and the
 * gradients divided by it before the optimizer step. The scale adapts, with torch's algorithm
 * (_amp_update_scale_):
 *
 * - unscale_(opt): every gradient of the optimizer's parameters is multiplied by 1 / scale (in
 *   place) and checked for inf/NaN; at most once per optimizer between updates.
 * - step(opt): unscale_ if not done yet, then opt.step() only if no gradient was inf/NaN (the step
 *   is skipped otherwise).
 * - update(): if any unscaled gradient was inf/NaN, scale *= backoffFactor and the growth tracker
 *   restarts at 0; otherwise the tracker counts the clean step, and at growthInterval consecutive
 *   clean steps scale *= growthFactor and the tracker restarts. update(newScale) sets it instead.
 *
 * The scale is a JS number (checking for inf/NaN reads one number per gradient back anyway). With
 * `enabled: false` every method is a pass-through, so one loop serves both precisions.
 */
import { noGrad } from '../autograd/index.js';
import { isfinite, logicalNot } from '../api/pointwise.js';
import { any } from '../api/reduction.js';
import type { Tensor } from '../tensor/tensor.js';
import type { BaseOptions, Optimizer } from './optimizer.js';

export interface GradScalerOptions {
  /** Default 2^16. */
  initScale?: number;
  /** Default 2. */
  growthFactor?: number;
  /** Default 0.5. */
  backoffFactor?: number;
  /** Consecutive steps without inf/NaN gradients before the scale grows. Default 2000. */
  growthInterval?: number;
  /** Default true. */
  enabled?: boolean;
}

export interface GradScalerState {
  scale: number;
  growthFactor: number;
  backoffFactor: number;
  growthInterval: number;
  growthTracker: number;
}

interface PerOptimizer {
  unscaled: boolean;
  stepped: boolean;
  foundInf: boolean;
}

export class GradScaler {
  private scaleValue: number;
  readonly growthFactor: number;
  readonly backoffFactor: number;
  readonly growthInterval: number;
  private readonly enabled: boolean;
  private growthTracker = 0;
  private perOptimizer = new Map<Optimizer<BaseOptions>, PerOptimizer>();

  constructor(options: GradScalerOptions = {}) {
    this.scaleValue = options.initScale ?? 2 ** 16;
    this.growthFactor = options.growthFactor ?? 2;
    this.backoffFactor = options.backoffFactor ?? 0.5;
    this.growthInterval = options.growthInterval ?? 2000;
    this.enabled = options.enabled ?? true;
    if (!(this.scaleValue > 0)) throw new Error(`GradScaler: initScale must be positive, got ${this.scaleValue}`);
    if (!(this.growthFactor > 1)) throw new Error(`GradScaler: growthFactor must be > 1, got ${this.growthFactor}`);
    if (!(this.backoffFactor > 0 && this.backoffFactor < 1)) throw new Error(`GradScaler: backoffFactor must be in (0, 1), got ${this.backoffFactor}`);
    if (!(Number.isInteger(this.growthInterval) && this.growthInterval > 0)) throw new Error(`GradScaler: growthInterval must be a positive integer, got ${this.growthInterval}`);
  }

  isEnabled(): boolean {
    return this.enabled;
  }

  /** The current scale (1 when disabled). */
  getScale(): number {
    return this.enabled ? this.scaleValue : 1;
  }

  /** Consecutive clean steps since the scale last changed. */
  getGrowthTracker(): number {
    return this.growthTracker;
  }

  /** `outputs * scale` (a tensor or each of a list). */
  scale<T extends Tensor | readonly Tensor[]>(outputs: T): T {
    if (!this.enabled) return outputs;
    const s = this.scaleValue;
    return (Array.isArray(outputs) ? (outputs as readonly Tensor[]).map((t) => t.mul(s)) : (outputs as Tensor).mul(s)) as T;
  }

  private stateOf(opt: Optimizer<BaseOptions>): PerOptimizer {
    let st = this.perOptimizer.get(opt);
    if (!st) this.perOptimizer.set(opt, (st = { unscaled: false, stepped: false, foundInf: false }));
    return st;
  }

  /** Divides the optimizer's gradients by the scale in place and records whether any is inf/NaN. */
  unscale_(optimizer: Optimizer<BaseOptions>): void {
    if (!this.enabled) return;
    const st = this.stateOf(optimizer);
    if (st.unscaled) throw new Error('GradScaler.unscale_: unscale_() has already been called on this optimizer since the last update()');
    if (st.stepped) throw new Error('GradScaler.unscale_: unscale_() is being called after step()');
    const inv = 1 / this.scaleValue;
    noGrad(() => {
      for (const g of optimizer.paramGroups) {
        for (const p of g.params) {
          if (!p.grad) continue;
          p.grad.mul_(inv);
          if (!st.foundInf && (any(logicalNot(isfinite(p.grad))).item() as boolean)) st.foundInf = true;
        }
      }
    });
    st.unscaled = true;
  }

  /** Unscales if needed, then runs optimizer.step() unless a gradient was inf/NaN. Returns whether it stepped. */
  step(optimizer: Optimizer<BaseOptions>): boolean {
    if (!this.enabled) {
      optimizer.step();
      return true;
    }
    const st = this.stateOf(optimizer);
    if (st.stepped) throw new Error('GradScaler.step: step() has already been called since the last update()');
    if (!st.unscaled) this.unscale_(optimizer);
    st.stepped = true;
    if (st.foundInf) return false;
    optimizer.step();
    return true;
  }

  /** Adapts the scale after this iteration's steps (or sets it to `newScale`). */
  update(newScale?: number): void {
    if (!this.enabled) return;
    if (newScale !== undefined) {
      if (!(newScale > 0)) throw new Error(`GradScaler.update: newScale must be positive, got ${newScale}`);
      this.scaleValue = newScale;
    } else {
      const states = [...this.perOptimizer.values()];
      if (states.length === 0 || !states.some((s) => s.unscaled)) throw new Error('GradScaler.update: no inf checks were recorded prior to update() (call step or unscale_ first)');
      if (states.some((s) => s.foundInf)) {
        this.scaleValue *= this.backoffFactor;
        this.growthTracker = 0;
      } else if (this.growthTracker + 1 === this.growthInterval) {
        this.scaleValue *= this.growthFactor;
        this.growthTracker = 0;
      } else {
        this.growthTracker++;
      }
    }
    this.perOptimizer = new Map();
  }

  stateDict(): GradScalerState {
    return { scale: this.scaleValue, growthFactor: this.growthFactor, backoffFactor: this.backoffFactor, growthInterval: this.growthInterval, growthTracker: this.growthTracker };
  }

  loadStateDict(state: GradScalerState): void {
    this.scaleValue = state.scale;
    this.growthTracker = state.growthTracker;
  }
}
