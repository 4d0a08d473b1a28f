/**
 * Stop strings over text that arrives in pieces (detokenized tokens). push(piece) returns the text
 * that is safe to emit and whether a stop string was found; the stop string and anything after it
 * are never emitted. While no stop string has matched, the longest tail of the text that is the
 * start of some stop string is held back, because the next piece may complete it; flush() gives the
 * held text up when the request ends another way.
 *
 * Why searching only held + new text is enough: if a stop string ends in the new piece and starts
 * at position p, the text from p to the old end is a prefix of it, hence part of the held tail.
 */

export interface StopResult {
  /** Text to emit now. */
  readonly text: string;
  /** A stop string matched: `text` ends just before it and the request is over. */
  readonly stopped: boolean;
}

export class StopMatcher {
  private held = '';
  private done = false;

  constructor(private readonly stops: readonly string[]) {}

  push(piece: string): StopResult {
    if (this.done) return { text: '', stopped: true };
    const buf = this.held + piece;
    if (this.stops.length === 0) return { text: buf, stopped: false };
    let first = -1;
    for (const s of this.stops) {
      const i = buf.indexOf(s);
      if (i >= 0 && (first < 0 || i < first)) first = i;
    }
    if (first >= 0) {
      this.done = true;
      this.held = '';
      return { text: buf.slice(0, first), stopped: true };
    }
    const keep = this.partialTail(buf);
    this.held = buf.slice(buf.length - keep);
    return { text: buf.slice(0, buf.length - keep), stopped: false };
  }

  /** The held text, when the request ended without a stop string. */
  flush(): string {
    const t = this.done ? '' : this.held;
    this.held = '';
    return t;
  }

  /** Length of the longest suffix of `buf` that is a proper prefix of a stop string. */
  private partialTail(buf: string): number {
    let best = 0;
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, buf.length); k > best; k--) {
        if (buf.endsWith(s.slice(0, k))) {
          best = k;
          break;
        }
      }
    }
    return best;
  }
}
