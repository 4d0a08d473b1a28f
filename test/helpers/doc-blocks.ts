/**
 * Fenced code blocks of the Markdown docs, for test/docs-examples.test.ts. A block is a ``` or
 * ~~~ fence with a language tag; an HTML comment `<!-- docs-test: slow -->` (or `gpu`, `server`, `network`, `browser`,
 * comma-separated) on the line before the fence, or before the blank lines above it, marks a
 * block whose commands are checked but not run. Marks are an explicit list so that a typo is an
 * error instead of a block that silently stops running.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * Why a block is checked but not run: slow (minutes), gpu (needs NVIDIA hardware), server (runs until
 * stopped), network (the npm registry), browser (runs in a browser's Web Worker, not in Node;
 * scripts/pack-check.sh runs `kilnjs/browser` in headless Chromium).
 */
export const MARKS = ['slow', 'gpu', 'server', 'network', 'browser'] as const;
export type Mark = (typeof MARKS)[number];

/** Languages a block may have: ts and sh are checked and run; text is prose in a box. */
export const LANGS = ['ts', 'sh', 'text'] as const;

export interface DocBlock {
  /** The Markdown file, relative to the repository root. */
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  readonly code: string;
  readonly marks: readonly Mark[];
}

const MARK_RE = /^<!--\s*docs-test:\s*([^>]*?)\s*-->$/;

/** The Markdown files whose blocks must run: README.md and every docs/*.md. */
export function docFiles(root: string): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => join(root, 'docs', f));
  return [join(root, 'README.md'), ...docs];
}

/** Every fenced block of one file; throws on an unterminated fence or an unknown mark. */
export function extractBlocks(root: string, path: string): DocBlock[] {
  const file = relative(root, path);
  const lines = readFileSync(path, 'utf8').split('\n');
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(```+|~~~+)\s*([\w-]*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, lang] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && lines[j]!.trim() !== fence; j++) body.push(lines[j]!.startsWith(indent!) ? lines[j]!.slice(indent!.length) : lines[j]!);
    if (j === lines.length) throw new Error(`${file}:${i + 1}: unterminated code fence`);
    blocks.push({ file, line: i + 1, lang: lang!, code: body.join('\n') + '\n', marks: marksBefore(lines, i, `${file}:${i + 1}`) });
    i = j;
  }
  return blocks;
}

function marksBefore(lines: readonly string[], fenceIndex: number, where: string): Mark[] {
  let k = fenceIndex - 1;
  while (k >= 0 && lines[k]!.trim() === '') k--;
  const m = k >= 0 ? MARK_RE.exec(lines[k]!.trim()) : null;
  if (!m) return [];
  const words = m[1]!.split(',').map((w) => w.trim()).filter((w) => w.length > 0);
  for (const w of words) if (!(MARKS as readonly string[]).includes(w)) throw new Error(`${where}: unknown docs-test mark '${w}' (known: ${MARKS.join(', ')})`);
  return words as Mark[];
}
