/**
 * The CUDA C generator without a GPU: template parity with the JS table, layouts and specs against
 * offsets enumerated from the tensors' own strides, packed argument layouts, the CudaProgram's
 * wiring through a recording launcher (dynamic sizes, fallbacks, split workspaces, buffer reuse),
 * and, where nvcc is on PATH, compilation of every config of every kernel (nvcc -ptx) with the PTX
 * parameter lists checked against the generator's argument layouts, ptxas on a sample.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import { TEMPLATES, type TArg } from '../src/compile/lower/ops.js';
import { CUDA_TEMPLATES, type CArg } from '../src/compile/codegen/cuda/templates.js';
import { argLayout, packArgs, PARAM_BYTES, type ArgLayout } from '../src/kernels/cuda/fused/args.js';
import { H200_TARGET, type CudaTarget } from '../src/compile/codegen/cuda/configs.js';
import { type CudaKernelCode, generateCudaKernel } from '../src/compile/codegen/cuda/generate.js';
import { type KernelLayout, kernelLayout, kernelSpec, specKey, type ValueLayout } from '../src/compile/codegen/cuda/layout.js';
import { CudaProgram } from '../src/compile/codegen/cuda/program.js';
import type { CudaLauncher, KernelHandle } from '../src/compile/codegen/cuda/launcher.js';
import { findNvcc, nvccCheck } from '../src/compile/codegen/cuda/nvcc-check.js';
import { prelude } from '../src/kernels/cuda/fused/prelude.js';
import { pointwiseIndexPlan } from '../src/kernels/cuda/fused/emit-pointwise.js';
import { reduceIndexPlans, type ReduceConfig } from '../src/kernels/cuda/fused/emit-reduce.js';
import { intArg } from '../src/compile/codegen/cuda/configs.js';
import type { IndexPlan } from '../src/kernels/cuda/fused/index-math.js';
import type { ValueId } from '../src/compile/ir.js';
import { broadcastStrides } from '../src/tensor/layout.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Storage } from '../src/tensor/storage.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { build, type CaseGraph, caseGraphs } from './compile-cuda-codegen-graphs.js';

// max-autotune persists winners: keep them out of the user's cache.
process.env.KILN_CACHE_DIR = mkdtempSync(path.join(tmpdir(), 'kiln-cudagen-'));

const graphs = caseGraphs();

/** Every kernel of every graph, generated for its traced layout. */
function allCode(target: CudaTarget = H200_TARGET): { cg: CaseGraph; L: KernelLayout; code: CudaKernelCode }[] {
  return graphs.flatMap((cg) =>
    cg.sched.kernels.map((g, i) => {
      const L = kernelLayout(g, (id) => cg.low.values.get(id)!);
      return { cg, L, code: generateCudaKernel(g, cg.low, L, `${cg.name}_k${i}`, target) };
    }),
  );
}
const codes = allCode();

test('the CUDA template table covers the JS table and declines the same cases', () => {
  assert.deepEqual([...CUDA_TEMPLATES.keys()].sort(), [...TEMPLATES.keys()].sort());
  const dts: DType[] = ['float32', 'float16', 'float64', 'int32', 'int64', 'bool', 'uint8'];
  const consts: unknown[] = [2, 0.5, true, null, 'trunc', 'floor', 'tanh'];
  let compared = 0;
  for (const [op, js] of TEMPLATES) {
    const cu = CUDA_TEMPLATES.get(op)!;
    for (const out of dts) {
      for (const a of dts) {
        const patterns: (TArg | null)[][] = [[{ kind: 'value', expr: 'x', dtype: a, shape: [2] }]];
        for (const c of consts) patterns.push([{ kind: 'value', expr: 'x', dtype: a, shape: [2] }, { kind: 'const', value: c }]);
        patterns.push([{ kind: 'value', expr: 'x', dtype: a, shape: [2] }, { kind: 'value', expr: 'y', dtype: out, shape: [2] }, { kind: 'const', value: 1 }]);
        patterns.push([{ kind: 'value', expr: 'x', dtype: a, shape: [2] }, { kind: 'const', value: 1 }, { kind: 'const', value: 2 }]);
        for (const p of patterns) {
          const args = p as TArg[];
          const j = js(args, { out });
          const c = cu(args as CArg[], { out });
          assert.equal(c === null, j === null, `${op}(${args.map((x) => (x.kind === 'value' ? x.dtype : JSON.stringify(x.value))).join(', ')}) -> ${out}: JS ${j}, CUDA ${c}`);
          compared++;
        }
      }
    }
  }
  assert.ok(compared > 1000);
});

/** Reference: per element of the group's iteration space, each operand's element offset from its own metadata. */
function referenceOffsets(cg: CaseGraph, k: number): number[][] {
  const g = cg.sched.kernels[k]!;
  const meta = (id: ValueId) => cg.low.values.get(id)!;
  const S = g.kind === 'pointwise' ? meta(g.nodes[0]!.outputs[0]!).shape : meta(g.nodes.find((n) => n.kind === 'reduction')!.reduce!.input).shape;
  const ids = [...g.outputs, ...g.inputs];
  const tuples: number[][] = [];
  const idx = new Array<number>(S.length).fill(0);
  const total = S.reduce((a, b) => a * b, 1);
  for (let e = 0; e < total; e++) {
    let r = e;
    for (let d = S.length - 1; d >= 0; d--) {
      idx[d] = r % S[d]!;
      r = Math.floor(r / S[d]!);
    }
    tuples.push(
      ids.map((id) => {
        const m = meta(id);
        let sub: number[];
        if (g.rowScalars.has(id) && m.shape.length < S.length) sub = idx.filter((_, d) => !g.dims.includes(d));
        else if (g.rowScalars.has(id)) sub = idx.map((i, d) => (g.dims.includes(d) ? 0 : i));
        else sub = idx.slice(S.length - m.shape.length);
        const st = g.rowScalars.has(id) ? m.strides : broadcastStrides(m.shape, m.strides, S.slice(S.length - m.shape.length));
        return m.offset + sub.reduce((acc, i, d) => acc + i * st[d]!, 0);
      }),
    );
  }
  return tuples;
}

/** The offsets the layout (and the spec's claims: linear operands use the index) address. */
function layoutOffsets(L: KernelLayout): number[][] {
  const spec = kernelSpec(L);
  const decompose = (lin: number, shape: readonly number[]): number[] => {
    const c = new Array<number>(shape.length).fill(0);
    for (let d = shape.length - 1; d >= 0; d--) {
      c[d] = lin % shape[d]!;
      lin = Math.floor(lin / shape[d]!);
    }
    return c;
  };
  const dot = (c: number[], s: readonly number[]): number => c.reduce((a, x, d) => a + x * s[d]!, 0);
  const M = L.oshape.reduce((a, b) => a * b, 1);
  const N = L.kind === 'reduce' ? L.rshape.reduce((a, b) => a * b, 1) : 1;
  const out: number[][] = [];
  for (let m = 0; m < M; m++) {
    const co = decompose(m, L.oshape);
    for (let j = 0; j < N; j++) {
      const cr = decompose(j, L.rshape);
      out.push(
        L.operands.map((o, k) => {
          const op = spec.ops[k]!;
          const outer = L.kind === 'pointwise' && op.linear ? m : dot(co, L.ost[k]!);
          const row = L.kind === 'reduce' ? (op.linear ? j : dot(cr, L.rst[k]!)) : 0;
          if (L.kind === 'pointwise' && op.linear) assert.equal(dot(co, L.ost[k]!), m, 'a linear operand is addressed by the linear index');
          if (L.kind === 'reduce' && op.linear) assert.equal(dot(cr, L.rst[k]!), j, 'a row-linear operand is addressed by the row index');
          return o.offset + outer + row;
        }),
      );
    }
  }
  return out;
}

const sortTuples = (t: number[][]): string[] => t.map((x) => x.join(',')).sort();

test('kernel layouts address exactly the elements the tensors strides give, for every graph', () => {
  let checked = 0;
  for (const cg of graphs) {
    cg.sched.kernels.forEach((g, k) => {
      const L = kernelLayout(g, (id) => cg.low.values.get(id)!);
      assert.deepEqual(sortTuples(layoutOffsets(L)), sortTuples(referenceOffsets(cg, k)), `${cg.name} kernel ${k}`);
      checked++;
    });
  }
  assert.ok(checked >= 30);
});

/**
 * The generated index statements (C) run as JavaScript: declarations become `let`, integer division
 * floors (indices are non-negative), casts of 0 drop. Returns operand offsets for an index.
 */
function indexFn(plan: IndexPlan, lin: string): (index: number, args: Record<string, number>) => number[] {
  const js = plan.coords
    .map((st) =>
      st
        .replace(/\[\[maybe_unused\]\] /g, '')
        .replace(/^(const )?(int|long long) /, 'let ')
        .replace(/^(\w+) \/= (\w+);$/, '$1 = Math.floor($1 / $2);'),
    )
    .join('\n');
  const offs = plan.offsets.map((o) => o.replace(/\((int|long long)\)0/g, '0'));
  const body = `${js}\nreturn [${offs.join(', ')}];`;
  return (index, args) => (new Function(lin, ...Object.keys(args), body) as (...a: number[]) => number[])(index, ...Object.values(args));
}

test('the generated index statements, run, address the same elements as the tensors strides', () => {
  let checked = 0;
  for (const cg of graphs) {
    cg.sched.kernels.forEach((g, k) => {
      const L = kernelLayout(g, (id) => cg.low.values.get(id)!);
      const spec = kernelSpec(L);
      const names = (p: IndexPlan, prefix: string, rank: number): string[] => [...Array.from({ length: rank }, (_, d) => `${prefix}${d}`), ...p.params.map((x) => x.name)];
      const args = (ns: string[]): Record<string, number> => Object.fromEntries(ns.map((n) => [n, intArg(n, L, {})]));
      const got: number[][] = [];
      if (L.kind === 'pointwise') {
        const plan = pointwiseIndexPlan(spec);
        const f = indexFn(plan, 'e');
        const a = args(names(plan, 'n', spec.orank));
        const total = L.oshape.reduce((x, y) => x * y, 1);
        for (let e = 0; e < total; e++) got.push(f(e, a).map((o, i) => o + L.operands[i]!.offset));
      } else {
        const { outer, row } = reduceIndexPlans(spec);
        const fo = indexFn(outer, 'row');
        const fr = indexFn(row, 'j');
        const ao = args(names(outer, 'M', spec.orank));
        const ar = args(names(row, 'R', spec.rrank));
        const M = L.oshape.reduce((x, y) => x * y, 1);
        const N = L.rshape.reduce((x, y) => x * y, 1);
        for (let m = 0; m < M; m++) {
          const base = fo(m, ao);
          for (let j = 0; j < N; j++) got.push(fr(j, ar).map((o, i) => base[i]! + o + L.operands[i]!.offset));
        }
      }
      assert.deepEqual(sortTuples(got), sortTuples(referenceOffsets(cg, k)), `${cg.name} kernel ${k}`);
      checked++;
    });
  }
  assert.ok(checked >= 30);
});

test('specs: contiguous kernels coalesce to rank 1 with no stride arguments; broadcasts and transposes are specialised', () => {
  const by = (name: string) => codes.filter((c) => c.cg.name === name);
  const ew = by('elementwise_f32')[0]!;
  assert.equal(ew.code.spec.orank, 1);
  assert.ok(ew.code.spec.ops.every((o) => o.linear));
  assert.deepEqual(
    ew.code.candidates[0]!.kernels[0]!.args.params.map((p) => p.name),
    ['p0', 'p1', 'n0'],
  );
  // A transposed input read through its transpose is contiguous again.
  assert.ok(by('transposed_input')[0]!.code.spec.ops.every((o) => o.linear));
  // Bias [64] over [8,16,64]: stride 0 on the outer dims, unit innermost; c [8,1,1]: stride 0 inside.
  const bb = by('broadcast_bias')[0]!.code.spec;
  assert.deepEqual(bb.ops.map((o) => o.outerZero), [
    [false, false, false],
    [false, false, false],
    [true, true, false],
    [false, true, true],
  ]);
  // Reduction over dim 0: rows are strided, not vectorisable; the default is one thread per row.
  const sf = by('sum_first')[0]!.code;
  assert.equal(sf.candidates[0]!.config.kind === 'reduce' && sf.candidates[0]!.config.strategy, 'thread');
  assert.ok(sf.candidates.every((v) => v.config.vec === 1));
  // A full sum: few rows, long: split with a workspace is a candidate and the default.
  const sa = by('sum_all')[0]!.code;
  assert.equal(sa.candidates[0]!.config.kind === 'reduce' && sa.candidates[0]!.config.strategy, 'split');
  // Two-level row kernels (softmax) cannot split.
  assert.ok(by('softmax_f32')[0]!.code.candidates.every((v) => v.config.kind !== 'reduce' || v.config.strategy !== 'split'));
});

test('reduction default: few medium rows (add + RMSNorm over [128, 1024]) take a block per row sized to the row; many rows keep a warp per row', () => {
  const addNorm = ((x: Tensor, r: Tensor) => kiln.rmsNorm(x.add(r), [1024], null, 1e-6)) as never;
  const defaultOf = (rows: number, dtype: DType): ReduceConfig => {
    const cg = build(`addnorm_${rows}_${dtype}`, addNorm, [kiln.empty([rows, 1024], { dtype }), kiln.empty([rows, 1024], { dtype })]);
    const found = cg.sched.kernels.map((g, i) => generateCudaKernel(g, cg.low, kernelLayout(g, (id) => cg.low.values.get(id)!), `${cg.name}_k${i}`, H200_TARGET));
    const red = found.find((c) => c.candidates[0]!.config.kind === 'reduce');
    assert.ok(red, `${rows} rows ${dtype}: a reduce kernel`);
    return red.candidates[0]!.config as ReduceConfig;
  };
  // 128 rows: 16 warp-per-row blocks would leave 116 of 132 SMs idle; one 16-byte vector a thread.
  assert.deepEqual(defaultOf(128, 'float32'), { kind: 'reduce', strategy: 'block', block: 256, vec: 4 });
  assert.deepEqual(defaultOf(128, 'float16'), { kind: 'reduce', strategy: 'block', block: 128, vec: 8 });
  // 4096 rows fill the GPU with warp-per-row blocks.
  assert.deepEqual(defaultOf(4096, 'float32'), { kind: 'reduce', strategy: 'warp', block: 256, vec: 4 });
});

test('dynamic batch dims keep the spec (no regeneration) and only change size arguments', () => {
  const a = build('b3', ((t: Tensor) => kiln.softmax(t.mul(2), -1)) as never, [kiln.empty([3, 7, 128])]);
  const b = build('b5', ((t: Tensor) => kiln.softmax(t.mul(2), -1)) as never, [kiln.empty([5, 7, 128])]);
  const La = kernelLayout(a.sched.kernels[0]!, (id) => a.low.values.get(id)!);
  const Lb = kernelLayout(b.sched.kernels[0]!, (id) => b.low.values.get(id)!);
  assert.equal(specKey(kernelSpec(La)), specKey(kernelSpec(Lb)));
  assert.deepEqual([La.oshape, Lb.oshape], [[21], [35]]);
  const ca = generateCudaKernel(a.sched.kernels[0]!, a.low, La, 'k', H200_TARGET);
  const cb = generateCudaKernel(b.sched.kernels[0]!, b.low, Lb, 'k', H200_TARGET);
  assert.deepEqual(
    ca.candidates.map((v) => v.source),
    cb.candidates.map((v) => v.source),
  );
});

test('64-bit index math only when a tensor reaches 2^31 elements', () => {
  const cg = graphs.find((c) => c.name === 'elementwise_f32')!;
  const g = cg.sched.kernels[0]!;
  const big = (id: ValueId): ValueLayout => ({ ...cg.low.values.get(id)!, shape: [65536, 32768], strides: [32768, 1], offset: 0 });
  const L = kernelLayout(g, big);
  const code = generateCudaKernel(g, cg.low, L, 'big', H200_TARGET);
  assert.equal(code.spec.idx64, true);
  const v = code.candidates[0]!;
  assert.match(v.body, /long long total/);
  assert.deepEqual(
    v.kernels[0]!.args.params.map((p) => [p.name, p.offset, p.size]),
    [
      ['p0', 0, 8],
      ['p1', 8, 8],
      ['n0', 16, 8],
    ],
  );
  const small = codes.find((c) => c.cg.name === 'elementwise_f32')!;
  assert.equal(small.code.spec.idx64, false);
  assert.match(small.code.candidates[0]!.body, /const int total/);
});

/** Offsets under the C ABI computed from a list of sizes (the test's own reference). */
function abiOffsets(sizes: readonly number[]): { offsets: number[]; size: number } {
  const offsets: number[] = [];
  let end = 0;
  for (const s of sizes) {
    let off = end;
    while (off % s !== 0) off++;
    offsets.push(off);
    end = off + s;
  }
  return { offsets, size: end };
}

test('packed argument layouts: aligned, dense, exact size; packArgs writes every value where the layout says', () => {
  let n = 0;
  for (const { code } of codes) {
    for (const v of code.candidates) {
      for (const k of v.kernels) {
        const ref = abiOffsets(k.args.params.map((p) => PARAM_BYTES[p.type]));
        assert.deepEqual(
          k.args.params.map((p) => p.offset),
          ref.offsets,
          k.name,
        );
        assert.equal(k.args.size, ref.size, k.name);
        const values = k.args.params.map((p, i) => (p.type === 'ptr' ? BigInt(0x7f0000000000 + i * 256) : i * 3 - 1));
        const block = packArgs(k.args, values);
        assert.equal(block.byteLength, k.args.size);
        const dv = new DataView(block.buffer);
        k.args.params.forEach((p, i) => {
          const got = p.type === 'ptr' || p.type === 'i64' ? dv.getBigInt64(p.offset, true) : BigInt(dv.getInt32(p.offset, true));
          assert.equal(got, BigInt(values[i]!), `${k.name}.${p.name}`);
        });
        n++;
      }
    }
  }
  assert.ok(n > 500);
  // Mixed widths: an int between pointers is padded before the next pointer; no tail padding.
  const mixed = argLayout([
    { name: 'a', type: 'ptr', source: { kind: 'operand', k: 0 } },
    { name: 'n', type: 'i32', source: { kind: 'int', what: 'n0' } },
    { name: 'b', type: 'ptr', source: { kind: 'operand', k: 1 } },
    { name: 'm', type: 'i32', source: { kind: 'int', what: 'n1' } },
  ]);
  assert.deepEqual(
    mixed.params.map((p) => p.offset),
    [0, 8, 16, 24],
  );
  assert.equal(mixed.size, 28);
  assert.throws(() => packArgs(mixed, [0n, 2 ** 31, 0n, 1]), /does not fit int32/);
});

// ---------------------------------------------------------------------------------------------
// CudaProgram through a recording launcher (cpu tensors stand in for device memory; kernels do not run).

interface Launch {
  name: string;
  grid: number;
  block: number;
  shared: number;
  args: Uint8Array;
}

class RecordingLauncher implements CudaLauncher {
  readonly target = H200_TARGET;
  readonly launches: Launch[] = [];
  compiled = 0;
  private readonly bases = new WeakMap<Storage, number>();
  private next = 0x10000000;
  compile(source: string, names: readonly string[]): KernelHandle[] {
    this.compiled++;
    for (const n of names) assert.ok(source.includes(`${n}(`), `source defines ${n}`);
    return names.map((name) => ({ name }));
  }
  launch(handle: KernelHandle, grid: number, block: number, shared: number, args: Uint8Array): void {
    this.launches.push({ name: handle.name, grid, block, shared, args });
  }
  address(t: Tensor): number {
    let a = this.bases.get(t.storage);
    if (a === undefined) {
      a = this.next;
      // Allocations 256-byte aligned, like the caching allocator's blocks.
      this.next += Math.ceil((t.storage.nbytes + 1) / 256) * 256;
      this.bases.set(t.storage, a);
    }
    return a;
  }
}

function decode(program: CudaProgram, l: Launch): Record<string, bigint> {
  const entry = program
    .generated()
    .flatMap((c) => c.candidates)
    .flatMap((v) => v.kernels)
    .find((k) => k.name === l.name)!;
  const layout: ArgLayout = entry.args;
  assert.equal(l.args.byteLength, layout.size, `${l.name}: argument block of exactly the parameter size`);
  const dv = new DataView(l.args.buffer, l.args.byteOffset);
  return Object.fromEntries(layout.params.map((p) => [p.name, p.type === 'i32' ? BigInt(dv.getInt32(p.offset, true)) : dv.getBigInt64(p.offset, true)]));
}

function programFor(fn: (...a: never[]) => unknown, args: Tensor[], launcher: CudaLauncher, pick?: (names: string[]) => number): { program: CudaProgram; run: (a: Tensor[]) => unknown } {
  const cg = build('p', fn, args);
  const program = new CudaProgram(cg.low, cg.sched, launcher, pick ? { autotune: (k) => pick(k.candidates.map((c) => JSON.stringify(c.config))) } : {});
  // Graph inputs: the arguments by path, lifted tensors (weights) as captured.
  const inputs = (a: Tensor[]): Tensor[] => cg.graph.inputs.map((inp) => (inp.source.kind === 'lifted' ? inp.source.tensor : a[inp.source.path[0] as number]!));
  return { program, run: (a) => program.run(inputs(a)) };
}

test('CudaProgram: one specialisation serves new batch sizes; sizes and pointers arrive in the argument block', () => {
  const L = new RecordingLauncher();
  const x3 = kiln.empty([3, 7, 128]);
  const { program, run } = programFor(((t: Tensor) => kiln.softmax(t.mul(2), -1)) as never, [x3], L);
  const y3 = run([x3]) as Tensor;
  const x5 = kiln.empty([5, 7, 128]);
  const y5 = run([x5]) as Tensor;
  assert.deepEqual(y5.shape, [5, 7, 128]);
  assert.equal(program.stats.specializations, 1);
  assert.equal(L.compiled, 1);
  assert.equal(L.launches.length, 2);
  const [a, b] = L.launches.map((l) => decode(program, l));
  assert.equal(a!.M0, 21n);
  assert.equal(b!.M0, 35n);
  assert.equal(a!.R0, 128n);
  assert.equal(a!.p0, BigInt(L.address(y3)));
  assert.equal(a!.p1, BigInt(L.address(x3)));
  assert.equal(b!.p1, BigInt(L.address(x5)));
});

test('CudaProgram: a vector config that cannot run a layout falls back to one that can', () => {
  const L = new RecordingLauncher();
  const x = kiln.empty([6, 512]);
  // Choose a vectorised warp config explicitly.
  const { program, run } = programFor(((t: Tensor) => kiln.softmax(t, -1)) as never, [x], L, (c) => c.findIndex((s) => s.includes('"warp"') && s.includes('"vec":4')));
  run([x]);
  assert.match(L.launches[0]!.name, /warp_b\d+v4$/);
  assert.equal(program.stats.fallbacks, 0);
  // 130 columns: a new spec? No: same ranks and strides classes, but 130 % 4 != 0.
  const x2 = kiln.empty([6, 130]);
  run([x2]);
  assert.equal(program.stats.specializations, 1);
  assert.equal(program.stats.fallbacks, 1);
  assert.match(L.launches[1]!.name, /v1$/);
  // A view at an odd offset (row slice starting at column 1) misaligns vector access as well.
  const base = kiln.empty([6, 513]);
  run([base.narrow(1, 1, 512)]);
  assert.match(L.launches[2]!.name, /v1$/);
});

test('CudaProgram: split reductions get a workspace and two launches; the partial count covers the row', () => {
  const L = new RecordingLauncher();
  const x = kiln.empty([1024, 1024]);
  const { program, run } = programFor(((t: Tensor) => kiln.sum(t.abs())) as never, [x], L);
  run([x]);
  assert.equal(L.launches.length, 2);
  assert.match(L.launches[0]!.name, /_partial$/);
  assert.match(L.launches[1]!.name, /_finish$/);
  const p = decode(program, L.launches[0]!);
  const f = decode(program, L.launches[1]!);
  assert.equal(p.ws, f.ws);
  assert.ok(p.ws! > 0n);
  const N = 1024n * 1024n;
  assert.equal(p.R0, N);
  assert.ok(p.G! * p.chunk! >= N && (p.G! - 1n) * p.chunk! < N, `G ${p.G} x chunk ${p.chunk} covers ${N} without an empty chunk`);
  assert.ok(L.launches[0]!.grid >= Number(p.G), 'one block per partial (one row)');
  assert.ok(L.launches[0]!.shared > 0);
});

test('CudaProgram: externs run through the dispatcher, intermediates are reused, describe lists kernels and argument layouts', () => {
  const L = new RecordingLauncher();
  const w1 = kiln.empty([64, 32]);
  const w2 = kiln.empty([32, 64]);
  const f = (x: Tensor): Tensor => kiln.gelu(kiln.linear(kiln.gelu(kiln.linear(kiln.layerNorm(x, [32]), w1)), w2).add(x)).mul(kiln.sigmoid(x));
  const x = kiln.randn([8, 32]);
  const { program, run } = programFor(f as never, [x], L);
  const y = run([x]) as Tensor;
  assert.deepEqual(y.shape, [8, 32]);
  assert.equal(program.stats.externs, 2);
  assert.equal(program.kernelCount, 3);
  assert.equal(L.launches.length, program.kernelCount);
  // The last kernel's [8, 32] output takes over the dead [8, 32] layerNorm output's storage.
  assert.deepEqual([program.stats.buffersAllocated, program.stats.buffersReused], [2, 1]);
  const [ln, , last] = L.launches.map((l) => decode(program, l));
  assert.equal(last!.p0, ln!.p0);
  const d = program.describe();
  assert.match(d, /extern linear/);
  assert.match(d, /args: kiln_k0_reduce_\w+\(p0@0:8 /);
  assert.match(d, /__global__/);
});

test('CudaProgram max-autotune: every runnable config is timed once per spec, the winner persists', (tc) => {
  // KILN_CUDA_COL_FEW_ROWS (default on) adds col candidates to row-contiguous groups; a col config
  // runs as several launches (tile, finish, store), which the launch count below does not model.
  // The col candidates' timing is covered in cuda-colred.test.ts.
  setOption('KILN_CUDA_COL_FEW_ROWS', false);
  tc.after(() => setOption('KILN_CUDA_COL_FEW_ROWS', undefined));
  const f = ((t: Tensor) => kiln.softmax(t.mul(3), -1)) as never;
  const x = kiln.empty([64, 256]);
  const L = new RecordingLauncher();
  const cg = build('tune', f, [x]);
  const program = new CudaProgram(cg.low, cg.sched, L, { tuneOnFirstRun: true });
  program.run([x]);
  const n = program.generated()[0]!.candidates.length;
  const tuningLaunches = L.launches.length;
  // warm-up 2 + 5 timed reps per candidate, plus the real launch.
  assert.equal(tuningLaunches, n * 7 + 1);
  program.run([x]);
  assert.equal(L.launches.length, tuningLaunches + 1);
  const chosen = L.launches[L.launches.length - 1]!.name;
  // A new program with the same code reads the winner from the cache: no timing launches.
  const L2 = new RecordingLauncher();
  const again = new CudaProgram(cg.low, cg.sched, L2, { tuneOnFirstRun: true });
  again.run([x]);
  assert.deepEqual(
    L2.launches.map((l) => l.name),
    [chosen],
  );
});

// ---------------------------------------------------------------------------------------------
// nvcc (CUDA 13 on the dev machine; CI usually lacks it).

const nvcc = findNvcc();
const skip = nvcc ? false : 'nvcc is not on PATH (set KILN_NVCC to its path to compile the generated CUDA C)';

/** PTX parameter sizes per entry must be the generator's parameter sizes, in order. */
function checkParams(params: Map<string, { type: string; bytes: number }[]>, code: CudaKernelCode): number {
  let n = 0;
  for (const v of code.candidates) {
    for (const k of v.kernels) {
      const ptx = params.get(k.name);
      assert.ok(ptx, `PTX has entry ${k.name}`);
      assert.deepEqual(
        ptx.map((p) => p.bytes),
        k.args.params.map((p) => p.size),
        `${k.name}: PTX parameter sizes`,
      );
      const ref = abiOffsets(ptx.map((p) => p.bytes));
      assert.equal(k.args.size, ref.size, `${k.name}: parameter block size`);
      n++;
    }
  }
  return n;
}

test('nvcc compiles every config of every kernel; PTX parameter lists match the argument layouts', { skip }, (t) => {
  const full = process.env.KILN_CUDAGEN_FULL === '1';
  const unit = prelude('ptx') + codes.flatMap((c) => c.code.candidates.map((v) => v.body)).join('\n\n');
  // Every config goes through nvcc to PTX; unoptimised unless KILN_CUDAGEN_FULL=1, which also runs
  // ptxas on all of them (several minutes on a loaded 2-core machine). Optimised compilation and
  // ptxas always run on a sample: each kernel's default config plus one per strategy and vector width.
  const r = nvccCheck([unit], 'sm_90', nvcc!, { assemble: full, optimize: full });
  assert.deepEqual(r.errors, []);
  let entries = 0;
  for (const { code } of codes) entries += checkParams(r.params, code);
  t.diagnostic(`${entries} kernels compiled to PTX${full ? ', optimised and assembled' : ' (unoptimised)'}`);
  const seen = new Set<string>();
  const sample = codes.flatMap(({ code }) =>
    code.candidates.filter((v, i) => {
      const key = `${code.name}:${v.config.kind === 'reduce' ? v.config.strategy : 'pw'}:${v.config.vec}`;
      if (i > 0 && seen.has(key)) return false;
      seen.add(key);
      return true;
    }),
  );
  const s = full ? r : nvccCheck([prelude('ptx') + sample.map((v) => v.body).join('\n\n')], 'sm_90', nvcc!);
  assert.deepEqual(s.errors, []);
  if (!full) assert.equal(s.usage.size, sample.reduce((a, v) => a + v.kernels.length, 0));
  const spills = [...s.usage].filter(([, u]) => u.spillStores > 0).map(([name, u]) => `${name} (${u.spillStores} bytes)`);
  t.diagnostic(`${s.usage.size} kernels assembled by ptxas; max registers ${Math.max(...[...s.usage.values()].map((u) => u.registers))}; spilling: ${spills.join(', ') || 'none'}`);
});

test('half conversions through cuda_fp16.h / cuda_bf16.h compile too (headers mode)', { skip }, () => {
  const target: CudaTarget = { ...H200_TARGET, halfMode: 'headers' };
  const some = allCode(target).filter((c) => /_(f16|bf16)$/.test(c.cg.name) || c.cg.name === 'mixed_cast');
  const unit = some.map((c, i) => (i === 0 ? c.code.candidates[0]!.source : c.code.candidates[0]!.body)).join('\n\n');
  assert.match(unit, /#include <cuda_fp16.h>/);
  assert.ok(some[0]!.code.candidates[0]!.nvrtcOptions.some((o) => o.startsWith('--include-path=')));
  const r = nvccCheck([unit], 'sm_90', nvcc!);
  assert.deepEqual(r.errors, []);
});
