/**
 * The LLM kernel library's manifest: one entry per library op, stating its compiler contract.
 *
 *   kind      native     the compiler may decompose and fuse it (a reference composition exists; it
 *                        does so when the frozen dispatch choice is that reference: decompositions.ts)
 *             traceable  the compiler sees the kernel and may re-tune it (a generated kernel)
 *             opaque     called as is: only schema, meta and the declared mutation are trusted
 *             eagerOnly  must not be captured: the op carries the 'dataDependent' tag, on which
 *                        capture raises a GraphBreak (an error under fullgraph)
 *   mutates   the schema's mutated arguments, repeated here so a schema edit cannot silently change
 *             the contract (validated against the registered op when the entry is added)
 *   dynamic   named dims that may take any size without a recompile-visible change of semantics
 *             (opcheck runs every sample at two sizes of each)
 *   requires  what the kernel needs of its inputs, in words (shown in errors and docs)
 *   backward  true when a backward formula is registered, else the reason there is none
 *
 * Entries are data, so the manifest has a stable hash; registering a second, different entry for
 * an op throws (the same entry twice is a no-op, so re-imports are harmless).
 */
import { getOp, hasOp } from '../registry.js';
import type { DType } from '../../tensor/dtype.js';

export type CompileKind = 'native' | 'traceable' | 'opaque' | 'eagerOnly';

export interface DynamicDim {
  /** Name the samples use for this size (e.g. 'T' for tokens). */
  readonly name: string;
  /** Human-readable description: which argument dims it sizes. */
  readonly sizes: string;
}

export interface ManifestEntry {
  readonly op: string;
  readonly kind: CompileKind;
  readonly mutates: readonly string[];
  readonly dynamic: readonly DynamicDim[];
  readonly requires: readonly string[];
  readonly dtypes: readonly DType[];
  readonly backward: true | string;
}

const entries = new Map<string, ManifestEntry>();
let version = 0;

/** Bumped on every new entry (lets hashes of the manifest be cached). */
export function manifestVersion(): number {
  return version;
}

function canonical(e: ManifestEntry): string {
  return JSON.stringify({
    op: e.op,
    kind: e.kind,
    mutates: [...e.mutates].sort(),
    dynamic: e.dynamic.map((d) => [d.name, d.sizes]),
    requires: [...e.requires],
    dtypes: [...e.dtypes],
    backward: e.backward,
  });
}

/** Adds an entry; throws on a conflicting duplicate or one that contradicts the op's schema. */
export function registerManifestEntry(entry: ManifestEntry): void {
  const prev = entries.get(entry.op);
  if (prev) {
    if (canonical(prev) === canonical(entry)) return;
    throw new Error(`llm manifest: op '${entry.op}' is already registered with a different contract:\n  existing ${canonical(prev)}\n  new      ${canonical(entry)}`);
  }
  if (!hasOp(entry.op)) throw new Error(`llm manifest: op '${entry.op}' is not a registered op (define it with defineOp first)`);
  const op = getOp(entry.op);
  const schemaMutated = op.args.filter((a) => a.mutated).map((a) => a.name).sort();
  const declared = [...entry.mutates].sort();
  if (JSON.stringify(schemaMutated) !== JSON.stringify(declared)) {
    throw new Error(`llm manifest: op '${entry.op}' declares mutated [${declared.join(', ')}] but its schema mutates [${schemaMutated.join(', ')}]`);
  }
  // The compiler breaks the graph on ops tagged dataDependent; eagerOnly is exactly that contract.
  const breaks = op.tags?.includes('dataDependent') === true;
  if ((entry.kind === 'eagerOnly') !== breaks) {
    throw new Error(
      `llm manifest: op '${entry.op}' is declared ${entry.kind} but ${breaks ? 'is' : 'is not'} tagged 'dataDependent' (the tag that makes kiln.compile break the graph before it); eagerOnly and the tag go together`,
    );
  }
  if (entry.backward === true && op.backward === undefined) {
    throw new Error(`llm manifest: op '${entry.op}' declares a backward formula but none is registered`);
  }
  entries.set(entry.op, entry);
  version++;
}

export function manifestEntries(): ManifestEntry[] {
  return [...entries.values()].sort((a, b) => (a.op < b.op ? -1 : a.op > b.op ? 1 : 0));
}

export function manifestEntry(op: string): ManifestEntry | undefined {
  return entries.get(op);
}

/** The canonical text of the whole manifest (sorted by op), for hashing. */
export function manifestText(): string {
  return manifestEntries().map(canonical).join('\n');
}
