/**
 * Greedy selection behind the Sampler contract (sampling-params.ts): argmax over each row of the
 * step's logits, ties to the lowest id as torch.argmax, with one device read for the whole batch.
 * The engine's default until the full sampler (sampler.ts: temperature, top-k/p, penalties,
 * logprobs) plugs in through the same interface; options that only it implements are refused
 * here with a clear error rather than silently ignored.
 */
import { argmax } from '../api/reduction.js';
import { fmtShape } from '../tensor/layout.js';
import type { Tensor } from '../tensor/tensor.js';
import type { SampledToken, Sampler, SamplingParams, SamplingRow } from './sampling-params.js';

/** The options a greedy sampler cannot honour, with their neutral values. */
const NEEDS_SAMPLER: readonly [keyof SamplingParams, unknown][] = [
  ['doSample', false],
  ['repetitionPenalty', 1],
  ['presencePenalty', 0],
  ['frequencyPenalty', 0],
];

export class GreedySampler implements Sampler {
  sample(logits: Tensor, rows: readonly SamplingRow[]): SampledToken[] {
    const fn = 'GreedySampler.sample';
    if (logits.ndim !== 2 || logits.shape[0] !== rows.length) {
      throw new Error(`${fn}: logits must be [rows, vocab] with ${rows.length} rows, got ${fmtShape(logits.shape)}`);
    }
    rows.forEach((r, i) => this.check(r.params, `${fn}: row ${i}`));
    if (rows.length === 0) return [];
    const ids = argmax(logits, -1);
    const host = ids.toFlatArray();
    ids.dispose();
    return host.map((id) => ({ id }));
  }

  /** Throws if `params` asks for something only the full sampler does; `where` prefixes the message. */
  check(params: SamplingParams, where: string): void {
    for (const [k, neutral] of NEEDS_SAMPLER) {
      const v = params[k];
      if (v !== undefined && v !== neutral) throw new Error(`${where}: ${k} = ${JSON.stringify(v)} needs the sampler (serve/sampler.ts); the greedy sampler only takes the argmax`);
    }
    if (params.logprobs !== undefined) throw new Error(`${where}: logprobs = ${params.logprobs} needs the sampler (serve/sampler.ts); the greedy sampler only takes the argmax`);
  }
}
