/**
 * The known-mismatch list (test/fixtures/fuzz-known.json): documented differences from torch, each
 * with its reason. An entry matches a mismatch by op and, where given, in-place form, dtype of the
 * step's first tensor argument, mode, kind and case ids; anything no entry matches fails the
 * replay. The report groups mismatches by op so one broken kernel reads as one line, not hundreds.
 */
import path from 'node:path';
import { readJson, repoRoot } from './fixture.js';
import type { Mismatch } from './replay.js';

export interface KnownEntry {
  op: string;
  reason: string;
  inplace?: boolean;
  dtypes?: string[];
  modes?: string[];
  kinds?: string[];
  cases?: number[];
}

export function loadKnown(): KnownEntry[] {
  const doc = readJson(path.join(repoRoot, 'test/fixtures/fuzz-known.json')) as { entries: KnownEntry[] };
  for (const e of doc.entries) if (!e.op || !e.reason) throw new Error(`fuzz-known.json: every entry needs op and reason: ${JSON.stringify(e)}`);
  return doc.entries;
}

export function matches(e: KnownEntry, m: Mismatch): boolean {
  return (
    e.op === m.op &&
    (e.inplace === undefined || e.inplace === m.inplace) &&
    (!e.dtypes || e.dtypes.includes(m.dtype)) &&
    (!e.modes || e.modes.includes(m.mode)) &&
    (!e.kinds || e.kinds.includes(m.kind)) &&
    (!e.cases || e.cases.includes(m.caseId))
  );
}

export interface Sorted {
  failing: Mismatch[];
  known: Mismatch[];
  unstable: Mismatch[];
  unusedEntries: KnownEntry[];
}

export function sortMismatches(all: readonly Mismatch[], known: readonly KnownEntry[]): Sorted {
  const out: Sorted = { failing: [], known: [], unstable: [], unusedEntries: [] };
  const used = new Set<KnownEntry>();
  for (const m of all) {
    if (m.kind === 'unstable') {
      out.unstable.push(m);
      continue;
    }
    const e = known.find((k) => matches(k, m));
    if (e) used.add(e);
    (e ? out.known : out.failing).push(m);
  }
  out.unusedEntries = known.filter((e) => !used.has(e));
  return out;
}

/** One line per op (count, kinds, dtypes, modes), then up to `examples` cases each. */
export function groupReport(ms: readonly Mismatch[], examples = 3): string {
  const byOp = new Map<string, Mismatch[]>();
  for (const m of ms) {
    const key = m.op + (m.inplace ? ' (in-place)' : '');
    byOp.set(key, [...(byOp.get(key) ?? []), m]);
  }
  const uniq = (xs: string[]): string => [...new Set(xs)].sort().join(',');
  const lines: string[] = [];
  for (const [op, list] of [...byOp].sort((a, b) => b[1].length - a[1].length)) {
    lines.push(`${op}: ${list.length} (kinds ${uniq(list.map((m) => m.kind))}; dtypes ${uniq(list.map((m) => m.dtype))}; modes ${uniq(list.map((m) => m.mode))})`);
    for (const m of list.slice(0, examples)) lines.push(`  case ${m.caseId} step ${m.step} [${m.mode}] ${m.kind}: ${m.detail}`);
  }
  return lines.join('\n');
}
