/**
 * Packed kernel arguments. A generated kernel's parameters are pointers and integers only; this
 * module gives each its byte offset under the C ABI (every parameter aligned to its own size) and
 * the exact total size, which is what the driver's packed-argument launch path (`extra` with
 * CU_LAUNCH_PARAM_BUFFER_SIZE) requires: a larger size fails the launch with
 * CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (see shared/notes/gpu-facts.md). The block itself is built
 * here too, so a launcher only copies bytes.
 */

/** f64: a host scalar (only eager one-node programs take one; see ArgSource 'scalar'). */
export type ParamType = 'ptr' | 'i32' | 'i64' | 'f64';

export const PARAM_BYTES: Readonly<Record<ParamType, number>> = { ptr: 8, i32: 4, i64: 8, f64: 8 };

/** Where a parameter's value comes from at launch time. */
export type ArgSource =
  /** Device address of operand k (base pointer plus the operand's element offset). */
  | { readonly kind: 'operand'; readonly k: number }
  /** Device address of the launch's workspace plus a byte offset. */
  | { readonly kind: 'workspace' }
  /** An integer computed from the layout (a size, a stride, a partial count). */
  | { readonly kind: 'int'; readonly what: string }
  /** A host value passed as a double: an eager op's scalar operand k ('p<k>') or parameter ('s<j>'). */
  | { readonly kind: 'scalar'; readonly what: string };

export interface Param {
  readonly name: string;
  readonly type: ParamType;
  readonly source: ArgSource;
}

export interface ParamSlot extends Param {
  readonly offset: number;
  readonly size: number;
}

export interface ArgLayout {
  readonly params: readonly ParamSlot[];
  /** Exact byte size of the parameter list: end of the last parameter, no tail padding. */
  readonly size: number;
}

export function argLayout(params: readonly Param[]): ArgLayout {
  let off = 0;
  const slots = params.map((p): ParamSlot => {
    const size = PARAM_BYTES[p.type];
    off = Math.ceil(off / size) * size;
    const slot = { ...p, offset: off, size };
    off += size;
    return slot;
  });
  return { params: slots, size: off };
}

const TWO32 = 2 ** 32;

/**
 * Writes argument values into one block of exactly `layout.size` bytes. Pointers are bigint device
 * addresses (or numbers below 2^53); integers must fit their type.
 */
export function packArgs(layout: ArgLayout, values: readonly (number | bigint)[]): Uint8Array {
  if (values.length !== layout.params.length) throw new Error(`packArgs: ${layout.params.length} parameters, got ${values.length} values`);
  const buf = new Uint8Array(layout.size);
  const v = new DataView(buf.buffer);
  layout.params.forEach((p, i) => {
    const x = values[i]!;
    if (p.type === 'f64') v.setFloat64(p.offset, Number(x), true);
    else if (p.type === 'i32') {
      const n = Number(x);
      if (!Number.isInteger(n) || n < -(2 ** 31) || n >= 2 ** 31) throw new RangeError(`packArgs: ${p.name} = ${String(x)} does not fit int32`);
      v.setInt32(p.offset, n, true);
    } else if (typeof x === 'bigint') v.setBigInt64(p.offset, x, true);
    else {
      if (!Number.isSafeInteger(x)) throw new RangeError(`packArgs: ${p.name} = ${x} is not a safe integer`);
      const hi = Math.floor(x / TWO32);
      v.setUint32(p.offset, x - hi * TWO32, true);
      v.setInt32(p.offset + 4, hi, true);
    }
  });
  return buf;
}
