/** `kiln.optim`: optimizers and learning-rate schedulers (torch.optim). */
export { Optimizer, type BaseOptions, type ParamGroup, type ParamGroupInput, type ParamsInput, type ParamState, type OptimizerStateDict } from './optimizer.js';
export { SGD, type SGDOptions } from './sgd.js';
export { Adam, AdamW, type AdamOptions } from './adam.js';
export {
  LRScheduler,
  LambdaLR,
  StepLR,
  LinearLR,
  CosineAnnealingLR,
  WarmupCosineLR,
  linearWarmup,
  warmupCosine,
  type LrLambda,
  type SchedulerStateDict,
  type WarmupCosineOptions,
} from './lr-scheduler.js';
export { clipGradNorm_, clipGradValue_ } from '../nn/utils.js';
