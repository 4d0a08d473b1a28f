/** Readable printing in PyTorch's style: aligned columns, 4 decimals or scientific, summarised edges. */
import type { DType } from './dtype.js';
import { isFloating } from './dtype.js';
import type { Device } from '../runtime/device.js';

interface Printable {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly device: Device;
  readonly requiresGrad: boolean;
  numel(): number;
  toFlatArray(): number[];
}

// Like torch's print options: summarise above 1000 elements, showing 3 items at each edge.
const THRESHOLD = 1000;
const EDGE = 3;

export function formatTensor(t: Printable): string {
  const flat = t.toFlatArray();
  const summarize = flat.length > THRESHOLD;
  const fmt = makeFormatter(t.dtype, summarize ? sampleValues(flat, t.shape) : flat);
  const prefix = 'tensor(';
  let body: string;
  if (t.shape.length === 0) body = fmt(flat[0]!);
  else body = formatDim(flat, t.shape, 0, 0, fmt, summarize, prefix.length);
  const extras: string[] = [];
  if (t.device.type !== 'cpu') extras.push(`device='${t.device.toString()}'`);
  const defaultDtype = t.dtype === 'float32' || t.dtype === 'int64' || t.dtype === 'bool';
  if (!defaultDtype || t.numel() === 0) extras.push(`dtype=${t.dtype}`);
  if (t.numel() === 0 && t.shape.length > 1) extras.unshift(`size=[${t.shape.join(', ')}]`);
  if (t.requiresGrad) extras.push('requiresGrad=true');
  return `${prefix}${body}${extras.length ? ', ' + extras.join(', ') : ''})`;
}

function sampleValues(flat: number[], shape: readonly number[]): number[] {
  const last = shape[shape.length - 1] ?? 1;
  const out: number[] = [];
  for (let i = 0; i < flat.length; i += last) {
    const row = flat.slice(i, i + last);
    out.push(...row.slice(0, EDGE), ...row.slice(-EDGE));
    if (out.length > 4 * THRESHOLD) break;
  }
  return out;
}

function makeFormatter(dtype: DType, values: number[]): (v: number) => string {
  if (dtype === 'bool') return (v) => (v ? 'True' : 'False').padStart(5);
  if (!isFloating(dtype)) {
    const width = Math.max(1, ...values.map((v) => String(v).length));
    return (v) => String(v).padStart(width);
  }
  const finite = values.filter((v) => Number.isFinite(v));
  const maxAbs = Math.max(0, ...finite.map(Math.abs));
  const nonZero = finite.filter((v) => v !== 0).map(Math.abs);
  const minAbs = nonZero.length ? Math.min(...nonZero) : 0;
  const allInt = finite.every((v) => Number.isInteger(v));
  const sci = maxAbs >= 1e8 || (minAbs > 0 && minAbs < 1e-4) || (minAbs > 0 && maxAbs / minAbs > 1e3 && !allInt);
  const one = (v: number): string => {
    if (Number.isNaN(v)) return 'nan';
    if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
    if (sci) return v.toExponential(4).replace(/e([+-])(\d)$/, 'e$10$2');
    if (allInt) return `${v.toFixed(0)}.`;
    return v.toFixed(4);
  };
  const width = Math.max(1, ...values.map((v) => one(v).length));
  return (v) => one(v).padStart(width);
}

function formatDim(
  flat: number[],
  shape: readonly number[],
  d: number,
  start: number,
  fmt: (v: number) => string,
  summarize: boolean,
  indent: number,
): string {
  const n = shape[d]!;
  const inner = shape.slice(d + 1).reduce((a, b) => a * b, 1);
  const idx = summarize && n > 2 * EDGE ? [...range(0, EDGE), -1, ...range(n - EDGE, n)] : range(0, n);
  if (d === shape.length - 1) {
    return '[' + idx.map((i) => (i < 0 ? '...' : fmt(flat[start + i]!))).join(', ') + ']';
  }
  const sep = ',' + '\n'.repeat(shape.length - d - 1) + ' '.repeat(indent + 1);
  return (
    '[' +
    idx.map((i) => (i < 0 ? '...' : formatDim(flat, shape, d + 1, start + i * inner, fmt, summarize, indent + 1))).join(sep) +
    ']'
  );
}

function range(a: number, b: number): number[] {
  const out: number[] = [];
  for (let i = a; i < b; i++) out.push(i);
  return out;
}
