/**
 * torch.bernoulli, torch.randperm and torch.multinomial, composed from kiln's seeded uniform
 * draws (randLike / rand with an optional Generator) and differentiable-free ops, so they run on
 * every device and draw from the same generators as rand:
 * - bernoulli: rand < p;
 * - randperm: the argsort of n float64 uniforms (a uniformly random permutation; ties, at 2^-53,
 *   are negligible);
 * - multinomial without replacement: the exponential race (Efraimidis-Spirakis): the k largest
 *   keys log(u) / w are the sequential weighted draws torch makes; with replacement: inverse CDF,
 *   the index is the count of cumulative weights <= u * total (memory rows x samples x categories).
 * multinomial validates the weights' values (non-negative, finite, positive sum), which reads them
 * on the host (under kiln.compile that is a graph break).
 */
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import { isFloating } from '../tensor/dtype.js';
import { fmtShape } from '../tensor/layout.js';
import type { Generator } from '../tensor/random.js';
import type { Tensor } from '../tensor/tensor.js';
import type { DeviceLike } from '../runtime/device.js';
import { to } from './core.js';
import { rand, randLike } from './creation.js';
import { installMethods } from './install.js';
import { clamp, div, le, log, lt, mul } from './pointwise.js';
import { argsort, cumsum, sum, topk } from './reduction.js';
import { narrow, squeeze, unsqueeze } from './views.js';
import type { DType } from '../tensor/dtype.js';

function describe(t: Tensor): string {
  return `${fmtShape(t.shape)} ${t.dtype}`;
}

export interface BernoulliOptions {
  /** A probability for every element, instead of the input's values. */
  p?: number;
  generator?: Generator;
}
const BERNOULLI_KEYS = keysOf<BernoulliOptions>({ p: true, generator: true });

/** torch.bernoulli: 1 with probability input (or p) per element, else 0; the input's dtype and shape. */
export function bernoulli(input: Tensor, options: BernoulliOptions = {}): Tensor {
  checkOptionKeys('bernoulli', options, BERNOULLI_KEYS);
  if (!isFloating(input.dtype)) throw new TypeError(`bernoulli: input must be floating point, got ${describe(input)}`);
  const u = randLike(input, options.generator ? { generator: options.generator } : {});
  if (options.p !== undefined) {
    if (!(options.p >= 0 && options.p <= 1)) throw new RangeError(`bernoulli: p must be in [0, 1], got ${options.p}`);
    return to(lt(u, options.p), input.dtype);
  }
  return to(lt(u, input), input.dtype);
}

export interface RandpermOptions {
  dtype?: DType;
  device?: DeviceLike;
  generator?: Generator;
}
const RANDPERM_KEYS = keysOf<RandpermOptions>({ dtype: true, device: true, generator: true });

/** torch.randperm(n): a random permutation of 0..n-1 (int64 by default). */
export function randperm(n: number, options: RandpermOptions = {}): Tensor {
  checkOptionKeys('randperm', options, RANDPERM_KEYS);
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`randperm: n must be a non-negative integer, got ${n}`);
  const keys = rand([n], { dtype: 'float64', ...(options.device !== undefined ? { device: options.device } : {}), ...(options.generator ? { generator: options.generator } : {}) });
  const p = argsort(keys, 0);
  return options.dtype && options.dtype !== 'int64' ? to(p, options.dtype) : p;
}

export interface MultinomialOptions {
  replacement?: boolean;
  generator?: Generator;
}
const MULTINOMIAL_KEYS = keysOf<MultinomialOptions>({ replacement: true, generator: true });

/**
 * torch.multinomial(input, numSamples, replacement = false): int64 indices drawn per row of the
 * non-negative weights `input` ([n] or [rows, n]; they need not sum to 1). Positional
 * `multinomial(w, k, true)` or `multinomial(w, k, { replacement, generator })`.
 */
export function multinomial(input: Tensor, numSamples: number, replacement: boolean | MultinomialOptions = false, generator?: Generator): Tensor {
  let opts: MultinomialOptions;
  if (typeof replacement === 'object') {
    checkOptionKeys('multinomial', replacement, MULTINOMIAL_KEYS);
    opts = replacement;
  } else {
    opts = { replacement, ...(generator ? { generator } : {}) };
  }
  const withRep = opts.replacement ?? false;
  if (input.ndim !== 1 && input.ndim !== 2) throw new Error(`multinomial: prob_dist must be 1 or 2 dim, got ${describe(input)}`);
  if (!isFloating(input.dtype)) throw new TypeError(`multinomial: input must be floating point, got ${describe(input)}`);
  const n = input.shape[input.ndim - 1]!;
  if (!Number.isInteger(numSamples) || numSamples <= 0) throw new RangeError(`multinomial: numSamples must be a positive integer, got ${numSamples}`);
  if (n === 0) throw new Error(`multinomial: number of categories cannot be zero (input ${describe(input)})`);
  if (!withRep && numSamples > n) throw new Error(`multinomial: cannot sample numSamples = ${numSamples} > ${n} categories without replacement (input ${describe(input)})`);
  const w = input.ndim === 1 ? unsqueeze(input, 0) : input;
  // Value checks (torch's): finite, non-negative, a positive sum per row, enough nonzero categories.
  const vals = w.toFlatArray();
  for (let r = 0; r < w.shape[0]!; r++) {
    let total = 0;
    let positive = 0;
    for (let j = 0; j < n; j++) {
      const v = vals[r * n + j]!;
      if (!Number.isFinite(v) || v < 0) throw new RangeError(`multinomial: probability tensor contains either inf, nan or element < 0 (row ${r}, category ${j}: ${v})`);
      total += v;
      if (v > 0) positive++;
    }
    if (!(total > 0)) throw new RangeError(`multinomial: invalid distribution in row ${r}: the weights sum to 0`);
    if (!withRep && positive < numSamples) {
      throw new RangeError(`multinomial: invalid distribution in row ${r} (replacement=false): only ${positive} categories have nonzero weight, fewer than numSamples = ${numSamples}`);
    }
  }
  const gen = opts.generator ? { generator: opts.generator } : {};
  const w64 = to(w, 'float64');
  let out: Tensor;
  if (withRep) {
    const cdf = cumsum(w64, -1);
    const total = narrow(cdf, -1, n - 1, 1); // [rows, 1]
    const u = mul(rand([w.shape[0]!, numSamples, 1], { dtype: 'float64', device: w.device, ...gen }), unsqueeze(total, -1));
    // index = #{j : cdf[j] <= u}, clamped for u rounding onto the total.
    const count = sum(le(unsqueeze(cdf, 1), u), -1);
    out = clamp(count, 0, n - 1);
  } else {
    const u = rand([w.shape[0]!, n], { dtype: 'float64', device: w.device, ...gen });
    // log(u) / w: -inf for zero weights, which then never win while positive weights remain.
    out = topk(div(log(u), w64), numSamples, -1).indices;
  }
  return input.ndim === 1 ? squeeze(out, [0]) : out;
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    bernoulli(options?: BernoulliOptions): Tensor;
    multinomial(numSamples: number, replacement?: boolean | MultinomialOptions, generator?: Generator): Tensor;
  }
}

installMethods({ bernoulli, multinomial });
