/**
 * Checks of SamplingParams' sampling fields, shared by the sampler (every step) and the engine (at
 * admission, so a bad request fails before it takes a batch slot). Errors name the caller, the
 * field and the value. Ranges: transformers' (temperature > 0 when sampling, 0 < topP <= 1, integer
 * topK >= 0, minP in [0, 1], repetitionPenalty > 0) and vLLM's for logprobs (at most 20 alternatives).
 * Presence and frequency penalties only need to be finite (OpenAI documents [-2, 2]; larger values
 * are legal arithmetic, so they are not refused).
 */
import type { SamplingParams } from './sampling-params.js';

/** The most top alternatives a row may ask for (vLLM's default max_logprobs). */
export const MAX_LOGPROBS = 20;

function fail(where: string, field: string, want: string, got: unknown): never {
  throw new RangeError(`${where}.${field} must be ${want}, got ${typeof got === 'number' ? String(got) : JSON.stringify(got)}`);
}

function isNum(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/** Throws on the first bad sampling field; `where` prefixes the message (e.g. 'sample: rows[2].params'). */
export function validateSamplingParams(params: SamplingParams, where = 'params'): void {
  if (typeof params !== 'object' || params === null) throw new TypeError(`${where} must be a SamplingParams object, got ${params === null ? 'null' : typeof params}`);
  const p = params;
  if (p.doSample !== undefined && typeof p.doSample !== 'boolean') fail(where, 'doSample', 'a boolean', p.doSample);
  if (p.temperature !== undefined) {
    if (!isNum(p.temperature) || p.temperature < 0) fail(where, 'temperature', 'a finite number >= 0', p.temperature);
    if (p.doSample && p.temperature === 0) fail(where, 'temperature', '> 0 when sampling (doSample: true; use doSample: false for greedy)', p.temperature);
  }
  if (p.topK !== undefined && (!Number.isInteger(p.topK) || p.topK < 0)) fail(where, 'topK', 'an integer >= 0 (0: off)', p.topK);
  if (p.topP !== undefined && (!isNum(p.topP) || p.topP <= 0 || p.topP > 1)) fail(where, 'topP', 'in (0, 1] (1: off)', p.topP);
  if (p.minP !== undefined && (!isNum(p.minP) || p.minP < 0 || p.minP > 1)) fail(where, 'minP', 'in [0, 1] (0: off)', p.minP);
  if (p.repetitionPenalty !== undefined && (!isNum(p.repetitionPenalty) || p.repetitionPenalty <= 0)) fail(where, 'repetitionPenalty', 'a finite number > 0 (1: off)', p.repetitionPenalty);
  if (p.presencePenalty !== undefined && !isNum(p.presencePenalty)) fail(where, 'presencePenalty', 'a finite number (0: off)', p.presencePenalty);
  if (p.frequencyPenalty !== undefined && !isNum(p.frequencyPenalty)) fail(where, 'frequencyPenalty', 'a finite number (0: off)', p.frequencyPenalty);
  if (p.seed !== undefined && !Number.isSafeInteger(p.seed)) fail(where, 'seed', 'a safe integer', p.seed);
  if (p.logprobs !== undefined && (!Number.isInteger(p.logprobs) || p.logprobs < 0 || p.logprobs > MAX_LOGPROBS)) fail(where, 'logprobs', `an integer in 0..${MAX_LOGPROBS}`, p.logprobs);
}
