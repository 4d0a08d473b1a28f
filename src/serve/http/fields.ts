/**
 * Typed reads of request-body fields, each failing with a 400 that names the field (`param`) and
 * says what it accepts and what it got. `null` counts as absent, as the OpenAI API treats it.
 * `checkKnownFields` refuses fields the server does not know, so a misspelt or unsupported option
 * is an error instead of being silently ignored.
 */
import { badRequest } from './errors.js';

export type Body = Readonly<Record<string, unknown>>;

/** A short rendering of a bad value for error messages. */
export function show(v: unknown): string {
  const s = JSON.stringify(v);
  if (s === undefined) return typeof v;
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

export interface NumberRange {
  min?: number;
  max?: number;
  /** min itself is not allowed. */
  minExclusive?: boolean;
  integer?: boolean;
}

function describe(r: NumberRange): string {
  const kind = r.integer ? 'an integer' : 'a number';
  if (r.min !== undefined && r.max !== undefined) return `${kind} in ${r.minExclusive ? '(' : '['}${r.min}, ${r.max}]`;
  if (r.min !== undefined) return `${kind} ${r.minExclusive ? '>' : '>='} ${r.min}`;
  if (r.max !== undefined) return `${kind} <= ${r.max}`;
  return kind;
}

export function optNumber(body: Body, name: string, range: NumberRange = {}): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  const ok =
    typeof v === 'number' &&
    Number.isFinite(v) &&
    (!range.integer || Number.isSafeInteger(v)) &&
    (range.min === undefined || (range.minExclusive ? v > range.min : v >= range.min)) &&
    (range.max === undefined || v <= range.max);
  if (!ok) throw badRequest(name, `${name} must be ${describe(range)}, got ${show(v)}`);
  return v;
}

export function optBoolean(body: Body, name: string): boolean | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw badRequest(name, `${name} must be a boolean, got ${show(v)}`);
  return v;
}

export function optString(body: Body, name: string): string | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw badRequest(name, `${name} must be a string, got ${show(v)}`);
  return v;
}

export function optObject(body: Body, name: string): Body | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw badRequest(name, `${name} must be an object, got ${show(v)}`);
  return v as Body;
}

/** 400 for the first field of `body` that is not in `known`. */
export function checkKnownFields(body: Body, known: ReadonlySet<string>, where: string): void {
  for (const k of Object.keys(body)) {
    if (!known.has(k)) throw badRequest(k, `unrecognized request argument supplied to ${where}: ${k}`, 'unknown_parameter');
  }
}
