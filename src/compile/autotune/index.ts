export {
  autotune,
  autotuneEnabled,
  autotuneCacheKey,
  cloneArgsForTuning,
  clonedTensors,
  AUTOTUNE_NAMESPACE,
  type AutotuneCandidate,
  type AutotuneOptions,
  type AutotuneResult,
  type AutotuneTiming,
} from './autotune.js';
