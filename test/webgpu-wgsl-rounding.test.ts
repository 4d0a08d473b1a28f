/**
 * The 16-bit rounding of the WGSL kernels, checked without a GPU: the storage helpers
 * (kiln_f16_bits, kiln_f16_value, kiln_bf16_bits) are translated from their WGSL text into
 * JavaScript by a small translator for the subset they are written in and compared bit for bit
 * with half.ts (round to nearest even, subnormals, overflow, NaN); and the fused renderer's
 * float16/bfloat16 casts and stores are checked to go through them, never through WGSL's own
 * f32 -> f16 conversion or pack2x16float, whose rounding WGSL leaves to the implementation (an
 * H200's Vulkan driver folded unpack2x16float(pack2x16float(x)) to x, so sum(x, dtype=float16)
 * and x.to(float16).to(bfloat16) rounded nothing to float16).
 *
 * The element code of a rendered cast chain is also run through the translator, with
 * pack2x16float modelled as one conversion WGSL allows (toward zero), and compared with the CPU.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { FusedGroup, FusedNode, FusedValue } from '../src/kernels/webgpu/fused/group.js';
import { renderFused, type RenderSpec } from '../src/kernels/webgpu/fused/render.js';
import { BF16_PRELUDE, F16_PRELUDE, storagePrelude, storeStmt } from '../src/kernels/webgpu/storage.js';
import { F16_STORE_NATIVE } from '../src/kernels/webgpu/f16-store-probe.js';
import { setOption } from '../src/runtime/config.js';
import type { DType } from '../src/tensor/dtype.js';
import { bfloat16BitsToFloat32, float16BitsToFloat32, float32ToBfloat16Bits, float32ToFloat16Bits } from '../src/tensor/half.js';

const F = new Float32Array(1);
const U = new Uint32Array(F.buffer);
const f2u = (x: number): number => {
  F[0] = x;
  return U[0]!;
};
const u2f = (u: number): number => {
  U[0] = u >>> 0;
  return F[0]!;
};

/** WGSL expression text (the subset the helpers and element code use) as JavaScript. */
function jsExpr(s: string): string {
  return s
    .replace(/bitcast<u32>\(/g, '__f2u(')
    .replace(/bitcast<f32>\(/g, '__u2f(')
    .replace(/\bf32\(/g, 'Math.fround(')
    .replace(/\bvec2f\(/g, '__vec2(')
    .replace(/\b(0x[0-9a-fA-F]+)[ui]\b/g, '$1')
    .replace(/\b(\d+(?:\.\d+)?(?:e[-+]?\d+)?)[uif]\b/g, '$1')
    .replace(/>>/g, '>>>');
}

/** WGSL functions (fn name(a: T, ...) -> T { let ...; if (...) { return ...; } return ...; }) as JavaScript. */
function jsFunctions(wgsl: string): string {
  return jsExpr(wgsl)
    .replace(/fn (\w+)\(([^)]*)\) -> \w+ \{/g, (_, name: string, params: string) => `function ${name}(${params.split(',').map((p) => p.split(':')[0]!.trim()).filter(Boolean).join(', ')}) {`)
    .replace(/\blet (\w+)(?::\s*\w+)? =/g, 'const $1 =');
}

/** Builtins of the translated code; pack2x16float truncates toward zero (one rounding WGSL allows). */
const BUILTINS = {
  __f2u: f2u,
  __u2f: u2f,
  __vec2: (x: number, y: number) => [x, y],
  select: (f: unknown, t: unknown, c: boolean) => (c ? t : f),
  pack2x16float: ([x]: number[]) => {
    const r = float32ToFloat16Bits(x!);
    return float16BitsToFloat32(r) !== Math.fround(x!) && Math.abs(float16BitsToFloat32(r)) > Math.abs(x!) ? r - 1 : r;
  },
  unpack2x16float: (h: number) => ({ x: float16BitsToFloat32(h & 0xffff) }),
};

function compile<T>(wgsl: string, body: string): T {
  const names = Object.keys(BUILTINS);
  return new Function(...names, `${jsFunctions(wgsl)}\n${body}`)(...names.map((n) => BUILTINS[n as keyof typeof BUILTINS])) as T;
}

interface Helpers {
  f16bits: (x: number) => number;
  f16value: (h: number) => number;
  bf16bits: (x: number) => number;
}
const H = compile<Helpers>(`${F16_PRELUDE}\n${BF16_PRELUDE}`, 'return { f16bits: kiln_f16_bits, f16value: kiln_f16_value, bf16bits: kiln_bf16_bits };');

/** f32 inputs at and around every rounding boundary of a 16-bit format with `shift` dropped mantissa bits, plus specials and random bit patterns. */
function probes(): number[] {
  const out: number[] = [0, -0, Infinity, -Infinity, NaN, 65504, 65519, 65519.996, 65520, 65536, 1e6, 2 ** -24, 2 ** -25, 2 ** -26, 3 * 2 ** -26, 2 ** -14, 2 ** -14 - 2 ** -25];
  for (let h = 0; h < 0x7c00; h++) {
    const lo = float16BitsToFloat32(h);
    const hi = float16BitsToFloat32(h + 1);
    const mid = (lo + hi) / 2;
    for (const v of [lo, mid, Math.fround(mid), u2f(f2u(Math.fround(mid)) + 1), u2f(f2u(Math.fround(mid)) - 1)]) out.push(v, -v);
  }
  let seed = 12345;
  for (let i = 0; i < 100000; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    out.push(u2f(seed ^ (seed << 13)));
  }
  return out.map((v) => Math.fround(v));
}

const sameBits = (got: number, want: number, isNan: boolean): boolean => (isNan ? (got & 0x7c00) === 0x7c00 && (got & 0x3ff) !== 0 : got === want);

test('kiln_f16_bits rounds f32 to float16 to nearest even (subnormals, overflow, NaN), as half.ts', () => {
  let bad = 0;
  for (const v of probes()) {
    const got = H.f16bits(v) >>> 0;
    const want = float32ToFloat16Bits(v);
    if (!sameBits(got, want, Number.isNaN(v))) assert.fail(`kiln_f16_bits(${v} = 0x${f2u(v).toString(16)}): got 0x${got.toString(16)}, want 0x${want.toString(16)} (${++bad})`);
  }
});

test('kiln_f16_value is the exact value of every float16 bit pattern', () => {
  for (let h = 0; h < 0x10000; h++) {
    const got = H.f16value(h);
    const want = float16BitsToFloat32(h);
    if (Number.isNaN(want)) assert.ok(Number.isNaN(got), `0x${h.toString(16)}: NaN`);
    else assert.ok(Object.is(got, want), `kiln_f16_value(0x${h.toString(16)}): got ${got}, want ${want}`);
    if (!Number.isNaN(want)) assert.equal(H.f16bits(got) >>> 0, h, `round trip 0x${h.toString(16)}`);
  }
});

test('kiln_bf16_bits rounds f32 to bfloat16 to nearest even, as half.ts', () => {
  for (const v of probes()) {
    const got = H.bf16bits(v) >>> 0;
    const want = float32ToBfloat16Bits(v);
    if (Number.isNaN(v)) assert.ok(Number.isNaN(bfloat16BitsToFloat32(got)), `NaN -> 0x${got.toString(16)}`);
    else assert.equal(got, want, `kiln_bf16_bits(${v})`);
  }
});

/** kiln_f16_store's definition (no braces inside its body, in either form). */
const STORE_FN = /fn kiln_f16_store\(v: f32\) -> u32 \{[^}]*\}/;

test('float16 stores go through kiln_f16_store: the integer code, or the device\'s conversion only where KILN_WEBGPU_F16_STORE (or the probe) says', () => {
  for (const kind of ['f16', 'f16p'] as const) {
    const s = storeStmt(kind, 'b0', 'i', 'v');
    assert.match(s, /kiln_f16_store\(v\)/, kind);
    assert.doesNotMatch(s, /pack2x16float|\bf16\(/, kind);
  }
  const storeFn = (form: 'exact' | 'native'): string => {
    setOption('KILN_WEBGPU_F16_STORE', form);
    try {
      return STORE_FN.exec(storagePrelude(['f16']))![0];
    } finally {
      setOption('KILN_WEBGPU_F16_STORE', undefined);
    }
  };
  assert.match(storeFn('exact'), /return kiln_f16_bits\(v\);/);
  assert.doesNotMatch(storeFn('exact'), /pack2x16float/);
  assert.equal(storeFn('native').trim(), F16_STORE_NATIVE.trim());
});

/** `src` without kiln_f16_store's definition (the one place the device's conversion may appear). */
const withoutStoreFn = (src: string): string => src.replace(STORE_FN, '');

// ------------------------------------------------------------------------------------------------
// The fused renderer
// ------------------------------------------------------------------------------------------------

function group(kind: 'pointwise' | 'reduce', nodes: FusedNode[], values: Record<number, DType>, outputs: number[], rowScalars: number[] = []): FusedGroup {
  const shape = [7, 33];
  const v = (id: number): FusedValue => ({ dtype: values[id]!, shape: rowScalars.includes(id) ? [7, 1] : shape });
  return { kind, nodes, rowScalars: new Set(rowScalars), inputs: [0], outputs, value: v };
}

const cast = (id: number, from: number): FusedNode => ({ kind: 'pointwise', op: 'toDtype', args: [{ kind: 'value', id: from }], outputs: [id], cast: true });

/** The compile test's chain x.to(f16).to(bf16).to(f32) + 1 (test/webgpu-reduction-cases.ts). */
const chain = (): FusedGroup =>
  group(
    'pointwise',
    [cast(1, 0), cast(2, 1), cast(3, 2), { kind: 'pointwise', op: 'add', args: [{ kind: 'value', id: 3 }, { kind: 'const', value: 1 }], outputs: [4] }],
    { 0: 'float32', 1: 'float16', 2: 'bfloat16', 3: 'float32', 4: 'float32' },
    [4],
  );

const spec = (strategy: RenderSpec['strategy'], out: 'f32' | 'f16' | 'f16p'): RenderSpec => ({
  strategy,
  orank: strategy === 'pointwise' ? 2 : 1,
  rrank: strategy === 'pointwise' ? 0 : 1,
  bindings: [
    { kind: out, written: true },
    { kind: 'f32', written: false },
  ],
  operandBinding: [0, 1],
  subgroups: true,
});

test('a float16 cast in a fused kernel rounds with kiln_f16_bits (prelude included), a bfloat16 cast with kiln_bf16_bits', () => {
  const src = renderFused(chain(), spec('pointwise', 'f32'));
  assert.match(src, /let v1: f32 = kiln_f16_value\(kiln_f16_bits\(v0\)\);/);
  assert.match(src, /let v2: f32 = bitcast<f32>\(kiln_bf16_bits\(v1\) << 16u\);/);
  assert.match(src, /fn kiln_f16_bits\(/);
  assert.match(src, /fn kiln_f16_value\(/);
  assert.match(src, /fn kiln_bf16_bits\(/);
  assert.doesNotMatch(withoutStoreFn(src), /pack2x16float|\bf16\(/);
});

test('the rendered cast chain computes what the CPU does, element for element', () => {
  const src = renderFused(chain(), spec('pointwise', 'f32'));
  // The element code: `let vN: f32 = <expr>;` after the load of v0, each rounded to f32.
  const lets = [...src.matchAll(/^\s*let (v\d+): f32 = (.*);$/gm)].filter(([, id]) => id !== 'v0');
  assert.deepEqual(
    lets.map(([, id]) => id),
    ['v1', 'v2', 'v3', 'v4'],
  );
  const helpers = src.slice(src.indexOf('fn kiln_f16_bits'), src.indexOf('@compute'));
  const body = lets.map(([, id, e]) => `const ${id} = Math.fround(${jsExpr(e!)});`).join('\n');
  const run = compile<(x: number) => number>(helpers, `return (v0) => {\n${body}\nreturn v4;\n};`);
  kiln.manualSeed(3);
  const a = kiln.randn([7, 33]);
  const want = kiln.add(a.to('float16').to('bfloat16').to('float32'), 1).toFlatArray() as number[];
  const xs = a.toFlatArray() as number[];
  xs.forEach((x, i) => assert.equal(run(x), want[i], `element ${i} (x = ${x})`));
});

test('sum(dtype=float16) of float32: rounds each element to float16, accumulates in f32, rounds once at the store', () => {
  const g = group(
    'reduce',
    [cast(1, 0), { kind: 'reduction', op: 'sum', args: [], outputs: [100], reduce: { kind: 'sum', input: 1 } }],
    { 0: 'float32', 1: 'float16', 100: 'float16' },
    [100],
    [100],
  );
  for (const strategy of ['workgroup', 'thread'] as const) {
    for (const out of ['f16', 'f16p'] as const) {
      const src = renderFused(g, spec(strategy, out));
      assert.match(src, /let v1: f32 = kiln_f16_value\(kiln_f16_bits\(v0\)\);/, `${strategy} ${out}`);
      assert.match(src, /var a100: f32 = 0\.0f;/, `${strategy} ${out}: f32 accumulator`);
      assert.match(src, /a100 = \(a100 \+ v1\);/, `${strategy} ${out}`);
      assert.doesNotMatch(withoutStoreFn(src), /\bf16\(|: f16\b|pack2x16float/, `${strategy} ${out}: no f16 values or conversions, no pack2x16float`);
      if (out === 'f16') assert.match(src, /b0\[bs0\] = bitcast<vec2<f16>>\(kiln_f16_store\(v100\)\)\.x;/);
      else assert.match(src, /kiln_f16_store\(v100\)/);
    }
  }
});
