/**
 * The differential fuzzer's fixture format (written by scripts/fuzz/gen_cases.py, or built in a
 * test from float64 formulas): types, loading (plain or gzip JSON, read with node:zlib) and value
 * decoding. Values are numbers except what JSON cannot hold: "nan", "inf", "-inf", and int64
 * beyond 2^53 as decimal strings.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

export type EncValue = number | string;

/** An input exactly as torch held it: logical values plus the layout to rebuild. */
export interface EncInput {
  dtype: string;
  shape: number[];
  strides: number[];
  offset: number;
  /** Storage size in elements. */
  size: number;
  layout: string;
  values: EncValue[];
}

export interface EncOutput {
  dtype: string;
  shape: number[];
  strides: number[];
  values: EncValue[];
}

/** An argument literal: a tensor reference, a list of them, a non-finite scalar, or plain JSON. */
export type EncArg = { in: number } | { step: number } | { list: EncArg[] } | { f: string } | number | boolean | string | null | number[];

export interface Step {
  op: string;
  inplace: boolean;
  args: EncArg[];
  /** torch's result right after the step; absent on the step that raised. */
  out?: EncOutput;
}

export interface FuzzCase {
  id: number;
  inputs: EncInput[];
  steps: Step[];
  error?: { step: number; type: string; msg: string };
  /** Inputs the program changed, by index, with their values afterwards. */
  mutated?: Record<string, EncValue[]>;
}

export interface ArgSpec {
  name: string;
  kind: string;
}

export interface OpSpec {
  torch: string;
  kiln: string;
  args: ArgSpec[];
  dtypes: string | string[];
  inplace?: string;
  kilnPos?: string[];
}

export interface Spec {
  dtypeGroups: Record<string, string[]>;
  ops: Record<string, OpSpec>;
}

export interface Fixture {
  format: number;
  torch: string;
  seed: number;
  spec: Spec;
  cases: FuzzCase[];
}

export function decodeValue(v: EncValue): number {
  if (typeof v === 'number') return v;
  if (v === 'nan') return NaN;
  if (v === 'inf') return Infinity;
  if (v === '-inf') return -Infinity;
  return Number(v);
}

const here = path.dirname(fileURLToPath(import.meta.url));
/** The source tree's root, from test/helpers/fuzz or dist/test/helpers/fuzz. */
export const repoRoot = [path.join(here, '../../..'), path.join(here, '../../../..')].find((p) => fs.existsSync(path.join(p, 'scripts/fuzz/ops.json')))!;

export function readJson(file: string): unknown {
  const raw = fs.readFileSync(file);
  const text = file.endsWith('.gz') ? zlib.gunzipSync(raw).toString('utf8') : raw.toString('utf8');
  return JSON.parse(text) as unknown;
}

export function loadSpec(): Spec {
  return readJson(path.join(repoRoot, 'scripts/fuzz/ops.json')) as Spec;
}

/** The committed fixture, or null with the reason when there is none yet. */
export function loadFixture(): { fixture: Fixture | null; why: string } {
  const file = process.env.KILN_FUZZ_FIXTURE ?? path.join(repoRoot, 'test/fixtures/fuzz-cases.json.gz');
  if (!fs.existsSync(file)) {
    return { fixture: null, why: `no fuzz fixture at ${file}: generate it with torch (python3 scripts/fuzz/gen_cases.py --out test/fixtures/fuzz-cases.json.gz)` };
  }
  return { fixture: readJson(file) as Fixture, why: '' };
}
