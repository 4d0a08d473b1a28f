/**
 * The sampler of the generation engine (the `Sampler` of sampling-params.ts): picks one token per
 * row of a [B, vocab] logits tensor of any float dtype on any device. The vocabulary-sized math
 * stays on the logits' device, in float32: penalties (penalties.ts), then temperature, topK, topP,
 * minP and the draw (sample-rows.ts), for all rows at once.
 *
 * Host reads: ONE per step: the ids (int64 [B]) when every row is greedy without penalties or
 * logprobs (argmax on the logits as they are); otherwise a [B, 2] float32 tensor (id, fits) or [B, 3 + 2n] with logprobs (n
 * the most alternatives a row asks for). A second read happens only when some sampling row's topP
 * nucleus (or topK) is wider than the `maxCandidates` most likely tokens, which the first read
 * reports: those rows' penalised logits are copied to the CPU and sampled again there with every
 * token a candidate, exactly. Host-to-device copies per step: the rows' settings and draws (one
 * [B, 9] table), and the penalised ids, factors and offsets when a row has penalties.
 *
 * sampleAsync (the engine's async steps) queues the same work and returns before the host read:
 * the ids stay on the device (int64 [B]) for the next step, and the read (tensor/transfer.ts'
 * readLater: on cuda a copy that waits only for itself) comes later, while the next step runs.
 *
 * Randomness: a seeded row's draw is seededUniform(seed, numGenerated ?? outputIds.length) (sampler-random.ts), so
 * its tokens do not depend on the batch; unseeded rows draw from this sampler's own Generator.
 *
 * Logprobs are those of the processed distribution (log_softmax after penalties, temperature and
 * filters; filtered tokens -inf), i.e. vLLM's `logprobs_mode='processed_logprobs'`, not its
 * default of raw model logprobs: they are the probabilities the token was actually drawn with.
 * Greedy rows report log_softmax of the penalised logits. The top n alternatives are the n most
 * likely (ties by lower id); when n exceeds what the filters left, the rest are -Infinity.
 */
import { clone, contiguous, to } from '../api/core.js';
import { arange, empty } from '../api/creation.js';
import { tensor } from '../api/data.js';
import { indexSelect } from '../api/indexing.js';
import { argmax } from '../api/reduction.js';
import { narrow, reshape } from '../api/views.js';
import type { Device } from '../runtime/device.js';
import { isFloating } from '../tensor/dtype.js';
import { Generator } from '../tensor/random.js';
import { keep, scope } from '../tensor/scope.js';
import { Tensor } from '../tensor/tensor.js';
import { readLater } from '../tensor/transfer.js';
import { applyPenalties, hasPenalties } from './penalties.js';
import { type RowPlan, sampleRows } from './sample-rows.js';
import { seededUniform } from './sampler-random.js';
import type { PendingSample, SampledToken, Sampler, SamplingRow } from './sampling-params.js';
import { validateSamplingParams } from './sampling-validate.js';

export interface LogitsSamplerOptions {
  /** Seed of the generator that unseeded rows draw from (default: a fixed one). */
  seed?: number;
  /**
   * How many of the most likely tokens a topP row's nucleus is looked for in before the step
   * falls back to an exact pass on the CPU (default 4096; at most 16384 on cuda, whose topk takes
   * no more from long rows).
   */
  maxCandidates?: number;
}

/** Ids travel to the host as float32 values. */
const MAX_VOCAB = 2 ** 24;

export class LogitsSampler implements Sampler {
  private readonly generator: Generator;
  private readonly maxCandidates: number;
  private readonly iotas = new Map<string, Tensor>();

  constructor(options: LogitsSamplerOptions = {}) {
    if (options.seed !== undefined && !Number.isSafeInteger(options.seed)) throw new RangeError(`LogitsSampler: options.seed must be a safe integer, got ${options.seed}`);
    const mc = options.maxCandidates ?? 4096;
    if (!Number.isInteger(mc) || mc < 1) throw new RangeError(`LogitsSampler: options.maxCandidates must be an integer >= 1, got ${mc}`);
    this.generator = new Generator(options.seed ?? 0x5eed);
    this.maxCandidates = mc;
  }

  sample(logits: Tensor, rows: readonly SamplingRow[], whileDeviceRuns?: () => void): SampledToken[] {
    const pending = this.launch(logits, rows, false);
    try {
      whileDeviceRuns?.();
      return pending.read().tokens;
    } finally {
      pending.dispose();
    }
  }

  /**
   * The step queued, its ids left on the device for the next step (the engine's async steps), read
   * later. Rows whose nucleus may not fit the candidates keep a copy of their logits for the exact
   * redo (the caller's logits may be a static buffer the next step overwrites).
   */
  sampleAsync(logits: Tensor, rows: readonly SamplingRow[]): PendingSample {
    return this.launch(logits, rows, true);
  }

  private launch(logits: Tensor, rows: readonly SamplingRow[], logitsReused: boolean): PendingSample {
    const { vocab } = this.checkInputs(logits, rows);
    if (rows.length === 0) {
      const ids = keep(empty([0], { dtype: 'int64', device: logits.device }));
      return { ids, read: () => ({ tokens: [], redrawn: [] }), dispose: () => ids.dispose() };
    }
    const plans = rows.map((row) => this.plan(row, vocab));
    // Greedy rows with no penalties and no logprobs (the common decode): argmax straight on the
    // logits in their own dtype (a float32 copy would not change the first maximum) and one read of
    // the ids: one kernel instead of the general path's six (measured on the H200 at batch 1: the
    // general path took 0.33 ms of a 2 ms step).
    if (rows.every((r) => !r.params.doSample && r.params.logprobs === undefined && !hasPenalties(r))) {
      const ids = keep(argmax(logits, 1));
      const read = readLater(ids);
      return {
        ids,
        read: () => ({ tokens: read.wait().map((id) => ({ id: Number(id) })), redrawn: [] }),
        dispose: () => {
          read.dispose();
          ids.dispose();
        },
      };
    }
    const B = rows.length;
    const nTop = Math.max(0, ...rows.map((r) => r.params.logprobs ?? 0));
    const withLogprobs = rows.some((r) => r.params.logprobs !== undefined);
    const width = withLogprobs ? 3 + 2 * Math.min(nTop, vocab) : 2;
    // A row can need the exact pass only when its topP nucleus or topK may reach past the candidates.
    const mayRedo = vocab > this.maxCandidates && plans.some((p) => !p.greedy && (p.topP < 1 || p.topK > this.maxCandidates));
    const { packed, ids, saved } = scope(() => {
      const x = applyPenalties(to(logits, 'float32'), rows);
      const packed = sampleRows(x, plans, nTop, withLogprobs, this.maxCandidates, this.iota(x.device, vocab));
      const ids = contiguous(reshape(to(narrow(packed, 1, 0, 1), 'int64'), [B]));
      // x is the caller's logits when they are float32 and no row has penalties: copy them only
      // when the caller may overwrite them before the read.
      const saved = !mayRedo ? null : x !== logits ? x : logitsReused ? clone(x) : null;
      return { packed: keep(packed), ids: keep(ids), saved: saved && keep(saved) };
    });
    const redoFrom = saved ?? logits; // logits: the sync path, where nothing overwrites them before read()
    const read = readLater(packed);
    return {
      ids,
      read: () => {
        const host = [...read.wait()];
        // Only a row that mayRedo covers can miss its candidates (sample-rows.ts' fits column).
        const redo = mayRedo ? plans.map((_, r) => r).filter((r) => host[r * width + 1] === 0) : [];
        if (redo.length > 0) {
          scope(() => {
            const cpuRows = to(indexSelect(to(redoFrom, 'float32'), 0, tensor(redo, { dtype: 'int64', device: redoFrom.device })), 'cpu');
            const again = sampleRows(cpuRows, redo.map((r) => plans[r]!), nTop, withLogprobs, Infinity, this.iota(cpuRows.device, vocab)).toFlatArray();
            redo.forEach((r, i) => host.splice(r * width, width, ...again.slice(i * width, (i + 1) * width)));
          });
        }
        const tokens = rows.map((row, r): SampledToken => {
          const at = r * width;
          const id = host[at]!;
          const n = row.params.logprobs;
          if (n === undefined) return { id };
          const k = Math.min(n, vocab);
          const top = Array.from({ length: k }, (_, j) => ({ id: host[at + 3 + j]!, logprob: host[at + 3 + Math.min(nTop, vocab) + j]! }));
          return { id, logprob: host[at + 2]!, top };
        });
        return { tokens, redrawn: redo };
      },
      dispose: () => {
        read.dispose();
        packed.dispose();
        ids.dispose();
        saved?.dispose();
      },
    };
  }

  /** Frees the cached index rows (the sampler stays usable and rebuilds them on demand). */
  dispose(): void {
    for (const t of this.iotas.values()) t.dispose();
    this.iotas.clear();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /** [1, vocab] float32 0..vocab-1 on `device` (sample-rows.ts keeps ids in float32), made once: an upload of vocab ids every step would cost more than the step's reads. */
  private iota(device: Device, vocab: number): Tensor {
    const key = `${device.toString()}:${vocab}`;
    let t = this.iotas.get(key);
    if (!t) {
      t = keep(reshape(arange(vocab, { dtype: 'float32', device }), [1, vocab]));
      this.iotas.set(key, t);
    }
    return t;
  }

  private checkInputs(logits: Tensor, rows: readonly SamplingRow[]): { vocab: number } {
    if (!(logits instanceof Tensor)) throw new TypeError(`LogitsSampler.sample: logits must be a Tensor, got ${typeof logits}`);
    if (logits.ndim !== 2 || !isFloating(logits.dtype)) {
      throw new TypeError(`LogitsSampler.sample: logits must be a [batch, vocab] float tensor, got [${logits.shape.join(', ')}] ${logits.dtype}`);
    }
    const [batch, vocab] = logits.shape as [number, number];
    if (!Array.isArray(rows) || rows.length !== batch) {
      throw new RangeError(`LogitsSampler.sample: rows must have one entry per logits row (${batch}), got ${Array.isArray(rows) ? rows.length : typeof rows}`);
    }
    if (vocab < 1 || vocab > MAX_VOCAB) throw new RangeError(`LogitsSampler.sample: vocab size must be in 1..${MAX_VOCAB}, got ${vocab}`);
    rows.forEach((row, r) => {
      if (typeof row !== 'object' || row === null) throw new TypeError(`LogitsSampler.sample: rows[${r}] must be a { params, promptIds, outputIds } object, got ${row === null ? 'null' : typeof row}`);
      validateSamplingParams(row.params, `LogitsSampler.sample: rows[${r}].params`);
      for (const key of ['promptIds', 'outputIds'] as const) {
        const ids = row[key] as readonly number[];
        if (!Array.isArray(ids)) throw new TypeError(`LogitsSampler.sample: rows[${r}].${key} must be an array of token ids, got ${typeof ids}`);
        // Only penalties read the ids: checking a long prompt every step would cost for nothing.
        if (!hasPenalties(row)) continue;
        for (let i = 0; i < ids.length; i++) {
          const id = ids[i]!;
          if (!Number.isInteger(id) || id < 0 || id >= vocab) throw new RangeError(`LogitsSampler.sample: rows[${r}].${key}[${i}] must be a token id in 0..${vocab - 1}, got ${id}`);
        }
      }
    });
    return { vocab };
  }

  private plan(row: SamplingRow, vocab: number): RowPlan {
    const p = row.params;
    if (!p.doSample) return { greedy: true, temperature: 1, topK: 0, topP: 1, minP: 0, uniform: 0 };
    const topK = p.topK ?? 0;
    return {
      greedy: false,
      temperature: p.temperature ?? 1,
      topK: topK >= vocab ? 0 : topK,
      topP: p.topP ?? 1,
      minP: p.minP ?? 0,
      uniform: p.seed !== undefined ? seededUniform(p.seed, row.numGenerated ?? row.outputIds.length) : this.generator.nextDouble(),
    };
  }
}
