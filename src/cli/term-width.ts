/**
 * Terminal-width fitting for the CLI's tables and progress line, as pure functions of the text
 * and a column count (callers pass `stream.columns` only when the stream is a terminal, so piped
 * output and logs keep full, unchanged lines).
 *
 * A table wider than the terminal first shortens its first column (workload names, with '…') to
 * no less than MIN_FIRST characters; if it still does not fit, the other columns are wrapped into
 * blocks, each repeating the first column, so no number is ever cut.
 */

const MIN_FIRST = 12;
const GAP = '  ';

/** `text` cut to `columns - 1` characters (with '…'), so the cursor never wraps the line. */
export function fitLine(text: string, columns: number | undefined): string {
  if (columns === undefined || columns < 2) return text;
  const max = columns - 1;
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function cut(s: string, width: number): string {
  return s.length <= width ? s : `${s.slice(0, width - 1)}…`;
}

/**
 * A table: header, a rule, the rows. The first `leftAligned` columns are padded on the right, the
 * others (numbers) on the left. With `columns`, the result fits that width (see the header).
 */
export function renderTable(header: readonly string[], body: readonly (readonly string[])[], leftAligned: number, columns?: number): string {
  const all = [header, ...body];
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const total = (ws: readonly number[]): number => ws.reduce((s, w) => s + w, 0) + GAP.length * (ws.length - 1);
  if (columns !== undefined && total(widths) > columns) {
    widths[0] = Math.max(Math.min(widths[0]!, MIN_FIRST), widths[0]! - (total(widths) - columns));
  }
  const block = (cols: readonly number[]): string => {
    const line = (r: readonly string[]): string =>
      cols
        .map((i) => {
          const c = i === 0 ? cut(r[i]!, widths[0]!) : r[i]!;
          return i < leftAligned ? c.padEnd(widths[i]!) : c.padStart(widths[i]!);
        })
        .join(GAP)
        .trimEnd();
    return [line(header), cols.map((i) => '-'.repeat(widths[i]!)).join(GAP), ...body.map(line)].join('\n');
  };
  // Column groups that fit beside the first column (one group when nothing needs wrapping).
  const groups: number[][] = [];
  for (let i = 1; i < header.length; i++) {
    const g = groups[groups.length - 1];
    if (g && (columns === undefined || total([widths[0]!, ...g.map((j) => widths[j]!), widths[i]!]) <= columns)) g.push(i);
    else groups.push([i]);
  }
  if (groups.length === 0) return block([0]);
  return groups.map((g) => block([0, ...g])).join('\n\n');
}
