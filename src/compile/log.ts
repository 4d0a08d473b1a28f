/**
 * Compiler logging. `KILN_LOG=graph,output_code` (read once, when this module loads) or
 * `kiln.compile(fn, { log: ['graph', 'output_code'] })` selects what is printed:
 * - graph: the captured graph (formatGraph) and the graph after the passes
 * - output_code: the backend program's describe()
 * - guards: the guard key of each new entry
 * - recompiles: why each recompilation happened
 * `KILN_LOG=all` turns everything on. Output goes to stderr unless a sink is installed.
 * The same variable's runtime topics (build, cache, device, tune) are runtime/notes.ts's; each side
 * ignores the other's names.
 */
import { writeStderr } from '../platform/index.js';
import { getOption } from '../runtime/config.js';
export type LogArtifact = 'graph' | 'output_code' | 'guards' | 'recompiles';

const ARTIFACTS: readonly LogArtifact[] = ['graph', 'output_code', 'guards', 'recompiles'];

export function parseLogSpec(spec: string | undefined): Set<LogArtifact> {
  const out = new Set<LogArtifact>();
  for (const raw of (spec ?? '').split(/[\s,]+/)) {
    const s = raw.trim().replace(/^\+/, '');
    if (!s) continue;
    if (s === 'all') ARTIFACTS.forEach((a) => out.add(a));
    else if ((ARTIFACTS as readonly string[]).includes(s)) out.add(s as LogArtifact);
  }
  return out;
}

const envArtifacts = parseLogSpec(getOption('KILN_LOG'));

export type LogSink = (artifact: LogArtifact, text: string) => void;

let sink: LogSink = (artifact, text) => {
  writeStderr(`[kiln.compile:${artifact}]\n${text}\n`);
};

/** Replaces where logs go (tests, tools); returns the previous sink. */
export function setLogSink(s: LogSink): LogSink {
  const prev = sink;
  sink = s;
  return prev;
}

export function logEnabled(artifact: LogArtifact, extra?: readonly LogArtifact[]): boolean {
  return envArtifacts.has(artifact) || (extra?.includes(artifact) ?? false);
}

/** Logs `text()` if the artifact is enabled (the text is only built when it is). */
export function log(artifact: LogArtifact, extra: readonly LogArtifact[] | undefined, text: () => string): void {
  if (logEnabled(artifact, extra)) sink(artifact, text());
}
