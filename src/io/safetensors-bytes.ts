/**
 * safetensors from bytes in memory: `parseSafetensors(bytes)` reads a whole file that the caller
 * already holds (a browser's `fetch(...).arrayBuffer()`, a bundled asset), where `openSafetensors`
 * needs a file system. The header is checked by the same parseHeader as files are, so every class
 * of malformed file fails with the same message; each tensor's bytes are copied into its own
 * storage, so the caller's buffer may be dropped (or reused) at once and no alignment is needed.
 * Nothing here touches the platform: it runs in a browser as in Node.
 */
import { Device } from '../runtime/device.js';
import { Tensor } from '../tensor/tensor.js';
import { type GetOptions, MAX_HEADER_SIZE, parseHeader, SafetensorsError } from './safetensors.js';

export interface ParseOptions extends GetOptions {
  /** Names the bytes in error messages (default 'bytes'), as a path does for files. */
  name?: string;
}

/** The tensors of a safetensors file given as bytes, each converted/moved as `options` asks. */
export function parseSafetensors(bytes: Uint8Array | ArrayBuffer, options: ParseOptions = {}): Record<string, Tensor> {
  const name = options.name ?? 'bytes';
  const fail = (msg: string): never => {
    throw new SafetensorsError(`safetensors: ${name}: ${msg}`);
  };
  // Tensor storage is host-endian; the format is little-endian (the file reader checks os.endianness).
  if (new Uint8Array(Uint16Array.of(1).buffer)[0] !== 1) fail('only little-endian hosts are supported');
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  if (u8.length < 8) fail(`${u8.length} bytes are too short for the 8-byte header length (truncated file?)`);
  const n = new DataView(u8.buffer, u8.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER_SIZE)) fail(`header length ${n} exceeds the ${MAX_HEADER_SIZE}-byte limit (header too large or not a safetensors file)`);
  const headerLen = Number(n);
  if (8 + headerLen > u8.length) fail(`header length ${headerLen} goes beyond the ${u8.length} bytes given (truncated file?)`);
  let text = '';
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(u8.subarray(8, 8 + headerLen));
  } catch {
    fail('header is not valid UTF-8');
  }
  const dataStart = 8 + headerLen;
  const { tensors } = parseHeader(name, text, u8.length - dataStart);
  const out: Record<string, Tensor> = {};
  for (const [key, info] of tensors) {
    const t = Tensor.empty(info.shape, info.dtype, new Device('cpu'));
    const [begin, end] = info.dataOffsets;
    if (end > begin) {
      const dst = new Uint8Array(t.storage.cpuArrayBuffer(), 0, end - begin);
      dst.set(u8.subarray(dataStart + begin, dataStart + end));
      // A bool byte other than 0/1 reads as true (as the file reader normalises it).
      if (info.dtype === 'bool') for (let i = 0; i < dst.length; i++) if (dst[i]! > 1) dst[i] = 1;
    }
    let v = t;
    if (options.dtype !== undefined && options.dtype !== v.dtype) {
      v = t.to(options.dtype);
      t.dispose();
    }
    if (options.device !== undefined) {
      const moved = v.to(options.device);
      if (moved !== v) {
        v.dispose();
        v = moved;
      }
    }
    out[key] = v;
  }
  return out;
}
