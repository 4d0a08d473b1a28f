/**
 * The WGSL source of a one-node pointwise program: an output and up to a few tensor inputs, any
 * strides (broadcast inputs have stride 0), the element expression rendered by the WGSL math table
 * over identifiers v0..v(k-1). Shapes, strides and offsets are metadata words (binding n after the
 * n storage buffers), not source, so one pipeline serves every shape of a rank; the rank is part
 * of the source (the index arithmetic is unrolled). Invocations loop grid-stride over the
 * elements, so any size fits the 65535-workgroup grid limit.
 *
 * Metadata words: [numel, size[0..R-1], then per tensor (output first) offset, stride[0..R-1]];
 * strides are i32 bit patterns, added in wrapping u32 arithmetic (correct below 2^32 elements).
 */
import { PRELUDE_MARK, withPrelude } from '../math/wgsl-prelude.js';
import { arrayType, loadExpr, storagePrelude, storeStmt, type StorageKind } from './storage.js';

export const WORKGROUP = 256;

export interface PwBinding {
  readonly kind: StorageKind;
  readonly written: boolean;
}

export interface PwSpec {
  readonly rank: number;
  /** Distinct buffers; binding 0 is the output's. */
  readonly bindings: readonly PwBinding[];
  /** Each tensor input's binding. */
  readonly inputs: readonly number[];
  /** The element's value in the output's compute type, over v0..v(k-1). */
  readonly expr: string;
}

/** Words of metadata for rank R and T tensors (output included). */
export const metaWords = (rank: number, tensors: number): number => 1 + rank + tensors * (1 + rank);

export function generatePointwise(spec: PwSpec): string {
  const R = spec.rank;
  const T = spec.inputs.length + 1;
  const lines: string[] = [];
  if (spec.bindings.some((b) => b.kind === 'f16')) lines.push('enable f16;');
  spec.bindings.forEach((b, i) => lines.push(`@group(0) @binding(${i}) var<storage, ${b.written ? 'read_write' : 'read'}> b${i}: ${arrayType(b.kind, b.written)};`));
  lines.push(`@group(0) @binding(${spec.bindings.length}) var<storage, read> kmeta: array<u32>;`);
  lines.push(PRELUDE_MARK);
  const helpers = storagePrelude(spec.bindings.map((b) => b.kind));
  if (helpers) lines.push(helpers);
  lines.push(`@compute @workgroup_size(${WORKGROUP})`);
  lines.push('fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {');
  lines.push('  let n = kmeta[0];');
  lines.push(`  let step = ng.x * ${WORKGROUP}u;`);
  lines.push('  for (var i = gid.x; i < n; i = i + step) {');
  const base = (t: number): number => 1 + R + t * (1 + R);
  for (let t = 0; t < T; t++) lines.push(`    var o${t} = kmeta[${base(t)}];`);
  if (R > 0) lines.push('    var rem = i;');
  for (let d = R - 1; d >= 0; d--) {
    lines.push(`    { let c = rem % kmeta[${1 + d}]; rem = rem / kmeta[${1 + d}];`);
    for (let t = 0; t < T; t++) lines.push(`      o${t} = o${t} + c * kmeta[${base(t) + 1 + d}];`);
    lines.push('    }');
  }
  spec.inputs.forEach((b, k) => {
    const bind = spec.bindings[b]!;
    lines.push(`    let v${k} = ${loadExpr(bind.kind, `b${b}`, `o${k + 1}`, bind.written)};`);
  });
  lines.push(`    ${storeStmt(spec.bindings[0]!.kind, 'b0', 'o0', spec.expr).replace(/\n/g, '\n    ')}`);
  lines.push('  }');
  lines.push('}');
  return withPrelude(lines.join('\n'));
}
