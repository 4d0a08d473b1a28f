/**
 * Learning-rate schedulers (torch.optim.lr_scheduler), each a closed form lr(t) of the step count
 * t = lastEpoch relative to every group's initial lr. Construction applies t = 0; each `step()`
 * advances t by one and writes the new lr into the optimizer's groups.
 */
import type { BaseOptions, Optimizer } from './optimizer.js';

export interface SchedulerStateDict {
  lastEpoch: number;
  baseLrs: number[];
}

export abstract class LRScheduler {
  lastEpoch: number;
  readonly baseLrs: number[];
  private lastLr: number[] = [];

  constructor(
    readonly optimizer: Optimizer<BaseOptions>,
    lastEpoch = -1,
  ) {
    const groups = optimizer.paramGroups;
    if (lastEpoch === -1) {
      for (const g of groups) if (g.initialLr === undefined) g.initialLr = g.lr;
    } else {
      groups.forEach((g, i) => {
        if (g.initialLr === undefined) throw new Error(`${this.constructor.name}: param 'initialLr' is not specified in paramGroups[${i}] when resuming an optimizer (lastEpoch ${lastEpoch})`);
      });
    }
    this.baseLrs = groups.map((g) => g.initialLr!);
    this.lastEpoch = lastEpoch;
  }

  /** The lr of group i at step t (closed form). */
  protected abstract lrAt(t: number, baseLr: number, group: number): number;

  /** Subclasses call this at the end of their constructor (the initial step to t = lastEpoch + 1). */
  protected initialStep(): void {
    this.step();
  }

  /** Advances one step (or jumps to `epoch`) and sets every group's lr. */
  step(epoch?: number): void {
    this.lastEpoch = epoch ?? this.lastEpoch + 1;
    this.lastLr = this.optimizer.paramGroups.map((g, i) => {
      const lr = this.lrAt(this.lastEpoch, this.baseLrs[i]!, i);
      g.lr = lr;
      return lr;
    });
  }

  /** The lrs set by the last step, one per group. */
  getLastLr(): number[] {
    return [...this.lastLr];
  }

  stateDict(): SchedulerStateDict {
    return { lastEpoch: this.lastEpoch, baseLrs: [...this.baseLrs] };
  }

  loadStateDict(sd: SchedulerStateDict): void {
    if (sd.baseLrs.length !== this.baseLrs.length) throw new Error(`${this.constructor.name}.loadStateDict: ${sd.baseLrs.length} base lrs for ${this.baseLrs.length} parameter groups`);
    this.baseLrs.splice(0, this.baseLrs.length, ...sd.baseLrs);
    this.lastEpoch = sd.lastEpoch - 1;
    this.step();
  }
}

export type LrLambda = (t: number) => number;

/** lr = baseLr * lrLambda(t) (one function, or one per group). */
export class LambdaLR extends LRScheduler {
  private readonly lambdas: LrLambda[];

  constructor(optimizer: Optimizer<BaseOptions>, lrLambda: LrLambda | readonly LrLambda[], lastEpoch = -1) {
    super(optimizer, lastEpoch);
    const n = optimizer.paramGroups.length;
    if (typeof lrLambda !== 'function' && lrLambda.length !== n) throw new Error(`LambdaLR: expected ${n} lrLambdas, got ${lrLambda.length}`);
    this.lambdas = typeof lrLambda === 'function' ? new Array<LrLambda>(n).fill(lrLambda) : [...lrLambda];
    this.initialStep();
  }

  protected lrAt(t: number, baseLr: number, group: number): number {
    return baseLr * this.lambdas[group]!(t);
  }
}

/** lr = baseLr * gamma^floor(t / stepSize). */
export class StepLR extends LRScheduler {
  constructor(
    optimizer: Optimizer<BaseOptions>,
    readonly stepSize: number,
    readonly gamma = 0.1,
    lastEpoch = -1,
  ) {
    super(optimizer, lastEpoch);
    if (!(Number.isInteger(stepSize) && stepSize > 0)) throw new Error(`StepLR: stepSize must be a positive integer, got ${stepSize}`);
    this.initialStep();
  }

  protected lrAt(t: number, baseLr: number): number {
    return baseLr * this.gamma ** Math.floor(t / this.stepSize);
  }
}

/** lr = baseLr * (startFactor + (endFactor - startFactor) * min(t, totalIters) / totalIters). */
export class LinearLR extends LRScheduler {
  constructor(
    optimizer: Optimizer<BaseOptions>,
    readonly startFactor = 1 / 3,
    readonly endFactor = 1,
    readonly totalIters = 5,
    lastEpoch = -1,
  ) {
    super(optimizer, lastEpoch);
    if (!(startFactor > 0 && startFactor <= 1)) throw new Error(`LinearLR: startFactor must be in (0, 1], got ${startFactor}`);
    if (!(endFactor >= 0 && endFactor <= 1)) throw new Error(`LinearLR: endFactor must be in [0, 1], got ${endFactor}`);
    if (!(Number.isInteger(totalIters) && totalIters > 0)) throw new Error(`LinearLR: totalIters must be a positive integer, got ${totalIters}`);
    this.initialStep();
  }

  protected lrAt(t: number, baseLr: number): number {
    return baseLr * (this.startFactor + ((this.endFactor - this.startFactor) * Math.min(t, this.totalIters)) / this.totalIters);
  }
}

/** lr = etaMin + (baseLr - etaMin) (1 + cos(pi t / tMax)) / 2. */
export class CosineAnnealingLR extends LRScheduler {
  constructor(
    optimizer: Optimizer<BaseOptions>,
    readonly tMax: number,
    readonly etaMin = 0,
    lastEpoch = -1,
  ) {
    super(optimizer, lastEpoch);
    if (!(tMax > 0)) throw new Error(`CosineAnnealingLR: tMax must be positive, got ${tMax}`);
    this.initialStep();
  }

  protected lrAt(t: number, baseLr: number): number {
    return this.etaMin + ((baseLr - this.etaMin) * (1 + Math.cos((Math.PI * t) / this.tMax))) / 2;
  }
}

export interface WarmupCosineOptions {
  /** Steps of linear warmup from startFactor * baseLr up to baseLr. */
  warmupSteps: number;
  /** Step at which the cosine reaches its minimum (it stays there afterwards). */
  totalSteps: number;
  /** Final lr as an absolute value (default 0)... */
  minLr?: number;
  /** ...or as a fraction of each group's base lr (takes precedence over minLr). */
  minLrRatio?: number;
  /** lr factor at t = 0 (default 0, so the first step has lr 0 as in HF transformers' schedule). */
  startFactor?: number;
}

/**
 * The usual LLM schedule. t < warmupSteps: baseLr * (startFactor + (1 - startFactor) t / warmupSteps);
 * then minLr + (baseLr - minLr) (1 + cos(pi p)) / 2 with p = min(1, (t - warmupSteps) / (totalSteps - warmupSteps)).
 */
export class WarmupCosineLR extends LRScheduler {
  readonly warmupSteps: number;
  readonly totalSteps: number;
  readonly startFactor: number;
  private readonly minLrs: number[];

  constructor(optimizer: Optimizer<BaseOptions>, options: WarmupCosineOptions, lastEpoch = -1) {
    super(optimizer, lastEpoch);
    const { warmupSteps, totalSteps } = options;
    if (!(Number.isInteger(warmupSteps) && warmupSteps >= 0)) throw new Error(`WarmupCosineLR: warmupSteps must be a non-negative integer, got ${warmupSteps}`);
    if (!(Number.isInteger(totalSteps) && totalSteps > warmupSteps)) {
      throw new Error(`WarmupCosineLR: totalSteps (${totalSteps}) must be an integer greater than warmupSteps (${warmupSteps})`);
    }
    this.warmupSteps = warmupSteps;
    this.totalSteps = totalSteps;
    this.startFactor = options.startFactor ?? 0;
    if (!(this.startFactor >= 0 && this.startFactor <= 1)) throw new Error(`WarmupCosineLR: startFactor must be in [0, 1], got ${this.startFactor}`);
    this.minLrs = this.baseLrs.map((b) => (options.minLrRatio !== undefined ? b * options.minLrRatio : (options.minLr ?? 0)));
    this.initialStep();
  }

  protected lrAt(t: number, baseLr: number, group: number): number {
    if (t < this.warmupSteps) return baseLr * (this.startFactor + ((1 - this.startFactor) * t) / this.warmupSteps);
    const p = Math.min(1, (t - this.warmupSteps) / (this.totalSteps - this.warmupSteps));
    const minLr = this.minLrs[group]!;
    return minLr + ((baseLr - minLr) * (1 + Math.cos(Math.PI * p))) / 2;
  }
}

/** Linear warmup from startFactor * baseLr to baseLr over warmupSteps, then constant. */
export function linearWarmup(optimizer: Optimizer<BaseOptions>, warmupSteps: number, startFactor = 0): LambdaLR {
  if (!(Number.isInteger(warmupSteps) && warmupSteps > 0)) throw new Error(`linearWarmup: warmupSteps must be a positive integer, got ${warmupSteps}`);
  return new LambdaLR(optimizer, (t) => (t < warmupSteps ? startFactor + ((1 - startFactor) * t) / warmupSteps : 1));
}

/** Linear warmup then cosine decay to minLr (see WarmupCosineLR). */
export function warmupCosine(optimizer: Optimizer<BaseOptions>, options: WarmupCosineOptions): WarmupCosineLR {
  return new WarmupCosineLR(optimizer, options);
}
