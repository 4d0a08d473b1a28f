/**
 * Wasm (f32x4) pointwise kernels of the kiln backend against eager Kiln: which groups get a Wasm
 * candidate (float32 / float16 / bfloat16 values, supported ops) and which stay JavaScript
 * (float64, integers, casts into halves), parity on contiguous, transposed, strided-with-offset,
 * broadcast and short-row inputs, special values, and several outputs per kernel.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { getBackend } from '../src/compile/backend.js';
import { trace } from '../src/compile/capture.js';
import '../src/compile/kiln-backend.js';
import type { KilnProgram } from '../src/compile/kiln-backend.js';
import { makeTensor, rng } from './helpers/make.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DType } from '../src/tensor/dtype.js';
import { setCpuPath } from '../src/kernels/cpu/native/path.js';

// These tests are about the Wasm candidates: run them on the wasm CPU path (the native path, where
// a compiler exists, would put its C candidate first; test/native-compile.test.ts covers it).
setCpuPath('wasm');

type Fn = (...args: Tensor[]) => Tensor | Tensor[];

function compile(fn: Fn, args: Tensor[]): { program: KilnProgram; out: Tensor[] } {
  const { graph } = trace(fn as never, args);
  const program = getBackend('kiln').compile(graph, { mode: 'default', logCode: false }) as KilnProgram;
  const inputs = graph.inputs.map((inp) => (inp.source.kind === 'lifted' ? inp.source.tensor : args[inp.source.path[0] as number]!));
  const r = program.run(inputs);
  return { program, out: Array.isArray(r) ? (r as Tensor[]) : [r as Tensor] };
}

function rand(shape: number[], seed: number, dtype: DType = 'float32', layout: 'contiguous' | 'transposed' | 'strided' = 'contiguous', scale = 4): Tensor {
  const r = rng(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  return makeTensor(
    Array.from({ length: n }, () => (r() - 0.5) * scale),
    shape,
    dtype,
    layout,
  );
}

/** Compiled vs eager, elementwise |a - e| <= tol (1 + |e|); NaN where eager has NaN. Returns the program. */
function parity(fn: Fn, args: Tensor[], tol: number): KilnProgram {
  const { program, out } = compile(fn, args);
  const want = fn(...args);
  const wants = Array.isArray(want) ? want : [want];
  assert.equal(out.length, wants.length);
  out.forEach((t, i) => {
    const e = wants[i]!;
    assert.deepEqual(t.shape, e.shape);
    assert.deepEqual(t.strides, e.strides);
    assert.equal(t.dtype, e.dtype);
    const a = t.toFlatArray();
    const b = e.toFlatArray();
    for (let k = 0; k < a.length; k++) {
      if (Number.isNaN(b[k]!)) assert.ok(Number.isNaN(a[k]!), `out ${i}[${k}]: ${a[k]} vs NaN`);
      else if (!Number.isFinite(b[k]!)) assert.equal(a[k], b[k], `out ${i}[${k}]`);
      else assert.ok(Math.abs(a[k]! - b[k]!) <= tol * (1 + Math.abs(b[k]!)), `out ${i}[${k}]: compiled ${a[k]} vs eager ${b[k]}`);
    }
  });
  return program;
}

/** The chosen config's implementation of every kernel ('wasm' or 'js'), from the program listing. */
function impls(p: KilnProgram): string[] {
  return [...p.describe().matchAll(/config (\{[^}]*\})/g)].map((m) => (JSON.parse(m[1]!) as { impl?: string }).impl ?? 'js');
}

const elementwise: Fn = (x) => {
  let y = kiln.add(kiln.mul(x, 1.5), 0.5);
  y = kiln.mul(kiln.relu(y), kiln.sigmoid(x));
  y = kiln.add(y, kiln.tanh(kiln.mul(x, 0.5)));
  y = kiln.sub(y, kiln.mul(kiln.exp(kiln.neg(kiln.mul(x, x))), 0.1));
  return kiln.sub(kiln.mul(y, 2), 1);
};

const transcendental: Fn = (x) =>
  kiln.add(
    kiln.add(kiln.nn.functional.gelu(x), kiln.nn.functional.gelu(x, 'tanh')),
    kiln.add(kiln.mul(kiln.erf(x), kiln.silu(x)), kiln.log(kiln.add(kiln.abs(x), 0.25))),
  );

test('float32 chains get the Wasm kernel and match eager (contiguous, transposed, strided + offset)', () => {
  for (const layout of ['contiguous', 'transposed', 'strided'] as const) {
    const x = rand([37, 150], 1, 'float32', layout);
    const p = parity(elementwise, [x], 1e-5);
    assert.deepEqual(impls(p), ['wasm'], layout);
    assert.deepEqual(impls(parity(transcendental, [rand([41, 130], 2, 'float32', layout, 12)], 1e-5)), ['wasm'], layout);
  }
});

test('long rows cross several Wasm chunks; broadcasts are splatted; two outputs from one kernel', () => {
  const x = rand([3, 5000], 3);
  const row = rand([5000], 4);
  const col = rand([3, 1], 5);
  const p = parity((a, b, c) => kiln.mul(kiln.add(a, b), kiln.sigmoid(c)), [x, row, col], 1e-5);
  // sigmoid(c) runs over c's own (short) shape: a second kernel; both are Wasm candidates.
  assert.deepEqual(impls(p), ['wasm', 'wasm']);
  // Two materialised values: y is returned and also feeds z.
  const two = parity((a) => {
    const y = kiln.tanh(kiln.mul(a, 0.7));
    return [y, kiln.maximum(kiln.sub(y, 0.1), kiln.clamp(a, null, 0.5))];
  }, [rand([64, 257], 6)], 1e-5);
  assert.deepEqual(impls(two), ['wasm']);
  // channels_last with per-channel scale / shift (eval BatchNorm + ReLU): rows of C values, many
  // per kernel call; C = 100 leaves a partial last call (126 rows, 20 per call).
  for (const C of [64, 100]) {
    const r = rng(20 + C);
    const x = makeTensor(Array.from({ length: 2 * C * 63 }, () => r() - 0.5), [2, C, 9, 7], 'float32', 'channelsLast');
    const bn = parity((a, sc, sh) => kiln.relu(kiln.add(kiln.mul(a, sc), sh)), [x, rand([C, 1, 1], 21), rand([C, 1, 1], 22)], 1e-5);
    assert.deepEqual(impls(bn), ['wasm']);
  }
  // Clamp, pow 2, div, rsqrt, reciprocal.
  parity((a) => kiln.div(kiln.clamp(kiln.pow(a, 2), 0.1, 3), kiln.rsqrt(kiln.add(kiln.reciprocal(kiln.add(kiln.abs(a), 1)), 1))), [rand([16, 300], 7)], 1e-5);
});

test('short rows fall back to the JS kernel inside the Wasm candidate, with the same results', () => {
  // Inner dim 5 after coalescing (transposed input keeps the rows short).
  const x = rand([200, 5], 8, 'float32', 'transposed');
  const p = parity(elementwise, [x], 1e-5);
  assert.deepEqual(impls(p), ['wasm']);
  parity(elementwise, [rand([3], 9)], 1e-5);
  parity(elementwise, [makeTensor([0.5], [], 'float32')], 1e-5);
});

test('special values: inf, -inf, NaN, -0, huge and tiny inputs agree with eager', () => {
  const vals = [Infinity, -Infinity, NaN, -0, 0, 1e-40, -1e-40, 3e38, -3e38, 88.7, -88.7, 100, -100, 1e-7, -1e-7];
  const xs: number[] = [];
  for (let i = 0; i < 128; i++) xs.push(vals[i % vals.length]!);
  const x = makeTensor(xs, [2, 64], 'float32');
  const fns: Fn[] = [
    (a) => kiln.exp(a),
    (a) => kiln.tanh(a),
    (a) => kiln.sigmoid(a),
    (a) => kiln.relu(a),
    (a) => kiln.erf(a),
    (a) => kiln.nn.functional.gelu(a),
    (a) => kiln.log(a),
    (a) => kiln.silu(a),
  ];
  for (const fn of fns) assert.deepEqual(impls(parity(fn, [x], 1e-5)), ['wasm']);
});

test('float16 / bfloat16 compute in float32 lanes and round on store; float64 and ints stay JavaScript', () => {
  for (const dt of ['float16', 'bfloat16'] as const) {
    // Eager rounds every op to the half dtype, the fused kernel only the stores (tolerances as in
    // compile-codegen.test.ts).
    const p = parity(elementwise, [rand([20, 100], 10, dt)], dt === 'float16' ? 1e-2 : 4e-2);
    assert.deepEqual(impls(p), ['wasm'], dt);
  }
  assert.deepEqual(impls(parity(elementwise, [rand([20, 100], 11, 'float64')], 1e-12)), ['js']);
  const a = makeTensor(Array.from({ length: 200 }, (_, i) => (i % 17) - 8), [2, 100], 'int32');
  assert.deepEqual(impls(parity((t) => kiln.add(kiln.mul(t, 3), t), [a], 0)), ['js']);
  // A cast into a half inside the chain rounds: not expressible in float32 lanes.
  assert.deepEqual(impls(parity((t) => kiln.mul(t.to('float16').to('float32'), 3), [rand([4, 100], 12)], 1e-3)), ['js']);
});

test('Wasm modules are validated in the compile worker pool; a broken module fails with the engine diagnostic', async () => {
  const { compileInPoolSync } = await import('../src/runtime/pool/index.js');
  const { validateWasm } = await import('../src/compile/codegen/js/compile.js');
  const { encodeModule, FnBuilder, I32, i32c } = await import('../src/kernels/cpu/wasm-asm.js');
  const good = new FnBuilder('kern', [I32]);
  const bad = new FnBuilder('kern', [I32]);
  bad.emit(i32c(1)); // leaves a value on the stack of a function that returns nothing
  const goodBytes = encodeModule({ functions: [good], pages: 1, memory: 'export' });
  const badBytes = encodeModule({ functions: [bad], pages: 1, memory: 'export' });
  const [r1, r2] = compileInPoolSync<{ ok: boolean; error?: string }>([
    { kind: 'wasm-kernel', payload: { bytes: goodBytes, name: 'good' } },
    { kind: 'wasm-kernel', payload: { bytes: badBytes, name: 'bad' } },
  ]);
  assert.equal(r1!.ok, true);
  assert.equal(r2!.ok, false);
  assert.match(r2!.error!, /^bad: CompileError: .*Compiling function #0/);
  assert.throws(() => validateWasm([badBytes]), /generated Wasm kernel does not compile: .*CompileError/);
});

test('max-autotune is offered both implementations for a pointwise kernel and keeps eager results', async () => {
  const { generateKernel } = await import('../src/compile/codegen/js/emit.js');
  const { lower } = await import('../src/compile/lower/lower.js');
  const { schedule } = await import('../src/compile/lower/schedule.js');
  const { CPU_FUSION } = await import('../src/compile/codegen/js/fusion.js');
  const x = rand([32, 200], 13);
  const { graph } = trace(elementwise as never, [x]);
  const low = lower(graph, CPU_FUSION);
  const [g] = schedule(low).kernels;
  const impl = generateKernel(g!, low, 'k').candidates.map((c) => c.config.impl);
  assert.deepEqual(impl, ['wasm', 'js', 'js', 'js']);
  const program = getBackend('kiln').compile(graph, { mode: 'max-autotune', logCode: false }) as KilnProgram;
  const out = program.run([x]) as Tensor;
  const want = elementwise(x) as Tensor;
  const a = out.toFlatArray();
  const b = want.toFlatArray();
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i]! - b[i]!) <= 1e-5 * (1 + Math.abs(b[i]!)), `${i}`);
  assert.match(program.describe(), /config \{"impl":"(wasm|js)","unroll":\d\}/);
});
