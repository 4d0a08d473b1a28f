/**
 * JSON encoding of an object graph that keeps identity: a compiled program's lowered graph and
 * schedule share objects (a kernel group sits in `sched.kernels` and in a step, and is the key of
 * the program's kernel table; nodes sit in several lists), so a plain JSON round trip would break
 * them apart. Every object or array gets a slot in a table on first sight and is referenced by
 * index after that, so sharing and cycles survive.
 *
 * Encoded values: JSON strings, booleans, null and finite numbers (other than -0) as themselves;
 * anything else as a one-key object: `{"r": slot}` for objects, `{"n": "NaN" | "Infinity" |
 * "-Infinity" | "-0"}`, `{"u": 1}` for undefined, `{"b": "123"}` for bigints. Slots: `{"a": [...]}`
 * arrays, `{"o": {...}}` plain objects, `{"m": [[k, v], ...]}` Maps, `{"s": [...]}` Sets,
 * `{"t": [TypedArrayName, base64 bytes]}` typed arrays, and `{"x": [kind, data]}` for class
 * instances an `ExtensionCodec` knows (the caller's, e.g. Device).
 * Anything else (functions, symbols, unknown class instances) throws `NotSerializable`, so a
 * caller can decline to cache rather than store something it cannot rebuild.
 */

/** A value that the encoder cannot represent; the message names where in the graph it sits. */
export class NotSerializable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotSerializable';
  }
}

/** Encodes and revives instances of classes the generic encoder does not know. */
export interface ExtensionCodec {
  /** The kind and JSON data of `v`, or undefined when this codec does not handle it. */
  encode(v: object): { kind: string; data: unknown } | undefined;
  /** Rebuilds an instance; throw for an unknown kind. */
  decode(kind: string, data: unknown): object;
}

export interface EncodedGraph {
  readonly slots: unknown[];
  readonly root: unknown;
}

type Slot = { a: unknown[] } | { o: Record<string, unknown> } | { m: [unknown, unknown][] } | { s: unknown[] } | { t: [string, string] } | { x: [string, unknown] };

const TYPED_ARRAYS = {
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
} as const;
type TypedArrayName = keyof typeof TYPED_ARRAYS;

const NO_EXTENSIONS: ExtensionCodec = {
  encode: () => undefined,
  decode: (kind) => {
    throw new NotSerializable(`object graph: no codec for extension kind '${kind}'`);
  },
};

/** Encodes `root` (see the header for the format). `replace` substitutes objects before encoding (e.g. a sanitised copy). */
export function encodeObjectGraph(root: unknown, ext: ExtensionCodec = NO_EXTENSIONS, replace?: ReadonlyMap<object, unknown>): EncodedGraph {
  const slotOf = new Map<object, number>();
  const slots: Slot[] = [];
  const enc = (v0: unknown, where: string): unknown => {
    const v = typeof v0 === 'object' && v0 !== null && replace?.has(v0) ? replace.get(v0) : v0;
    switch (typeof v) {
      case 'string':
      case 'boolean':
        return v;
      case 'number':
        if (!Number.isFinite(v)) return { n: String(v) };
        return Object.is(v, -0) ? { n: '-0' } : v;
      case 'bigint':
        return { b: v.toString() };
      case 'undefined':
        return { u: 1 };
      case 'object':
        break;
      default:
        throw new NotSerializable(`object graph: cannot encode a ${typeof v} at ${where}`);
    }
    if (v === null) return null;
    const known = slotOf.get(v);
    if (known !== undefined) return { r: known };
    const index = slots.length;
    slotOf.set(v, index);
    slots.push({ a: [] }); // placeholder until filled (cycles refer to the index)
    let slot: Slot;
    if (Array.isArray(v)) {
      slot = { a: v.map((x, i) => enc(x, `${where}[${i}]`)) };
    } else if (v instanceof Map) {
      slot = { m: [...v].map(([k, x], i) => [enc(k, `${where}.key#${i}`), enc(x, `${where}.get(${String(k)})`)] as [unknown, unknown]) };
    } else if (v instanceof Set) {
      slot = { s: [...v].map((x, i) => enc(x, `${where}.item#${i}`)) };
    } else if (ArrayBuffer.isView(v) && v.constructor.name in TYPED_ARRAYS) {
      slot = { t: [v.constructor.name, Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64')] };
    } else {
      const proto = Object.getPrototypeOf(v) as unknown;
      if (proto === Object.prototype || proto === null) {
        const o: Record<string, unknown> = {};
        for (const k of Object.keys(v)) o[k] = enc((v as Record<string, unknown>)[k], `${where}.${k}`);
        slot = { o };
      } else {
        const e = ext.encode(v);
        if (!e) throw new NotSerializable(`object graph: cannot encode a ${(v as { constructor?: { name?: string } }).constructor?.name ?? 'class'} instance at ${where}`);
        slot = { x: [e.kind, e.data] };
      }
    }
    slots[index] = slot;
    return { r: index };
  };
  const encodedRoot = enc(root, '$');
  return { slots, root: encodedRoot };
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** Rebuilds what `encodeObjectGraph` encoded. Throws on malformed input (a corrupt entry). */
export function decodeObjectGraph(encoded: unknown, ext: ExtensionCodec = NO_EXTENSIONS): unknown {
  if (!isRecord(encoded) || !Array.isArray(encoded.slots) || !('root' in encoded)) throw new Error('object graph: expected { slots, root }');
  const raw = encoded.slots as unknown[];
  // First pass: an empty container per slot (extensions are built at once: they hold no references).
  const objs: object[] = raw.map((s, i) => {
    if (!isRecord(s)) throw new Error(`object graph: slot ${i} is not an object`);
    if (Array.isArray(s.a)) return [];
    if (isRecord(s.o)) return {};
    if (Array.isArray(s.m)) return new Map();
    if (Array.isArray(s.s)) return new Set();
    if (Array.isArray(s.t) && typeof s.t[0] === 'string' && s.t[0] in TYPED_ARRAYS && typeof s.t[1] === 'string') {
      const bytes = Buffer.from(s.t[1], 'base64');
      const Ctor = TYPED_ARRAYS[s.t[0] as TypedArrayName];
      const copy = new Uint8Array(bytes); // a fresh, aligned buffer
      if (copy.byteLength % Ctor.BYTES_PER_ELEMENT !== 0) throw new Error(`object graph: slot ${i} has a truncated ${s.t[0]}`);
      return new Ctor(copy.buffer, 0, copy.byteLength / Ctor.BYTES_PER_ELEMENT);
    }
    if (Array.isArray(s.x) && typeof s.x[0] === 'string') return ext.decode(s.x[0], s.x[1]);
    throw new Error(`object graph: slot ${i} has an unknown form`);
  });
  const dec = (v: unknown): unknown => {
    if (v === null || typeof v !== 'object') return v;
    if (!isRecord(v)) throw new Error('object graph: bare array outside a slot');
    if ('r' in v) {
      const o = typeof v.r === 'number' ? objs[v.r] : undefined;
      if (o === undefined) throw new Error(`object graph: dangling reference ${String(v.r)}`);
      return o;
    }
    if ('n' in v) {
      if (v.n === '-0') return -0;
      const n = Number(v.n);
      if (!Number.isNaN(n) || v.n === 'NaN') return n;
      throw new Error(`object graph: bad number ${String(v.n)}`);
    }
    if ('u' in v) return undefined;
    if ('b' in v && typeof v.b === 'string') return BigInt(v.b);
    throw new Error(`object graph: unknown value form ${JSON.stringify(v).slice(0, 80)}`);
  };
  raw.forEach((s0, i) => {
    const s = s0 as Record<string, unknown>;
    const o = objs[i]!;
    if (Array.isArray(s.a)) for (const x of s.a) (o as unknown[]).push(dec(x));
    else if (isRecord(s.o)) for (const [k, x] of Object.entries(s.o)) (o as Record<string, unknown>)[k] = dec(x);
    else if (Array.isArray(s.m)) {
      for (const pair of s.m as unknown[]) {
        if (!Array.isArray(pair) || pair.length !== 2) throw new Error(`object graph: slot ${i} has a bad map entry`);
        (o as Map<unknown, unknown>).set(dec(pair[0]), dec(pair[1]));
      }
    } else if (Array.isArray(s.s)) for (const x of s.s) (o as Set<unknown>).add(dec(x));
  });
  return dec(encoded.root);
}
