/**
 * Issue #20's target: compiled elementwise on webgpu at >= 80% of copy bandwidth. Measures, in one
 * process and alternating rep by rep so clock drift hits every variant alike, for each dtype on
 * x [n, n] (the elementwise-4096 workload's input):
 *   - copy:         a device-to-device buffer copy of x's bytes (copyBufferToBuffer), the reference;
 *   - clone vec/scalar: x.clone(), the one-node pointwise copy kernel, vectorised
 *                   (KILN_WEBGPU_VEC_POINTWISE=1) and one element per invocation (=0): the kernel
 *                   structure's bandwidth without the math;
 *   - compiled vec/scalar: kiln.compile(elementwiseForward)(x), the workload's compiled call;
 *   - compiled vec with its NaN checks in the functions (KILN_WEBGPU_NAN_HOIST off).
 * Each figure is device time (kiln.Event: timestamp queries) of `--calls` calls queued back to
 * back, divided by the calls, median of `--reps` batches; GB/s counts bytes read + written. It
 * checks that the vectorised compiled output has the scalar kernel's bits (on this device's driver)
 * and prints one JSON line per row, then a table with each row's fraction of the copy.
 *
 * `--hand` also dispatches the vectorised compiled kernel's WGSL (NaN checks in the functions) with hand edits, each alone and all
 * together, to price each part of the fast math (float32 only; each edit asserts that it applied):
 * `div` plain a / b for kiln_div (no range branch), `nan` no NaN selects, `clamp` exp2's argument
 * unclamped, `poly` tanh without the small-|x| polynomial, `sig` the decomposed sigmoid as one
 * kiln_fsigmoid, `tanh` WGSL's builtin tanh. The edits change results (that is their price) and
 * are a measurement, not a form the compiler emits.
 *
 * `--grid` also dispatches the vectorised compiled kernel's own WGSL by hand with the workgroup
 * count capped at each of 65535 (the default launch), 8192, 4096, 2048, 1024 and 512 (the
 * kernel's loop is grid-stride, so every count computes the same): whether fewer, fuller
 * workgroups would pay. `--dump DIR` writes the compiled kernels' WGSL sources there.
 *
 *   node dist/bench/webgpu-elementwise-vec.js [--n 4096] [--dtypes float32,float16,bfloat16]
 *        [--calls 20] [--reps 15] [--grid] [--dump DIR] [--json out.json]
 */
import fs from 'node:fs';
import path from 'node:path';
import * as kiln from '../src/index.js';
import { deviceMsPerCall } from './webgpu-device-ms.js';
import { elementwiseForward } from '../src/bench/workloads.js';
import type { WgslProgram } from '../src/compile/codegen/wgsl/program.js';
import { FAST_MATH_FORMS } from '../src/kernels/math/wgsl-libm/fast.js';
import { setOption } from '../src/runtime/config.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../src/tensor/dtype.js';
import { itemSize } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const n = Number(flag('--n') ?? 4096);
const dtypes = (flag('--dtypes') ?? 'float32,float16,bfloat16').split(',') as DType[];
const calls = Number(flag('--calls') ?? 20);
const reps = Number(flag('--reps') ?? 15);
const grid = argv.includes('--grid');
const hand = argv.includes('--hand');
const dump = flag('--dump');
const jsonOut = flag('--json');

const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;

const deviceMs = (fns: (() => void)[]): number[] => deviceMsPerCall(fns, reps, calls);

/** fn run with boolean option `name` set to `value` (restored after). */
function withOption<T>(name: 'KILN_WEBGPU_VEC_POINTWISE' | 'KILN_WEBGPU_NAN_HOIST', value: boolean, fn: () => T): T {
  setOption(name, value);
  try {
    return fn();
  } finally {
    setOption(name, undefined);
  }
}

/** fn run with the vectorised pointwise kernels on or off. */
const withVec = (on: boolean, fn: () => void) => (): void => withOption('KILN_WEBGPU_VEC_POINTWISE', on, fn);

/** The storage words of a contiguous tensor (float32 bits, 16-bit words), read back. */
function bitsOf(t: Tensor): Uint32Array | Uint16Array {
  const c = t.to('cpu');
  const buf = c.storage.cpuArrayBuffer();
  return itemSize(c.dtype) === 4 ? new Uint32Array(buf, 4 * c.offset, c.numel()) : new Uint16Array(buf, 2 * c.offset, c.numel());
}

/** Hand edits of the compiled float32 kernel (--hand): [pattern, replacement] pairs, each required to match. */
const HAND_EDITS: Record<string, [RegExp, string][]> = {
  div: [[/^(\s*let v\d+: f32 = )kiln_div\(([^,]+), ([^)]+)\);$/gm, '$1($2 / $3);']],
  nan: [[/fn kiln_isnan\(x: f32\) -> bool \{[^}]*\}/g, 'fn kiln_isnan(x: f32) -> bool { return false; }']],
  clamp: [[/clamp\(x \* (0x1\.715476p0f), -127\.0f, 128\.0f\)/g, 'x * $1']],
  poly: [[/let t = select\((1\.0f - 2\.0f \/ \(kiln_fpow2\(a \* 0x1\.715476p1f\) \+ 1\.0f\)), tp, a < 0\.55f\);/g, 'let t = $1;']],
  // (handEdit declares kiln_fsigmoid, which the decomposed kernel does not carry.)
  sig: [
    [/^(\s*let v\d+: f32 = )kiln_div\(1\.0f, v18\);$/gm, '$1kiln_fsigmoid(v0);'],
    [/^(\s*let v\d+: f32 = )\(1\.0f \/ v18\);$/gm, '$1kiln_fsigmoid(v0);'],
  ],
  tanh: [[/kiln_ftanh\((v\d+)\)/g, 'tanh($1)']],
  // ReLU's NaN pass-through as one unordered test (select(v, 0, v <= 0): false for NaN) instead of a
  // compare, the bit test and an or.
  relu1: [[/select\(0\.0f, (v\d+), \1 > 0\.0f \|\| kiln_isnan\(\1\)\)/g, 'select($1, 0.0f, $1 <= 0.0f)']],
  // The NaN checks hoisted: none inside the functions, one on the input at each store (what a
  // compiler may do where every path from the input to the output propagates NaN).
  nanonce: [
    [/kiln_isnan\((?!x: f32\))/g, 'kiln_nan_never('],
    [/@compute/, 'fn kiln_nan_never(x: f32) -> bool { return false; }\n@compute'],
    [/^(\s*)r0\[(\d)\] = (v\d+);$/gm, '$1r0[$2] = select($3, v0, kiln_isnan(v0));'],
  ],
};
/** Edits measured alone only (they restate another edit's change, or need the check 'nan' removes). */
const ALONE = new Set(['nanonce', 'relu1']);

function editApplies(source: string, e: string): boolean {
  return HAND_EDITS[e]!.some(([re]) => source.replace(re, '') !== source);
}

function handEdit(source: string, edits: string[]): string {
  let s = source;
  for (const e of edits) {
    let hit = false;
    for (const [re, to] of HAND_EDITS[e]!) {
      const next = s.replace(re, to);
      if (next !== s) hit = true;
      s = next;
    }
    if (!hit) throw new Error(`--hand edit '${e}' matched nothing in the compiled source`);
  }
  if (s.includes('kiln_fsigmoid(') && !s.includes('fn kiln_fsigmoid(')) s = s.replace('@compute', `${FAST_MATH_FORMS.kiln_fsigmoid}\n@compute`);
  return s;
}

interface Row {
  dtype: DType;
  variant: string;
  ms: number;
  gbs: number;
  of_copy: number;
}
const rows: Row[] = [];
const props = acc.properties(0);
console.log(JSON.stringify({ device: props.name, backend: props.backend, features: acc.bridge.adapter.features, n, calls, reps }));

for (const dtype of dtypes) {
  const x = kiln.randn([n, n]).to(dtype).to('webgpu');
  const bytes = 2 * x.numel() * itemSize(dtype);
  const dst = kiln.empty([n, n], { dtype, device: 'webgpu' });
  const f = kiln.compile(elementwiseForward, { name: `ew-vec-${dtype}` });
  const call = (): void => void kiln.noGrad(() => f(x));
  // The same kernel with its NaN checks inside the functions (KILN_WEBGPU_NAN_HOIST off): the
  // hoist's A/B, and the source the hand edits start from.
  const fChecked = kiln.compile(elementwiseForward, { name: `ew-vec-checked-${dtype}` });
  const callChecked = (): void => withOption('KILN_WEBGPU_NAN_HOIST', false, () => void kiln.noGrad(() => fChecked(x)));

  // The vectorised output has the scalar kernel's bits.
  const vecOut = kiln.noGrad(() => withOption('KILN_WEBGPU_VEC_POINTWISE', true, () => f(x)));
  const scalarOut = kiln.noGrad(() => withOption('KILN_WEBGPU_VEC_POINTWISE', false, () => f(x)));
  const a = bitsOf(vecOut);
  const b = bitsOf(scalarOut);
  let diff = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) diff++;
  console.log(JSON.stringify({ dtype, check: 'compiled vectorised vs scalar bits', differing_elements: diff, of: a.length }));
  vecOut.dispose();
  scalarOut.dispose();

  const variants: [string, () => void][] = [
    ['copy (copyBufferToBuffer)', () => acc.copyDeviceToDevice(dst.storage.buffer, 0, x.storage.buffer, 0, x.numel() * itemSize(dtype))],
    ['clone vec', withVec(true, () => void x.clone())],
    ['clone scalar', withVec(false, () => void x.clone())],
    ['compiled vec', withVec(true, call)],
    ['compiled scalar', withVec(false, call)],
    ['compiled vec, NaN checks in the functions', withVec(true, callChecked)],
  ];
  const ms = deviceMs(variants.map((v) => v[1]));
  const copyMs = ms[0]!;
  variants.forEach(([variant], k) => {
    const row: Row = { dtype, variant, ms: Number(ms[k]!.toFixed(4)), gbs: Number((bytes / ms[k]! / 1e6).toFixed(1)), of_copy: Number((copyMs / ms[k]!).toFixed(3)) };
    rows.push(row);
    console.log(JSON.stringify(row));
  });

  const program = f.programs().inference[0] as WgslProgram | undefined;
  const sources = program?.seed().sources ?? [];
  const checkedSources = (fChecked.programs().inference[0] as WgslProgram | undefined)?.seed().sources ?? [];
  if (dump !== undefined) {
    fs.mkdirSync(dump, { recursive: true });
    for (const s of sources) fs.writeFileSync(path.join(dump, `${dtype}-${/\|v\d/.test(s.memo) ? 'vec' : 'scalar'}.wgsl`), `// ${s.memo}\n${s.source}\n`);
  }
  if (hand && dtype === 'float32') {
    const src = checkedSources.find((s) => /\|v4/.test(s.memo));
    if (src !== undefined) {
      const k0 = src.source;
      const y = kiln.empty([n, n], { dtype, device: 'webgpu' });
      const N = n * n;
      const meta = new Uint32Array([N, N, 0, 1, 0, 1]);
      const groups = Math.min(65535, Math.ceil(N / 4 / 256));
      // Edits with nothing to change in this build's source (the sigmoid already whole) are left out.
      const names = Object.keys(HAND_EDITS).filter((e) => {
        const ok = editApplies(k0, e);
        if (!ok) console.log(JSON.stringify({ dtype, hand: e, skipped: 'nothing to edit in the compiled source' }));
        return ok;
      });
      const variants: [string, string][] = [['as compiled', k0], ...names.map((e): [string, string] => [e, handEdit(k0, [e])]), ['all', handEdit(k0, names.filter((e) => !ALONE.has(e)))], ['nanonce + relu1', handEdit(k0, names.filter((e) => ALONE.has(e)))]];
      const kernels = variants.map(([name, text]) => acc.kernel(text, `hand ${name}`));
      const hms = deviceMs(kernels.map((k) => () => acc.dispatch(k, [y.storage.buffer, x.storage.buffer], meta, [groups, 1, 1])));
      variants.forEach(([name], i) => {
        const row: Row = { dtype, variant: `hand: ${name}`, ms: Number(hms[i]!.toFixed(4)), gbs: Number((bytes / hms[i]! / 1e6).toFixed(1)), of_copy: Number((copyMs / hms[i]!).toFixed(3)) };
        rows.push(row);
        console.log(JSON.stringify(row));
      });
      y.dispose();
    }
  }
  if (grid) {
    const src = sources.find((s) => /\|v4/.test(s.memo));
    if (src === undefined) {
      console.log(JSON.stringify({ dtype, grid: 'no vectorised source launched' }));
    } else {
      const k = acc.kernel(src.source, `${dtype} grid sweep`);
      const y = kiln.empty([n, n], { dtype, device: 'webgpu' });
      const N = n * n;
      const meta = new Uint32Array([N, N, 0, 1, 0, 1]);
      const full = Math.ceil(N / 4 / 256);
      const caps = [...new Set([65535, 8192, 4096, 2048, 1024, 512].map((c) => Math.min(full, c)))];
      const gms = deviceMs(caps.map((cap) => () => acc.dispatch(k, [y.storage.buffer, x.storage.buffer], meta, [Math.min(full, cap), 1, 1])));
      caps.forEach((cap, i) => {
        const row: Row = { dtype, variant: `compiled vec kernel, ${cap} workgroups`, ms: Number(gms[i]!.toFixed(4)), gbs: Number((bytes / gms[i]! / 1e6).toFixed(1)), of_copy: Number((copyMs / gms[i]!).toFixed(3)) };
        rows.push(row);
        console.log(JSON.stringify(row));
      });
      y.dispose();
    }
  }
  x.dispose();
  dst.dispose();
}

console.log('');
console.log(`${'dtype'.padEnd(9)} ${'variant'.padEnd(42)} ${'ms'.padStart(8)} ${'GB/s'.padStart(8)} ${'of copy'.padStart(8)}`);
for (const r of rows) console.log(`${r.dtype.padEnd(9)} ${r.variant.padEnd(42)} ${r.ms.toFixed(4).padStart(8)} ${r.gbs.toFixed(1).padStart(8)} ${`${(100 * r.of_copy).toFixed(1)}%`.padStart(8)}`);
if (jsonOut) fs.writeFileSync(jsonOut, `${JSON.stringify({ device: props.name, n, calls, reps, rows }, null, 1)}\n`);
process.exit(0);
