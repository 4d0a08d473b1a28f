/**
 * safetensors reading and writing (https://github.com/huggingface/safetensors).
 *
 * Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
 * (`{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?: {key: string}}`), then the
 * data buffer, which the tensors must cover exactly (sorted by offset, no holes, no overlaps).
 *
 * Reading streams: `openSafetensors` reads and validates only the header; each `get` reads one
 * tensor's byte range with positioned reads straight into that tensor's own storage, so a large
 * file is never held in one buffer. Writing streams too: header, then each tensor's bytes, into a
 * temporary file that is renamed over the target at the end.
 */
import { fs, os, path } from '../platform/index.js';
import { contiguous } from '../api/core.js';
import type { DeviceLike } from '../runtime/device.js';
import { Device } from '../runtime/device.js';
import type { DType } from '../tensor/dtype.js';
import { itemSize } from '../tensor/dtype.js';
import { fmtShape } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';

/** safetensors dtype names <-> Kiln dtypes (the formats' other dtypes are not supported). */
export const SAFETENSORS_DTYPES: Readonly<Record<string, DType>> = {
  F64: 'float64',
  F32: 'float32',
  F16: 'float16',
  BF16: 'bfloat16',
  I64: 'int64',
  I32: 'int32',
  U8: 'uint8',
  BOOL: 'bool',
};

const TO_SAFETENSORS: Readonly<Record<DType, string>> = {
  float64: 'F64',
  float32: 'F32',
  float16: 'F16',
  bfloat16: 'BF16',
  int64: 'I64',
  int32: 'I32',
  uint8: 'U8',
  bool: 'BOOL',
};

/** Guard against absurd headers (the reference implementation's limit). */
export const MAX_HEADER_SIZE = 100_000_000;

/** Positioned reads/writes are split into chunks below Node's 2 GiB per-call limit. */
const IO_CHUNK = 1 << 30;

export interface TensorInfo {
  /** The dtype as the file names it ('F32', 'BF16', ...). */
  readonly fileDtype: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Byte range within the data buffer (after the header). */
  readonly dataOffsets: readonly [number, number];
}

export interface GetOptions {
  /** Where the tensor should end up (read on the CPU, then moved). */
  device?: DeviceLike;
  /** Convert to this dtype after reading. */
  dtype?: DType;
}

export class SafetensorsError extends Error {
  override name = 'SafetensorsError';
}

function fail(file: string, msg: string): never {
  throw new SafetensorsError(`safetensors: ${file}: ${msg}`);
}

function checkHostEndianness(): void {
  if (os.endianness() !== 'LE') throw new SafetensorsError('safetensors: only little-endian hosts are supported');
}

/** Parses and validates a header JSON text against the data buffer size. */
export function parseHeader(
  file: string,
  text: string,
  dataSize: number,
): { tensors: Map<string, TensorInfo>; metadata: Record<string, string> } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    fail(file, `malformed header JSON: ${(e as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) fail(file, 'header JSON must be an object');
  const metadata: Record<string, string> = {};
  const tensors = new Map<string, TensorInfo>();
  for (const [name, value] of Object.entries(raw as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(file, `'__metadata__' must be an object of strings`);
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        if (typeof v !== 'string') fail(file, `'__metadata__' value for '${k}' must be a string, got ${JSON.stringify(v)}`);
        metadata[k] = v;
      }
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(file, `tensor '${name}': entry must be an object`);
    const entry = value as Record<string, unknown>;
    const fileDtype = entry.dtype;
    if (typeof fileDtype !== 'string') fail(file, `tensor '${name}': missing 'dtype'`);
    const dtype = SAFETENSORS_DTYPES[fileDtype];
    if (!dtype) fail(file, `tensor '${name}': unknown or unsupported dtype '${fileDtype}' (supported: ${Object.keys(SAFETENSORS_DTYPES).join(', ')})`);
    const shape = entry.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && (d as number) >= 0)) {
      fail(file, `tensor '${name}': 'shape' must be an array of non-negative integers, got ${JSON.stringify(shape)}`);
    }
    const offs = entry.data_offsets;
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((d) => Number.isSafeInteger(d) && (d as number) >= 0)) {
      fail(file, `tensor '${name}': 'data_offsets' must be [begin, end] non-negative integers, got ${JSON.stringify(offs)}`);
    }
    const [begin, end] = offs as [number, number];
    if (end < begin) fail(file, `tensor '${name}': data_offsets [${begin}, ${end}] end before begin`);
    if (end > dataSize) fail(file, `tensor '${name}': data_offsets [${begin}, ${end}] beyond the data buffer of ${dataSize} bytes (truncated file?)`);
    const n = (shape as number[]).reduce((a, b) => a * b, 1);
    const nbytes = n * itemSize(dtype);
    if (nbytes !== end - begin) {
      fail(file, `tensor '${name}': shape ${fmtShape(shape as number[])} ${fileDtype} needs ${nbytes} bytes but data_offsets [${begin}, ${end}] span ${end - begin}`);
    }
    tensors.set(name, { fileDtype, dtype, shape: Object.freeze([...(shape as number[])]), dataOffsets: [begin, end] });
  }
  // The data buffer must be covered exactly: sorted by offset, each tensor starts where the last ended.
  const sorted = [...tensors.entries()].sort((a, b) => a[1].dataOffsets[0] - b[1].dataOffsets[0] || a[1].dataOffsets[1] - b[1].dataOffsets[1]);
  let pos = 0;
  let prev = '';
  for (const [name, info] of sorted) {
    const [b, e] = info.dataOffsets;
    if (b !== pos) {
      if (b < pos) fail(file, `tensor '${name}': data_offsets [${b}, ${e}] overlap tensor '${prev}' (which ends at ${pos})`);
      fail(file, `tensor '${name}': data_offsets [${b}, ${e}] leave a hole: bytes ${pos}..${b} of the data buffer belong to no tensor`);
    }
    pos = e;
    prev = name;
  }
  if (pos !== dataSize) fail(file, `the tensors cover ${pos} bytes but the data buffer has ${dataSize} (trailing bytes belong to no tensor)`);
  return { tensors, metadata };
}

function readFully(fd: number, target: Uint8Array, position: number, file: string, what: string): void {
  let done = 0;
  while (done < target.length) {
    const want = Math.min(IO_CHUNK, target.length - done);
    const got = fs.readSync(fd, target, done, want, position + done);
    if (got === 0) fail(file, `unexpected end of file reading ${what} (${done} of ${target.length} bytes at ${position})`);
    done += got;
  }
}

function writeFully(fd: number, data: Uint8Array): void {
  let done = 0;
  while (done < data.length) {
    const n = Math.min(IO_CHUNK, data.length - done);
    done += fs.writeSync(fd, data, done, n);
  }
}

/** An open safetensors file: the header is parsed, tensors are read on demand. */
export class SafetensorsFile {
  private fd: number | null;
  readonly path: string;
  readonly metadata: Readonly<Record<string, string>>;
  private readonly tensors: Map<string, TensorInfo>;
  /** Byte offset of the data buffer in the file (8 + header length). */
  readonly dataStart: number;

  /** @internal Use openSafetensors. */
  constructor(file: string) {
    checkHostEndianness();
    this.path = file;
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      if (size < 8) fail(file, `file of ${size} bytes is too short for the 8-byte header length (truncated file?)`);
      const lenBuf = new Uint8Array(8);
      readFully(fd, lenBuf, 0, file, 'the header length');
      const n = new DataView(lenBuf.buffer).getBigUint64(0, true);
      if (n > BigInt(MAX_HEADER_SIZE)) fail(file, `header length ${n} exceeds the ${MAX_HEADER_SIZE}-byte limit (header too large or not a safetensors file)`);
      const headerLen = Number(n);
      if (8 + headerLen > size) fail(file, `header length ${headerLen} goes beyond the file size ${size} (truncated file?)`);
      const headerBytes = new Uint8Array(headerLen);
      readFully(fd, headerBytes, 8, file, 'the header');
      let text: string;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(headerBytes);
      } catch {
        fail(file, 'header is not valid UTF-8');
      }
      const { tensors, metadata } = parseHeader(file, text, size - 8 - headerLen);
      this.tensors = tensors;
      this.metadata = Object.freeze(metadata);
      this.dataStart = 8 + headerLen;
      this.fd = fd;
    } catch (e) {
      fs.closeSync(fd);
      throw e;
    }
  }

  /** Tensor names in header order. */
  keys(): string[] {
    return [...this.tensors.keys()];
  }

  has(name: string): boolean {
    return this.tensors.has(name);
  }

  info(name: string): TensorInfo {
    const info = this.tensors.get(name);
    if (!info) fail(this.path, `no tensor named '${name}'`);
    return info;
  }

  /** Reads one tensor into a fresh CPU tensor's storage, then converts/moves it as asked. */
  get(name: string, options: GetOptions = {}): Tensor {
    if (this.fd === null) fail(this.path, `get('${name}') after close()`);
    const info = this.info(name);
    const t = Tensor.empty(info.shape, info.dtype, new Device('cpu'));
    const nbytes = info.dataOffsets[1] - info.dataOffsets[0];
    if (nbytes > 0) {
      const dst = new Uint8Array(t.storage.cpuArrayBuffer(), 0, nbytes);
      readFully(this.fd, dst, this.dataStart + info.dataOffsets[0], this.path, `tensor '${name}'`);
      if (info.dtype === 'bool') for (let i = 0; i < nbytes; i++) if (dst[i]! > 1) dst[i] = 1;
    }
    let out = t;
    if (options.dtype !== undefined && options.dtype !== out.dtype) {
      out = t.to(options.dtype);
      t.dispose();
    }
    if (options.device !== undefined) {
      const moved = out.to(options.device);
      if (moved !== out) {
        out.dispose();
        out = moved;
      }
    }
    return out;
  }

  get closed(): boolean {
    return this.fd === null;
  }

  close(): void {
    if (this.fd === null) return;
    fs.closeSync(this.fd);
    this.fd = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** Opens a safetensors file, reading and validating only its header. */
export function openSafetensors(file: string): SafetensorsFile {
  return new SafetensorsFile(file);
}

/** Reads every tensor of a file (each straight into its own storage). */
export function loadSafetensors(file: string, options: GetOptions = {}): Record<string, Tensor> {
  const f = openSafetensors(file);
  try {
    const out: Record<string, Tensor> = {};
    for (const k of f.keys()) out[k] = f.get(k, options);
    return out;
  } finally {
    f.close();
  }
}

/** The reference implementation's dtype order (its Dtype enum); the writer sorts by it, descending. */
const DTYPE_RANK: Readonly<Record<DType, number>> = { bool: 0, uint8: 1, float16: 2, bfloat16: 3, int32: 4, float32: 5, float64: 6, int64: 7 };

/**
 * The header the writer produces: `__metadata__` first, then the tensors ordered as the reference
 * implementation orders them (dtype descending in its enum order: I64, F64, F32, I32, BF16, F16,
 * U8, BOOL; then by name), which also keeps every tensor aligned to its element size; the JSON is
 * compact and padded with spaces to a multiple of 8 bytes.
 */
export function buildHeader(
  entries: readonly { name: string; dtype: DType; shape: readonly number[] }[],
  metadata?: Record<string, string>,
): { header: Uint8Array; order: number[]; offsets: [number, number][] } {
  const order = entries.map((_, i) => i).sort((a, b) => {
    const d = DTYPE_RANK[entries[b]!.dtype] - DTYPE_RANK[entries[a]!.dtype];
    if (d !== 0) return d;
    const na = entries[a]!.name;
    const nb = entries[b]!.name;
    return na < nb ? -1 : na > nb ? 1 : 0;
  });
  const obj: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length > 0) obj.__metadata__ = metadata;
  const offsets: [number, number][] = new Array(entries.length);
  let pos = 0;
  for (const i of order) {
    const e = entries[i]!;
    const n = e.shape.reduce((a, b) => a * b, 1) * itemSize(e.dtype);
    offsets[i] = [pos, pos + n];
    obj[e.name] = { dtype: TO_SAFETENSORS[e.dtype], shape: [...e.shape], data_offsets: [pos, pos + n] };
    pos += n;
  }
  const json = new TextEncoder().encode(JSON.stringify(obj));
  const padded = Math.ceil(json.length / 8) * 8;
  const header = new Uint8Array(8 + padded).fill(0x20);
  new DataView(header.buffer).setBigUint64(0, BigInt(padded), true);
  header.set(json, 8);
  return { header, order, offsets };
}

/**
 * Writes tensors (any device, dtype among the supported ones, any strides) to a safetensors file:
 * header first, then each tensor's bytes (contiguous CPU copies made one at a time where needed),
 * into a temporary file in the same folder that is renamed over `file` when complete.
 */
export function saveSafetensors(file: string, tensors: Record<string, Tensor>, metadata?: Record<string, string>): void {
  checkHostEndianness();
  const names = Object.keys(tensors);
  if (names.includes('__metadata__')) fail(file, `'__metadata__' cannot be used as a tensor name`);
  if (metadata) {
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== 'string') fail(file, `metadata value for '${k}' must be a string, got ${typeof v}`);
    }
  }
  const entries = names.map((name) => {
    const t = tensors[name]!;
    if (!(t instanceof Tensor)) fail(file, `'${name}' is not a Tensor`);
    t.assertAlive('saveSafetensors');
    return { name, dtype: t.dtype, shape: t.shape };
  });
  const { header, order } = buildHeader(entries, metadata);
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}.tmp`);
  const fd = fs.openSync(tmp, 'w');
  let ok = false;
  try {
    writeFully(fd, header);
    for (const i of order) {
      const t = tensors[entries[i]!.name]!;
      if (t.numel() === 0) continue;
      let host = t.device.type === 'cpu' ? t : t.to('cpu');
      if (!host.isContiguous()) {
        const c = contiguous(host);
        if (host !== t) host.dispose();
        host = c;
      }
      const size = itemSize(host.dtype);
      writeFully(fd, new Uint8Array(host.storage.cpuArrayBuffer(), host.offset * size, host.numel() * size));
      if (host !== t) host.dispose();
    }
    fs.fsyncSync(fd);
    ok = true;
  } finally {
    fs.closeSync(fd);
    if (!ok) fs.rmSync(tmp, { force: true });
  }
  fs.renameSync(tmp, file);
}
