/**
 * webgpu kernels for sort, argsort and topk: a bitonic sort of each line along the dim, in
 * workgroup memory where it fits, with global passes for long lines. topk of at most SELECT_MAX
 * runs topk-select.ts's radix select instead (same result, no sort of the whole line).
 *
 * Every line is padded to P = nextPow2(len) slots and the lines laid end to end in two temporary
 * u32 arrays (keys, positions). Keys are order-preserving u32s of the compute value (the CPU
 * kernel's: NaN above +inf, -0 equal to +0, inverted for descending), and slots compare by (key,
 * position), a total order whose ascending result is the stable sort: ties keep their order, and
 * padding (the largest key, positions >= len) sorts after every element.
 *
 * Passes: `local` sorts tiles of T = min(2048, nextPow2(lines * P)) slots in workgroup memory
 * (16 KiB: every WebGPU device has it), running every stage of the network that stays inside a
 * tile. Lines longer than a tile then need, per merge size k > T, one `global` launch per stage
 * whose partners are a tile or more apart and one `local` merge of the stages within tiles (the
 * multi-pass fallback: about log2(P / T)^2 / 2 launches). `emit` writes the first `count` slots of
 * each line: the values read back from the input at their positions (exact in every storage form),
 * and the positions as int64.
 *
 * float32, float16, bfloat16, int32, uint8 and bool (64-bit inputs have no WGSL form).
 */
import * as R from '../../ops/defs/reduction.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import { fmtShape, normalizeDim } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut, webgpu } from './device.js';
import { AFTER, keyFns, lineOffsets, nextPow2 } from './sort-keys.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { positionDigits, selectTopk, SELECT_MAX } from './topk-select.js';
import { dataKind, groupsFor, header, kernelFor, WG, words } from './template.js';

/** Slots sorted in workgroup memory: keys and positions, 8 bytes each. */
const TILE = 2048;

/**
 * `local`: each workgroup loads tiles of T slots (from the input when `x` is given, else from the
 * temporaries), runs the network's stages inside the tile (every stage up to min(P, T) when
 * `merge` is false; else the stages j < T of merge size kmeta[4]) and stores the tile.
 */
function localSource(x: StorageKind | null, merge: boolean): string {
  const binds = [
    { kind: 'u32' as const, written: true },
    { kind: 'u32' as const, written: true },
    ...(x ? [{ kind: x, written: false }] : []),
  ];
  const lines = header(binds);
  lines.push(AFTER);
  if (x) lines.push(keyFns(x));
  lines.push(
    `var<workgroup> skey: array<u32, ${TILE}>;`,
    `var<workgroup> sidx: array<u32, ${TILE}>;`,
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) ng: vec3u) {',
    '  let total = kmeta[0] * kmeta[1]; let P = kmeta[1]; let T = kmeta[8];',
    '  let tiles = (total + T - 1u) / T;',
    '  for (var t = wid.x; t < tiles; t = t + ng.x) {',
    `    for (var s = lid; s < T; s = s + ${WG}u) {`,
    '      let g = t * T + s;',
    '      var key = 0xffffffffu; var idx = 0xffffffffu;',
    '      if (g < total) {',
  );
  if (x) {
    lines.push(
      '        let line = g / P; let i = g % P; idx = i;',
      '        if (i < kmeta[2]) {',
      ...lineOffsets(false).map((l) => `          ${l}`),
      `          key = kiln_key(${loadExpr(x, 'b2', 'xo + i * kmeta[9]', false)});`,
      '          if (kmeta[3] != 0u) { key = ~key; }',
      '        }',
    );
  } else lines.push('        key = b0[g]; idx = b1[g];');
  lines.push(
    '      }',
    '      skey[s] = key; sidx[s] = idx;',
    '    }',
    '    workgroupBarrier();',
    merge ? '    { let k = kmeta[4];' : '    for (var k = 2u; k <= min(P, T); k = k << 1u) {',
    `      for (var j = ${merge ? 'T' : 'k'} >> 1u; j > 0u; j = j >> 1u) {`,
    `        for (var p = lid; p < (T >> 1u); p = p + ${WG}u) {`,
    '          let a = (p / j) * 2u * j + p % j; let b = a + j;',
    '          let asc = (((t * T + a) % P) & k) == 0u;',
    '          let ka = skey[a]; let kb = skey[b]; let ia = sidx[a]; let ib = sidx[b];',
    '          if (kiln_after(ka, ia, kb, ib) == asc) { skey[a] = kb; skey[b] = ka; sidx[a] = ib; sidx[b] = ia; }',
    '        }',
    '        workgroupBarrier();',
    '      }',
    '    }',
    `    for (var s = lid; s < T; s = s + ${WG}u) {`,
    '      let g = t * T + s;',
    '      if (g < total) { b0[g] = skey[s]; b1[g] = sidx[s]; }',
    '    }',
    '    workgroupBarrier();',
    '  }',
    '}',
  );
  return lines.join('\n');
}

/** `global`: one stage (k, j) of the network over pairs j >= T apart, one invocation per pair. */
function globalSource(): string {
  const lines = header([
    { kind: 'u32', written: true },
    { kind: 'u32', written: true },
  ]);
  lines.push(
    AFTER,
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let pairs = kmeta[0] * kmeta[1] / 2u; let P = kmeta[1]; let k = kmeta[4]; let j = kmeta[5];',
    `  for (var p = gid.x; p < pairs; p = p + ng.x * ${WG}u) {`,
    '    let a = (p / j) * 2u * j + p % j; let b = a + j;',
    '    let asc = ((a % P) & k) == 0u;',
    '    let ka = b0[a]; let kb = b0[b]; let ia = b1[a]; let ib = b1[b];',
    '    if (kiln_after(ka, ia, kb, ib) == asc) { b0[a] = kb; b0[b] = ka; b1[a] = ib; b1[b] = ia; }',
    '  }',
    '}',
  );
  return lines.join('\n');
}

/** `emit`: slot q < count of each line: the position as int64 (b0) and, with values, the value (b2 from the input b3). */
function emitSource(v: StorageKind | null, x: StorageKind | null): string {
  const binds = [
    { kind: 'u32' as const, written: true },
    { kind: 'u32' as const, written: false },
    ...(v && x
      ? [
          { kind: v, written: true },
          { kind: x, written: false },
        ]
      : []),
  ];
  const lines = header(binds);
  lines.push(
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let P = kmeta[1]; let count = kmeta[6]; let n = kmeta[0] * count;',
    `  for (var e = gid.x; e < n; e = e + ng.x * ${WG}u) {`,
    '    let line = e / count; let q = e % count;',
    ...lineOffsets(true).map((l) => `    ${l}`),
    '    let i = b1[line * P + q];',
    '    b0[2u * (io + q * kmeta[11])] = i; b0[2u * (io + q * kmeta[11]) + 1u] = 0u;',
  );
  if (v && x) lines.push(`    ${storeStmt(v, 'b2', 'vo + q * kmeta[10]', loadExpr(x, 'b3', 'xo + i * kmeta[9]', false)).replace(/\n/g, '\n    ')}`);
  lines.push('  }', '}');
  return lines.join('\n');
}

/**
 * The first `count` slots of every line along `dim` in sorted order: values into `values` (when
 * given), int64 positions into `indices`; `descending` puts the largest first.
 */
function sortLines(op: string, x: Tensor, dim: number, descending: boolean, count: number, values: Tensor | null, indices: Tensor): void {
  const xk = dataKind(op, x);
  if (xk.wide) throw new TypeError(`${op}: the webgpu kernels do not sort dtype ${x.dtype} (input ${fmtShape(x.shape)}): 64-bit keys have no WGSL type; supported: float32, float16, bfloat16, int32, uint8, bool`);
  if (indices.numel() === 0) return;
  const d = x.ndim === 0 ? -1 : normalizeDim(op, dim, x.ndim);
  const len = d < 0 ? 1 : x.shape[d]!;
  const lines = x.numel() / len;
  const P = nextPow2(len);
  const T = Math.min(TILE, nextPow2(lines * P));
  if (lines * P > 2 ** 31) throw new RangeError(`${op}: input ${fmtShape(x.shape)} is too large for the webgpu sort (${lines} lines padded to ${P} slots)`);
  const outer = x.shape.map((_, k) => k).filter((k) => k !== d);
  const step = (t: Tensor | null): number => (t === null || d < 0 ? 0 : t.strides[d]!);
  const meta = (k: number, j: number): Uint32Array =>
    words([
      lines,
      P,
      len,
      descending ? 1 : 0,
      k,
      j,
      count,
      outer.length,
      T,
      step(x),
      step(values),
      step(indices),
      x.offset,
      values?.offset ?? 0,
      indices.offset,
      ...outer.flatMap((k) => [x.shape[k]!, x.strides[k]!, values?.strides[k] ?? 0, indices.strides[k]!]),
    ]);
  if (op === 'topk' && values !== null && count >= 1 && count <= SELECT_MAX) {
    // topk of a few: a radix select per line (topk-select.ts), not a sort of the whole line.
    const m = meta(0, positionDigits(len));
    m[8] = nextPow2(count);
    selectTopk(xk.kind, dataKind(op, values).kind, [indices.storage.buffer, values.storage.buffer, x.storage.buffer], m, lines);
    return;
  }
  const acc = webgpu();
  const tmp = (): Tensor => allocOut({ shape: [lines * P], strides: [1], dtype: 'int32', device: x.device });
  const keys = tmp();
  const pos = tmp();
  try {
    const kb = [keys.storage.buffer, pos.storage.buffer];
    const tiles = Math.ceil((lines * P) / T);
    acc.dispatch(
      kernelFor(`sort.local.${xk.kind}`, () => localSource(xk.kind, false)),
      [...kb, x.storage.buffer],
      meta(0, 0),
      groupsFor(tiles, 1),
    );
    for (let k = 2 * T; k <= P; k *= 2) {
      for (let j = k / 2; j >= T; j /= 2) acc.dispatch(kernelFor('sort.global', globalSource), kb, meta(k, j), groupsFor((lines * P) / 2));
      acc.dispatch(
        kernelFor('sort.merge', () => localSource(null, true)),
        kb,
        meta(k, 0),
        groupsFor(tiles, 1),
      );
    }
    const vk = values ? dataKind(op, values).kind : null;
    const emit = kernelFor(`sort.emit.${vk ?? ''}.${vk ? xk.kind : ''}`, () => emitSource(vk, vk ? xk.kind : null));
    const bufs = [indices.storage.buffer, pos.storage.buffer, ...(values ? [values.storage.buffer, x.storage.buffer] : [])];
    acc.dispatch(emit, bufs, meta(0, 0), groupsFor(lines * count));
  } finally {
    keys.dispose();
    pos.dispose();
  }
}

const lineLength = (x: Tensor, op: string, dim: number): number => (x.ndim === 0 ? 1 : x.shape[normalizeDim(op, dim, x.ndim)]!);

registerKernel(R.sort, 'webgpu', (ctx, self, dim, descending) => {
  const [mv, mi] = ctx.out as OutMeta[];
  const values = allocOut(mv!);
  const indices = allocOut(mi!);
  sortLines('sort', self, dim as number, descending === true, lineLength(self, 'sort', dim as number), values, indices);
  return [values, indices];
});

registerKernel(R.argsort, 'webgpu', (ctx, self, dim, descending) => {
  const indices = allocOut(ctx.out);
  sortLines('argsort', self, dim as number, descending === true, lineLength(self, 'argsort', dim as number), null, indices);
  return indices;
});

registerKernel(R.topk, 'webgpu', (ctx, self, k, dim, largest) => {
  const [mv, mi] = ctx.out as OutMeta[];
  const values = allocOut(mv!);
  const indices = allocOut(mi!);
  sortLines('topk', self, dim as number, largest === true, k as number, values, indices);
  return [values, indices];
});
