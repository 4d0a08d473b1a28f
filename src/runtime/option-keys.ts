/**
 * Option objects reject keys they do not know: `kiln.compile(fn, { mdoe: 'max-autotune' })` would
 * otherwise run with the default mode and nobody would notice the typo (issue #18 item 8). The
 * allowed keys are listed at each call site next to the interface they mirror. This is the bottom
 * layer so that every layer's option objects can use it.
 */

/**
 * Every key of an options interface, each `true`: written as an object literal at the call site, it
 * makes the compiler check that the list of allowed keys is complete and has no stray names.
 */
export type KeySet<T> = Record<keyof Required<T>, true>;

/** The allowed keys of a KeySet, for checkOptionKeys. */
export const keysOf = <T>(set: KeySet<T>): readonly string[] => Object.keys(set);

/**
 * Throws a TypeError naming `fn`, the unknown key and the valid ones (with a close match as a
 * suggestion) when `options` has an own key outside `allowed`. null/undefined options pass.
 */
export function checkOptionKeys(fn: string, options: object | null | undefined, allowed: readonly string[]): void {
  if (options === null || options === undefined) return;
  for (const key of Object.keys(options)) {
    if (allowed.includes(key)) continue;
    let near: string | undefined;
    let best = Infinity;
    for (const a of allowed) {
      const d = editDistance(a.toLowerCase(), key.toLowerCase());
      if (d <= Math.max(1, Math.floor(a.length / 3)) && d < best) [near, best] = [a, d];
    }
    const hint = near !== undefined ? ` (did you mean '${near}'?)` : '';
    throw new TypeError(`${fn}: unknown option '${key}'${hint}; valid options: ${allowed.join(', ')}`);
  }
}

// Edit distance counting a swap of neighbours as one edit (the commonest typo: mdoe, dtpye);
// option names are short, so the quadratic table is nothing.
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i]!;
      const up = d[i - 1]!;
      row[j] = Math.min(up[j]! + 1, row[j - 1]! + 1, up[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}
