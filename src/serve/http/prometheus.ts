/**
 * The Prometheus text exposition format (version 0.0.4), just what the server needs: counters with
 * labels, gauges read when scraped, and histograms with fixed buckets. Each family renders its
 * `# HELP` and `# TYPE` lines and its samples; label values are escaped as the format requires.
 */

export const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

type Labels = Readonly<Record<string, string>>;

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function renderLabels(labels: Labels): string {
  // No labels (the token counters, once per streamed delta): no entries to build.
  let any = false;
  for (const _ in labels) {
    any = true;
    break;
  }
  if (!any) return '';
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

function renderValue(v: number): string {
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return Number.isNaN(v) ? 'NaN' : String(v);
}

interface Family {
  render(): string;
}

abstract class Metric implements Family {
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly type: string,
  ) {
    if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(name)) throw new Error(`prometheus: bad metric name '${name}'`);
  }

  render(): string {
    return `# HELP ${this.name} ${this.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}\n# TYPE ${this.name} ${this.type}\n${this.samples().join('')}`;
  }

  protected abstract samples(): string[];
}

export class Counter extends Metric {
  private readonly values = new Map<string, { labels: Labels; value: number }>();

  constructor(name: string, help: string) {
    super(name, help, 'counter');
  }

  inc(labels: Labels = {}, by = 1): void {
    if (!(by >= 0)) throw new Error(`prometheus: counter ${this.name} can only grow, got ${by}`);
    const key = renderLabels(labels);
    const cur = this.values.get(key);
    if (cur) cur.value += by;
    else this.values.set(key, { labels, value: by });
  }

  get(labels: Labels = {}): number {
    return this.values.get(renderLabels(labels))?.value ?? 0;
  }

  protected samples(): string[] {
    // A counter without labels is shown at 0 before its first increment.
    if (this.values.size === 0) return [`${this.name} 0\n`];
    return [...this.values.values()].map(({ labels, value }) => `${this.name}${renderLabels(labels)} ${renderValue(value)}\n`);
  }
}

export class Gauge extends Metric {
  constructor(
    name: string,
    help: string,
    private readonly read: () => number,
  ) {
    super(name, help, 'gauge');
  }

  protected samples(): string[] {
    return [`${this.name} ${renderValue(this.read())}\n`];
  }
}

export class Histogram extends Metric {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(
    name: string,
    help: string,
    readonly buckets: readonly number[],
  ) {
    super(name, help, 'histogram');
    if (!buckets.every((b, i) => i === 0 || b > buckets[i - 1]!)) throw new Error(`prometheus: histogram ${name} buckets must increase`);
    this.counts = new Array<number>(buckets.length).fill(0);
  }

  observe(v: number): void {
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]!) this.counts[i]!++;
    this.sum += v;
    this.count++;
  }

  get observations(): number {
    return this.count;
  }

  protected samples(): string[] {
    const out = this.buckets.map((b, i) => `${this.name}_bucket{le="${renderValue(b)}"} ${this.counts[i]}\n`);
    out.push(`${this.name}_bucket{le="+Inf"} ${this.count}\n`, `${this.name}_sum ${renderValue(this.sum)}\n`, `${this.name}_count ${this.count}\n`);
    return out;
  }
}

export class Registry {
  private readonly families: Family[] = [];

  add<T extends Family>(family: T): T {
    this.families.push(family);
    return family;
  }

  render(): string {
    return this.families.map((f) => f.render()).join('');
  }
}
