/**
 * Training checkpoints in one file: `saveCheckpoint(path, { model, optimizer, scheduler, step })`
 * and `loadCheckpoint(path, { model, optimizer, scheduler })`. The file is a safetensors file, so
 * any safetensors reader can open the weights:
 *   - tensors: `model.<state-dict name>` and `optimizer.state.<param index>.<key>` (Adam's moments,
 *     SGD's momentum buffers), written bit for bit in their own dtype;
 *   - `__metadata__["kiln.checkpoint"]`: JSON with the format version, the step, the optimizer's
 *     parameter groups and non-tensor state (step counts), the scheduler's state and `extra` (any
 *     JSON the caller adds: epoch, data position, config).
 * Numbers go through JSON unchanged (JSON.stringify writes the shortest decimal that reads back to
 * the same double); non-finite ones, which JSON lacks, are tagged. Loading restores into existing
 * objects (Module.loadStateDict, Optimizer.loadStateDict, LRScheduler.loadStateDict) rather than
 * building them, since a model's code is not in the file. Together these make a resumed run
 * bit-identical to an uninterrupted one (test/checkpoint.test.ts).
 */
import type { Module } from '../nn/module.js';
import type { BaseOptions, Optimizer, OptimizerStateDict, ParamState } from '../optim/optimizer.js';
import type { LRScheduler, SchedulerStateDict } from '../optim/lr-scheduler.js';
import type { DeviceLike } from '../runtime/device.js';
import { Tensor } from '../tensor/tensor.js';
import { openSafetensors, saveSafetensors } from './safetensors.js';

const META_KEY = 'kiln.checkpoint';
const FORMAT = 1;

/** What to save; every part is optional. */
export interface CheckpointParts {
  model?: Module;
  optimizer?: Optimizer<BaseOptions>;
  scheduler?: LRScheduler;
  /** The training step (or epoch) the checkpoint was taken at. */
  step?: number;
  /** Anything JSON-serialisable to keep alongside (epoch, data position, config). */
  extra?: unknown;
}

/** What to restore into; parts present here but absent from the file are an error. */
export interface LoadCheckpointTargets {
  model?: Module;
  optimizer?: Optimizer<BaseOptions>;
  scheduler?: LRScheduler;
  /** Model loading: missing or unexpected keys are an error (default true). */
  strict?: boolean;
  /** Where loaded tensors are read to before being copied (default: each target's own device). */
  device?: DeviceLike;
}

export interface LoadedCheckpoint {
  step: number | null;
  extra: unknown;
  missingKeys: string[];
  unexpectedKeys: string[];
}

/** The JSON in the metadata: optimizer state with tensors replaced by their tensor names. */
interface CheckpointMeta {
  format: number;
  step: number | null;
  extra: unknown;
  model: boolean;
  optimizer: { paramGroups: OptimizerStateDict<BaseOptions>['paramGroups']; state: Record<string, Record<string, number | { tensor: string }>> } | null;
  scheduler: SchedulerStateDict | null;
}

// JSON has no NaN or Infinity; a tagged object keeps them (an lr of Infinity is odd, a maxNorm is not).
function encodeNumbers(_key: string, v: unknown): unknown {
  return typeof v === 'number' && !Number.isFinite(v) ? { $float: String(v) } : v;
}

function decodeNumbers(_key: string, v: unknown): unknown {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === '$float') return Number((v as { $float: string }).$float);
  }
  return v;
}

/** Writes model, optimizer and scheduler state (any subset) and `step`/`extra` to one safetensors file. */
export function saveCheckpoint(file: string, parts: CheckpointParts): void {
  const tensors: Record<string, Tensor> = {};
  if (parts.model) for (const [k, t] of Object.entries(parts.model.stateDict())) tensors[`model.${k}`] = t;
  let optimizer: CheckpointMeta['optimizer'] = null;
  if (parts.optimizer) {
    const sd = parts.optimizer.stateDict();
    const state: Record<string, Record<string, number | { tensor: string }>> = {};
    for (const [idx, s] of Object.entries(sd.state)) {
      const entry: Record<string, number | { tensor: string }> = {};
      for (const [k, v] of Object.entries(s)) {
        if (v instanceof Tensor) {
          const name = `optimizer.state.${idx}.${k}`;
          tensors[name] = v;
          entry[k] = { tensor: name };
        } else if (typeof v === 'number') entry[k] = v;
        else throw new TypeError(`saveCheckpoint: optimizer state '${k}' of parameter ${idx} is a ${typeof v}; only tensors and numbers can be saved`);
      }
      state[idx] = entry;
    }
    optimizer = { paramGroups: sd.paramGroups, state };
  }
  const meta: CheckpointMeta = {
    format: FORMAT,
    step: parts.step ?? null,
    extra: parts.extra ?? null,
    model: parts.model !== undefined,
    optimizer,
    scheduler: parts.scheduler ? parts.scheduler.stateDict() : null,
  };
  let json: string;
  try {
    json = JSON.stringify(meta, encodeNumbers);
  } catch (e) {
    throw new TypeError(`saveCheckpoint: 'extra' or the optimizer options are not JSON-serialisable: ${(e as Error).message}`);
  }
  saveSafetensors(file, tensors, { [META_KEY]: json });
}

/**
 * Restores a checkpoint written by saveCheckpoint into the given model, optimizer and scheduler (in
 * that order: the scheduler's state sets the lrs last) and returns the step and extra data.
 */
export function loadCheckpoint(file: string, targets: LoadCheckpointTargets = {}): LoadedCheckpoint {
  using f = openSafetensors(file);
  const raw = f.metadata[META_KEY];
  if (raw === undefined) throw new Error(`loadCheckpoint: ${file} is a safetensors file without Kiln checkpoint metadata ('${META_KEY}'); use kiln.io.loadSafetensors for plain weights`);
  const meta = JSON.parse(raw, decodeNumbers) as CheckpointMeta;
  if (meta.format !== FORMAT) throw new Error(`loadCheckpoint: ${file} has checkpoint format ${meta.format}; this Kiln reads format ${FORMAT}`);
  const read = (name: string, like?: Tensor): Tensor => f.get(name, { device: targets.device ?? like?.device });
  let missingKeys: string[] = [];
  let unexpectedKeys: string[] = [];
  if (targets.model) {
    if (!meta.model) throw new Error(`loadCheckpoint: ${file} holds no model state`);
    const own = targets.model.stateDict();
    const state: Record<string, Tensor> = {};
    for (const name of f.keys()) if (name.startsWith('model.')) state[name.slice(6)] = read(name, own[name.slice(6)]);
    try {
      ({ missingKeys, unexpectedKeys } = targets.model.loadStateDict(state, { strict: targets.strict ?? true }));
    } finally {
      for (const t of Object.values(state)) t.dispose();
    }
  }
  if (targets.optimizer) {
    if (!meta.optimizer) throw new Error(`loadCheckpoint: ${file} holds no optimizer state`);
    const loaded: Tensor[] = [];
    const state: Record<number, ParamState> = {};
    for (const [idx, s] of Object.entries(meta.optimizer.state)) {
      const entry: ParamState = {};
      for (const [k, v] of Object.entries(s)) {
        if (typeof v === 'number') entry[k] = v;
        else {
          const t = read(v.tensor);
          loaded.push(t);
          entry[k] = t;
        }
      }
      state[Number(idx)] = entry;
    }
    try {
      targets.optimizer.loadStateDict({ state, paramGroups: meta.optimizer.paramGroups });
    } finally {
      // loadStateDict copies every state tensor to its parameter's dtype and device.
      for (const t of loaded) t.dispose();
    }
  }
  if (targets.scheduler) {
    if (!meta.scheduler) throw new Error(`loadCheckpoint: ${file} holds no scheduler state`);
    targets.scheduler.loadStateDict(meta.scheduler);
  }
  return { step: meta.step, extra: meta.extra, missingKeys, unexpectedKeys };
}
