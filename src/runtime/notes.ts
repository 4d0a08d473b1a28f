/**
 * No silent waits: what Kiln says on stderr about its own plumbing.
 *
 * - A build note: a native (cc) or NVRTC build that took at least KILN_BUILD_NOTE_MS (default 500)
 *   prints one line with what was built and how long it took, so a first run that stalls for
 *   seconds says why and that it happens once. Builds block in a worker wait, so the line comes
 *   when the build ends; it is one line per batch, not per kernel. KILN_QUIET=1 silences it.
 * - Runtime log topics in KILN_LOG (the variable the compiler's logs use; compile/log.ts ignores
 *   these names and this module ignores the compiler's): `build` every build with its time, however
 *   short; `cache` cache-object hits; `device` which device and code path were chosen and why;
 *   `tune` autotuning decisions (what was timed and won, and where tuning fell back and why).
 *   `all` turns these on too.
 *
 * Runtime layer: callers in kernels/ and compile/ time their builds with `timeBuild`; the clock
 * and the sink are parameters so tests need no real timing.
 */
import { writeStderr } from '../platform/index.js';
import { getOption } from './config.js';

export type RuntimeLogTopic = 'build' | 'cache' | 'device' | 'tune';
const TOPICS: readonly RuntimeLogTopic[] = ['build', 'cache', 'device', 'tune'];

let topicsMemo: { spec: string | undefined; topics: ReadonlySet<RuntimeLogTopic> } | undefined;

/** The runtime topics a KILN_LOG value turns on (unknown names are the compiler's, or typos). */
export function parseRuntimeLogTopics(spec: string | undefined): Set<RuntimeLogTopic> {
  const out = new Set<RuntimeLogTopic>();
  for (const raw of (spec ?? '').split(/[\s,]+/)) {
    const s = raw.trim().replace(/^\+/, '');
    if (s === 'all') TOPICS.forEach((t) => out.add(t));
    else if ((TOPICS as readonly string[]).includes(s)) out.add(s as RuntimeLogTopic);
  }
  return out;
}

export function runtimeLogEnabled(topic: RuntimeLogTopic): boolean {
  const spec = getOption('KILN_LOG');
  let memo = topicsMemo;
  if (memo === undefined || memo.spec !== spec) topicsMemo = memo = { spec, topics: parseRuntimeLogTopics(spec) };
  return memo.topics.has(topic);
}

export type NoteSink = (line: string) => void;
let sink: NoteSink = (line) => {
  writeStderr(`${line}\n`);
};

/** Replaces where notes and runtime logs go (tests, tools); returns the previous sink. */
export function setNoteSink(s: NoteSink): NoteSink {
  const prev = sink;
  sink = s;
  return prev;
}

/** Logs `text()` under `topic` when KILN_LOG enables it (the text is only built then). */
export function runtimeLog(topic: RuntimeLogTopic, text: () => string): void {
  if (runtimeLogEnabled(topic)) sink(`kiln[${topic}]: ${text()}`);
}

/** Milliseconds as the note prints them. */
export function formatDuration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** Reports a finished build of `what` (e.g. "native CPU kernels (kiln_ops)") that took `ms`. */
export function noteBuild(what: string, ms: number): void {
  if (ms >= getOption('KILN_BUILD_NOTE_MS') && !getOption('KILN_QUIET')) {
    sink(`kiln: built ${what} in ${formatDuration(ms)} (first use; cached on disk for later runs, see kiln cache info)`);
  } else {
    runtimeLog('build', () => `built ${what} in ${formatDuration(ms)}`);
  }
}

/** Runs the build `fn` and notes it; `what` may depend on the result (how many kernels built). */
export function timeBuild<T>(what: string | ((result: T) => string), fn: () => T, clock: () => number = () => performance.now()): T {
  const t0 = clock();
  const r = fn();
  noteBuild(typeof what === 'string' ? what : what(r), clock() - t0);
  return r;
}

/** As timeBuild for an async build (the note comes when it resolves). */
export async function timeBuildAsync<T>(what: string, fn: () => Promise<T>, clock: () => number = () => performance.now()): Promise<T> {
  const t0 = clock();
  const r = await fn();
  noteBuild(what, clock() - t0);
  return r;
}
