#!/usr/bin/env node
/**
 * One sha256 over the WGSL of the fused-group renderer (src/kernels/webgpu/fused/render.ts) and the
 * llm rotary kernel (src/kernels/webgpu/llm-rotary.ts) for a representative set of specs, so a
 * refactor of those renderers can be shown to leave the generated code byte-identical: run it
 * before and after, compare the printed hash and count. Runs against dist/ (build first); needs
 * no adapter (groups are traced on the cpu, their values relabelled as webgpu ones, and lowered
 * for the webgpu target; rendering is text).
 *
 *   npm run build && node scripts/webgpu-render-sources-hash.mjs [--list]
 *
 * Fused groups: the graphs of test/webgpu-reduction-cases.ts compileCases() plus a few short- and
 * long-row reductions, and the eager argmax/argmin groups (reduction.ts; the register-resident and
 * unrolled forms' argreduce branches), each under every strategy (pointwise; thread and workgroup), subgroups on/off, packed
 * and native float16 bindings, workgroup sizes default/64/256, and for 'workgroup' reductions
 * unroll 1/2/4 and resident 1/2/8 registers. A spec the renderer rejects contributes its error
 * message instead (a changed rejection changes the hash too).
 * Rotary: qkNormRotaryCacheSourceForTest over storage kinds f32/f16/f16p/bf16p, head dims
 * 64/128/256, neox and gpt-j, int32/int64 slots, loop and register forms (with and without
 * subgroups): the loop form's and the register form's norm trees are both in these sources.
 * --list prints a count and sub-hash per part.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const imp = (p) => import(pathToFileURL(path.join(root, 'dist', p)).href);
const kiln = await imp('src/index.js');
const { compileCases } = await imp('test/webgpu-reduction-cases.js');
const { trace } = await imp('src/compile/capture.js');
const { lowerFor } = await imp('src/compile/target.js');
const { webgpuTarget } = await imp('src/compile/codegen/wgsl/target.js');
const { fusedGroup, groupLayout } = await imp('src/compile/codegen/wgsl/group.js');
const { renderFused } = await imp('src/kernels/webgpu/fused/render.js');
const { storageKind } = await imp('src/kernels/webgpu/storage.js');
const { qkNormRotaryCacheSourceForTest } = await imp('src/kernels/webgpu/llm-rotary.js');
const { Device } = await imp('src/runtime/device.js');

const all = crypto.createHash('sha256');
const parts = new Map();
function add(part, label, text) {
  const rec = `${part}\0${label}\0${text}\0`;
  all.update(rec);
  let e = parts.get(part);
  if (!e) parts.set(part, (e = { n: 0, h: crypto.createHash('sha256') }));
  e.n++;
  e.h.update(rec);
}

kiln.manualSeed(5);
const short = kiln.randn([5, 37]);
const long = kiln.randn([2, 700]);
const half = kiln.randn([4, 300]).to('float16');
const cases = [
  ...compileCases(),
  { label: 'argmax/argmin, sum (short rows)', fn: (x) => [kiln.argmax(x, -1), kiln.argmin(x, -1), kiln.sum(x, -1)], inputs: [short] },
  { label: 'argmax, softmax (long rows)', fn: (x) => [kiln.argmax(x, -1), kiln.softmax(x, -1)], inputs: [long] },
  { label: 'argmin, amax (float16)', fn: (x) => [kiln.argmin(x, -1, true), kiln.amax(x, -1)], inputs: [half] },
];

/** Every spec variant of one group (`layout`: its oshape/rshape) into part 'fused'. */
function renderAll(label, fg, layout, dtypeOf) {
  const ops = [...fg.outputs, ...fg.inputs];
  const strategies = fg.kind === 'pointwise' ? ['pointwise'] : ['thread', 'workgroup'];
  for (const strategy of strategies) {
    const extra = strategy === 'workgroup' ? [{}, { unroll: 2 }, { unroll: 4 }, { resident: 1 }, { resident: 2 }, { resident: 8 }, { unroll: 2, resident: 2 }] : [{}];
    for (const workgroup of [undefined, 64, 256]) {
      for (const subgroups of [false, true]) {
        for (const nativeF16 of [false, true]) {
          for (const x of extra) {
            const bindings = ops.map((id, k) => ({ kind: dtypeOf(id) === 'int64' && k < fg.outputs.length ? 'i64' : storageKind(dtypeOf(id), nativeF16), written: k < fg.outputs.length }));
            // An int64 output binds as 'i64' (fused/run.ts).
            const spec = { strategy, orank: layout.oshape.length, rrank: layout.rshape.length, bindings, operandBinding: ops.map((_, k) => k), subgroups, ...(workgroup ? { workgroup } : {}), ...x };
            let text;
            try {
              text = renderFused(fg, spec);
            } catch (e) {
              text = `error: ${e.message}`;
            }
            add('fused', `${label} ${JSON.stringify({ strategy, workgroup, subgroups, nativeF16, ...x })}`, text);
          }
        }
      }
    }
  }
}

for (const c of cases) {
  const { graph } = trace(c.fn, c.inputs);
  // Traced on the cpu (no adapter needed); the webgpu fusion rules only fuse values on a webgpu
  // device, so every value is moved there by name before lowering.
  const gpu = new Device('webgpu', 0);
  for (const [id, v] of graph.values) graph.values.set(id, { ...v, device: gpu });
  const { low, sched } = lowerFor(graph, webgpuTarget);
  sched.kernels.forEach((g, gi) => {
    const L = groupLayout(g, (id) => low.values.get(id));
    renderAll(`${c.label} #${gi}`, fusedGroup(g, low), L, (id) => low.values.get(id).dtype);
  });
}

// argmax / argmin (not fused by kiln.compile on webgpu: the eager kernels' one-node groups, built
// as reduction.ts argReduce builds them), with the values output and without.
for (const dtype of ['float32', 'float16', 'int32']) {
  for (const kind of ['argmax', 'argmin']) {
    for (const withValues of [false, true]) {
      const vid = withValues ? 100 : 50;
      const iid = withValues ? 101 : 100;
      const values = new Map([
        [0, { dtype, shape: [3, 40] }],
        [vid, { dtype, shape: [3] }],
        [iid, { dtype: 'int64', shape: [3] }],
      ]);
      const nodes = [{ kind: 'reduction', op: kind, args: [], outputs: [vid, iid], reduce: { kind, input: 0 } }];
      const fg = { kind: 'reduce', nodes, rowScalars: new Set([vid, iid]), inputs: [0], outputs: withValues ? [100, 101] : [100], value: (id) => values.get(id) };
      renderAll(`${kind} ${dtype}${withValues ? ' values' : ''}`, fg, { oshape: [3], rshape: [40] }, (id) => values.get(id).dtype);
    }
  }
}

for (const kind of ['f32', 'f16', 'f16p', 'bf16p']) {
  for (const d of [64, 128, 256]) {
    for (const isNeox of [true, false]) {
      for (const slots of ['int32', 'int64']) {
        for (const form of [{ registers: false, subgroups: false }, { registers: true, subgroups: false }, { registers: true, subgroups: true }]) {
          add('rotary', JSON.stringify({ kind, d, isNeox, slots, form }), qkNormRotaryCacheSourceForTest(kind, d, isNeox, slots, form));
        }
      }
    }
  }
}

const count = [...parts.values()].reduce((n, e) => n + e.n, 0);
if (process.argv.includes('--list')) for (const [part, e] of parts) console.log(`${part.padEnd(7)} ${String(e.n).padStart(6)} ${e.h.digest('hex')}`);
console.log(`webgpu render sources: ${count} sha256 ${all.digest('hex')}`);
