/**
 * The one argument form kiln.rmsNorm (torch.nn.functional.rms_norm) and kiln.llm.rmsNorm (vLLM's
 * rms_norm) share. Both accept:
 *   rmsNorm(input, normalizedShape, weight?, eps?)   torch's positional form
 *   rmsNorm(input, weight, eps?)                     vLLM's form: normalizedShape = weight.shape
 *   rmsNorm(input, { normalizedShape?, weight?, eps? })
 * Each function then applies its own rules: kiln.rmsNorm normalises over any trailing dims and
 * defaults eps to the dtype's machine epsilon (as torch); llm.rmsNorm normalises over the last dim
 * only, needs a weight and defaults eps to 1e-6 (as vLLM). The defaults stay different because
 * existing callers of each rely on theirs; pass eps to get the same numbers from both.
 */
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import { Tensor } from '../tensor/tensor.js';

export interface RmsNormOptions {
  /** Trailing dims to normalise over (default: the weight's shape). */
  normalizedShape?: number | readonly number[];
  weight?: Tensor | null;
  /** Added to the mean square; the default depends on the function (see above). */
  eps?: number | null;
}

/** The forms' arguments after `input`. */
export type RmsNormArgs =
  | [normalizedShape: number | readonly number[], weight?: Tensor | null, eps?: number | null]
  | [weight: Tensor, eps?: number | null]
  | [options: RmsNormOptions];

const RMS_KEYS = keysOf<RmsNormOptions>({ normalizedShape: true, weight: true, eps: true });

export interface ParsedRmsNorm {
  /** null: not given and no weight to take it from. */
  normalizedShape: number[] | null;
  weight: Tensor | null;
  /** undefined: use the function's default. */
  eps: number | undefined;
}

function shapeOf(fn: string, s: number | readonly number[]): number[] {
  const out = typeof s === 'number' ? [s] : Array.isArray(s) ? [...(s as number[])] : null;
  if (!out || !out.every((d) => Number.isInteger(d) && d >= 0)) throw new TypeError(`${fn}: 'normalizedShape' must be an integer or a list of integers, got ${JSON.stringify(s)}`);
  return out;
}

function epsOf(fn: string, e: unknown): number | undefined {
  if (e === undefined || e === null) return undefined;
  if (typeof e !== 'number' || !(e >= 0)) throw new TypeError(`${fn}: 'eps' must be a non-negative number, got ${String(e)}`);
  return e;
}

/** Normalises the three forms; `fn` names the caller in errors. */
export function parseRmsNormArgs(fn: string, args: readonly unknown[]): ParsedRmsNorm {
  const [a, b, c] = args;
  if (a instanceof Tensor) {
    if (args.length > 2) throw new TypeError(`${fn}: the (input, weight, eps) form takes 3 arguments, got ${args.length + 1}`);
    return { normalizedShape: [...a.shape], weight: a, eps: epsOf(fn, b) };
  }
  if (typeof a === 'number' || Array.isArray(a)) {
    if (b !== undefined && b !== null && !(b instanceof Tensor)) throw new TypeError(`${fn}: 'weight' must be a Tensor or null, got ${typeof b}`);
    return { normalizedShape: shapeOf(fn, a as number | readonly number[]), weight: (b as Tensor | null | undefined) ?? null, eps: epsOf(fn, c) };
  }
  if (a !== null && typeof a === 'object') {
    if (args.length > 1) throw new TypeError(`${fn}: the (input, options) form takes 2 arguments, got ${args.length + 1}`);
    const o = a as RmsNormOptions;
    checkOptionKeys(fn, o, RMS_KEYS);
    if (o.weight !== undefined && o.weight !== null && !(o.weight instanceof Tensor)) throw new TypeError(`${fn}: 'weight' must be a Tensor or null, got ${typeof o.weight}`);
    const weight = o.weight ?? null;
    const normalizedShape = o.normalizedShape !== undefined ? shapeOf(fn, o.normalizedShape) : weight ? [...weight.shape] : null;
    return { normalizedShape, weight, eps: epsOf(fn, o.eps) };
  }
  throw new TypeError(`${fn}: expected normalizedShape, a weight Tensor or an options object after 'input', got ${a === null ? 'null' : typeof a}`);
}
