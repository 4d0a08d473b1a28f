/**
 * CPU-side tests of the cuda code generators and launch/discovery logic (no GPU needed; these run
 * in CI). Compiling the generated CUDA C is scripts/cuda-nvcc-check.mjs (nvcc) and, on a GPU, the
 * cuda-ops tests (NVRTC).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import '../src/index.js';
import { coalesce, generatePointwise, INDEX32_LIMIT, pointwiseKernelName, reach, vectorWidth, type PointwiseSpec } from '../src/kernels/cuda/codegen/pointwise.js';
import { generateScan, threadsPerRow as threadsPerRowFor } from '../src/kernels/cuda/codegen/scan.js';
import { expressionCatalog } from '../src/kernels/cuda/pointwise.js';
import { paramLayout } from '../src/runtime/cuda/launch.js';
import { findLibrary, missingMessage, type DiscoverEnv } from '../src/runtime/cuda/discover.js';
import { formatNvrtcLog } from '../src/runtime/cuda/nvrtc.js';
import { rowMajorOperand } from '../src/runtime/cuda/cublaslt.js';
import { probeCuda } from '../src/runtime/probes.js';

test('coalesce merges dims every operand walks contiguously and orders dims by the output strides', () => {
  // A contiguous [4, 5, 6] output with a contiguous input: one dim of 120.
  assert.deepEqual(coalesce([4, 5, 6], [[30, 6, 1], [30, 6, 1]]), { shape: [120], strides: [[1], [1]] });
  // The input broadcasts along dim 1 (stride 0): dims 0 and 1 cannot merge for it, 1 and 2 neither.
  assert.deepEqual(coalesce([4, 5, 6], [[30, 6, 1], [6, 0, 1]]), { shape: [4, 5, 6], strides: [[30, 6, 1], [6, 0, 1]] });
  // Size-1 dims vanish; a transposed (but dense) output and input are walked in memory order as one dim.
  assert.deepEqual(coalesce([3, 1, 2], [[1, 6, 3], [1, 6, 3]]), { shape: [6], strides: [[1], [1]] });
  // A contiguous output with a transposed input: nothing merges.
  assert.deepEqual(coalesce([3, 2], [[2, 1], [1, 3]]), { shape: [3, 2], strides: [[2, 1], [1, 3]] });
  // Every element reached: the product of sizes is preserved.
  const c = coalesce([2, 3, 4, 5], [[60, 20, 5, 1], [0, 20, 5, 1]]);
  assert.equal(c.shape.reduce((a, b) => a * b, 1), 120);
});

test('reach, index width and vector width', () => {
  assert.equal(reach([4, 5], [5, 1]), 20);
  assert.equal(reach([4, 5], [0, 1]), 5);
  assert.equal(INDEX32_LIMIT, 2 ** 31 - 2 ** 26, "the fused renderer's 32-bit bound (grid-stride steps stay below 2^26)");
  assert.equal(vectorWidth([4, 4]), 4);
  assert.equal(vectorWidth([2, 4]), 4, 'the widest operand moves 16 bytes');
  assert.equal(vectorWidth([2]), 8);
  assert.equal(vectorWidth([1]), 16);
  assert.equal(vectorWidth([8, 1]), 2);
});

const base: PointwiseSpec = {
  op: 'add',
  expr: 'a + b',
  operands: [
    { kind: 'tensor', dtype: 'float16' },
    { kind: 'tensor', dtype: 'float16' },
  ],
  nParams: 0,
  compute: 'float16',
  out: 'float16',
  rank: 0,
  vec: 8,
  index64: false,
};

test('the pointwise generator: a one-node program of the fused renderer; contiguous vector path, fp32 compute for halves, exact parameter list', () => {
  const g = generatePointwise(base);
  assert.equal(g.name, pointwiseKernelName(base));
  assert.match(g.source, new RegExp(`extern "C" __global__ void __launch_bounds__\\(256\\) ${g.name}\\(`));
  assert.match(g.source, /KVec<8, unsigned short> L1 = \*reinterpret_cast<const KVec<8, unsigned short>\*>\(p1 \+ o1\)/, '16-byte access: 8 halves per load');
  assert.match(g.source, /const float v1_7 = kiln_h2f\(L1\.v\[7\]\);/, 'halves are computed in float');
  assert.match(g.source, /unsigned short v0_0; \{ \[\[maybe_unused\]\] const float a = \(float\)\(v1_0\); \[\[maybe_unused\]\] const float b = \(float\)\(v2_0\); v0_0 = kiln_f2h\(\(float\)\(a \+ b\)\); \}/, "the op's expression, bound and stored as the eager kernels do");
  assert.match(g.source, /const int nvec = total \/ 8;/, 'no scalar tail: the runner vectorises only sizes the width divides');
  assert.deepEqual(g.params, ['ptr', 'ptr', 'ptr', 'i32']);
  assert.deepEqual(paramLayout(g.params), { offsets: [0, 8, 16, 24], size: 28 });
  // A different expression or dtype is a different kernel.
  assert.notEqual(pointwiseKernelName({ ...base, expr: 'a - b' }), g.name);
  assert.notEqual(pointwiseKernelName({ ...base, out: 'float32' }), g.name);
});

test('the pointwise generator: strided path, broadcast and scalar operands, 64-bit indexing', () => {
  const s: PointwiseSpec = {
    ...base,
    expr: 'a * b + c',
    operands: [
      { kind: 'tensor', dtype: 'float32' },
      { kind: 'bcast', dtype: 'bfloat16', roundThrough: 'float16' },
      { kind: 'scalar', dtype: 'float32' },
    ],
    compute: 'float32',
    out: 'float32',
    rank: 2,
    vec: 1,
  };
  const g32 = generatePointwise(s);
  assert.match(g32.source, /const int o2 = \(int\)0;/, 'a numel-1 operand reads element 0');
  assert.match(g32.source, /\[\[maybe_unused\]\] const float b = kiln_h2f\(kiln_f2h\(\(float\)\(\(float\)\(v2_0\)\)\)\);/, 'a zero-dim operand of another dtype is rounded through the compute dtype');
  assert.match(g32.source, /const float v3 = \(float\)p3;/, 'a host scalar is a double argument, converted once');
  assert.match(g32.source, /const int c1 = crem % n1;/);
  // out, a, b, c(double), size0, size1, out strides x2, a strides x2 (b is not strided).
  assert.deepEqual(g32.params, ['ptr', 'ptr', 'ptr', 'f64', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32']);
  assert.equal(paramLayout(g32.params).size, 3 * 8 + 8 + 6 * 4, 'each parameter aligned to its size, no tail padding');
  const g64 = generatePointwise({ ...s, index64: true });
  assert.match(g64.source, /const long long c1 = crem % n1;/);
  assert.deepEqual(g64.params.slice(4), ['i64', 'i64', 'i64', 'i64', 'i64', 'i64']);
  assert.throws(() => generatePointwise({ ...s, vec: 4 }), /vector access needs the contiguous path/);
});

test('paramLayout follows the C ABI: (float*, int) is 12 bytes', () => {
  assert.deepEqual(paramLayout(['ptr', 'i32']), { offsets: [0, 8], size: 12 });
  assert.deepEqual(paramLayout(['i32', 'ptr', 'f32', 'f64']), { offsets: [0, 8, 16, 24], size: 32 });
});

test('every catalog expression generates a kernel whose text names its expression', () => {
  const cat = expressionCatalog();
  assert.ok(cat.length > 100, `catalog has ${cat.length} entries`);
  for (const e of cat) {
    const g = generatePointwise({
      op: e.op,
      expr: e.expr,
      operands: Array.from({ length: e.arity }, () => ({ kind: 'tensor' as const, dtype: e.compute })),
      nParams: e.nParams,
      compute: e.compute,
      out: e.compute,
      rank: 1,
      vec: 1,
      index64: false,
    });
    assert.ok(g.source.includes(e.expr), `${e.op} (${e.compute}): expression missing from the source`);
    assert.equal(g.params.length, 1 + e.arity + e.nParams + 1 + (e.arity + 1));
  }
});

test('scan kernels: threads per row, carry through shared memory, integer scans in 64 bits', () => {
  assert.deepEqual([1, 32, 33, 100, 128, 129, 100000].map(threadsPerRowFor), [32, 32, 64, 128, 128, 256, 256]);
  const g = generateScan({ kind: 'cumsum', inDtype: 'bfloat16', outDtype: 'bfloat16', tpr: 128 });
  assert.match(g.source, /__shfl_up_sync/);
  assert.match(g.source, /smem\[threadIdx.x >> 5\] = v/, 'beyond one warp, warp totals combine through shared memory');
  const s = generateScan({ kind: 'cumsum', inDtype: 'int32', outDtype: 'int64', tpr: 32 });
  assert.match(s.source, /long long carry = 0;/, 'integer scans accumulate in 64 bits');
  assert.doesNotMatch(s.source, /smem\[threadIdx.x >> 5\] = v/, 'one warp needs no shared memory for the scan');
  assert.throws(() => generateScan({ kind: 'cumprod', inDtype: 'float32', outDtype: 'float32', tpr: 48 }), /32, 64, 128 or 256/);
});

test('NVRTC logs are shown with numbered source lines around each error', () => {
  const src = ['// line 1', 'extern "C" __global__ void k(float* x) {', '  x[0] = undefined_thing;', '}', '// line 5'].join('\n');
  const log = 'k.cu(3): error: identifier "undefined_thing" is undefined\n\n1 error detected in the compilation of "k.cu".';
  const text = formatNvrtcLog(src, 'k.cu', log);
  assert.match(text, /identifier "undefined_thing" is undefined/);
  assert.match(text, />\s*3 \|\s+x\[0\] = undefined_thing;/, 'the failing line is marked');
  assert.match(text, / 1 \| \/\/ line 1/);
  assert.match(text, / 5 \| \/\/ line 5/);
});

function fakeEnv(files: string[], env: Record<string, string> = {}, dirs: Record<string, string[]> = {}): DiscoverEnv {
  const set = new Set(files);
  return { env, exists: (p) => set.has(p) || Object.keys(dirs).includes(p), list: (d) => dirs[d] ?? [], home: '/home/u' };
}

test('library discovery: CUDA_HOME, /usr/local/cuda, pip wheels, and a message naming what is missing', () => {
  const home = fakeEnv(['/opt/cuda-13/lib64/libnvrtc.so.13'], { CUDA_HOME: '/opt/cuda-13' });
  assert.equal(findLibrary('nvrtc', home).path, '/opt/cuda-13/lib64/libnvrtc.so.13');
  const usr = fakeEnv(['/usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13']);
  assert.equal(findLibrary('cublasLt', usr).path, '/usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13');
  const site = '/home/u/.local/lib/python3.12/site-packages';
  const pip = fakeEnv([path.join(site, 'nvidia/cuda_nvrtc/lib/libnvrtc.so.12')], {}, { '/home/u/.local/lib': ['python3.12'], [site]: [] });
  assert.equal(findLibrary('nvrtc', pip).path, path.join(site, 'nvidia/cuda_nvrtc/lib/libnvrtc.so.12'));
  const none = findLibrary('nvrtc', fakeEnv([]));
  assert.equal(none.path, undefined);
  assert.deepEqual(none.candidates, ['libnvrtc.so.13', 'libnvrtc.so.12', 'libnvrtc.so'], 'still tried by bare name through the loader');
  const msg = missingMessage(none);
  assert.match(msg, /libnvrtc\.so\.13/);
  assert.match(msg, /nvidia-cuda-nvrtc/);
  assert.match(msg, /\/usr\/local\/cuda\/lib64/);
  assert.match(missingMessage(findLibrary('cuda', fakeEnv([]))), /NVIDIA driver/);
});

test('the cuda probe explains why cuda is unavailable, or names the libraries it found', () => {
  const p = probeCuda();
  assert.equal(typeof p.available, 'boolean');
  if (p.available) assert.match(p.reason, /driver .*NVRTC/);
  else assert.match(p.reason, /libcuda|koffi|NVRTC|libnvrtc|Linux/);
});

test('cuBLASLt operand mapping: row-major reads untransposed, a transposed view reads with TRANS, others need a copy', () => {
  // Row-major [M=3, K=4] (strides 4, 1): column-major 4 x 3, ld 4.
  assert.deepEqual(rowMajorOperand(1024, 3, 4, 4, 1, 0), { ptr: 1024, rows: 4, cols: 3, ld: 4, trans: false, batchStride: 0 });
  // W^T of a [N=5, K=4] weight: [4, 5] with strides (1, 4): stored 4 x 5 column-major, ld 4, transposed.
  assert.deepEqual(rowMajorOperand(2048, 4, 5, 1, 4, 0), { ptr: 2048, rows: 4, cols: 5, ld: 4, trans: true, batchStride: 0 });
  // A padded row-major matrix (row stride 8 > 4) is still readable.
  assert.equal(rowMajorOperand(0, 3, 4, 8, 1, 0)?.ld, 8);
  // Strides (2, 2) fit neither layout.
  assert.equal(rowMajorOperand(0, 3, 4, 2, 2, 0), null);
});
