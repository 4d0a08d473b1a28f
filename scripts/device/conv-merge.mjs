#!/usr/bin/env node
// Appends the conv-stack end-to-end rows (Kiln `kiln bench --json`, PyTorch `bench_pytorch.py
// --json`) to the per-conv rows of bench.json and prints one table of them. Missing files (a part
// that ran out of time) leave '-' in the table.
//   node scripts/device/conv-merge.mjs <bench.json> <kiln-e2e.json> <pytorch.json>
import fs from 'node:fs';

const [benchFile, kilnFile, torchFile] = process.argv.slice(2);
const read = (f) => {
  try {
    return JSON.parse(fs.readFileSync(f, 'utf8'));
  } catch {
    return null;
  }
};
const rows = read(benchFile) ?? [];
const kiln = read(kilnFile)?.results ?? [];
const torch = read(torchFile)?.results ?? [];
const f = (v) => (typeof v === 'number' ? v.toFixed(3) : '-');
console.log('workload    dtype     kiln eager  kiln compiled  torch eager  torch.compile');
for (const dtype of ['float32', 'bfloat16']) {
  const k = kiln.find((r) => r.workload === 'conv-stack' && r.dtype === dtype) ?? {};
  const t = torch.find((r) => r.workload === 'conv-stack' && r.dtype === dtype) ?? {};
  const row = { op: 'conv-stack', shape: 'x [16,3,224,224] channels_last, full', dtype, kiln_eager_ms: k.eager_ms ?? k.eagerMs, kiln_compiled_ms: k.compiled_ms ?? k.compiledMs, torch_eager_ms: t.eager_ms, torch_compiled_ms: t.compiled_ms };
  rows.push(row);
  console.log(`conv-stack  ${dtype.padEnd(9)} ${f(row.kiln_eager_ms).padStart(10)} ${f(row.kiln_compiled_ms).padStart(14)} ${f(row.torch_eager_ms).padStart(12)} ${f(row.torch_compiled_ms).padStart(14)}`);
}
fs.writeFileSync(benchFile, JSON.stringify(rows, null, 1));
