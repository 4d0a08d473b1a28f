/**
 * WebAssembly SIMD (f32x4) code for fused pointwise kernels. A kernel module has one exported
 * function `kern(n)` that computes n elements (rounded up to whole vectors) of every output from
 * dense operand buffers in its own memory: operand k (outputs first, then inputs, as in the JS
 * calling convention) lives at byte offset k * CHUNK * 4. The driver (runtime.ts) gathers a chunk
 * of every input into those buffers, calls `kern`, and scatters the outputs back, so strides,
 * broadcasting and offsets never reach the Wasm code.
 *
 * Only groups whose every value is float32 (or float16/bfloat16, which the CPU kernels hold as
 * float32 and round on store) and whose ops have an f32x4 form in the shared table
 * (kernels/math/wasm.ts) are generated; anything else returns null and the kernel stays
 * JavaScript. Values are computed in float32 lanes (eager rounds every op to float32 as well).
 */
import { castValue } from '../../../tensor/typed.js';
import type { DType } from '../../../tensor/dtype.js';
import {
  ADD, BLOCK, br, brIf, encodeModule, f32x4Const, FnBuilder, GE_S, get, I32, i32c, LOOP, END, set, SHL, V128, v128Load, v128Store, wasmApi,
} from '../../../kernels/cpu/wasm-asm.js';
import { WASM_TEMPLATES, type WasmOperands } from '../../../kernels/math/wasm.js';
import type { ValueId } from '../../ir.js';
import type { Lowered } from '../../lower/lower.js';
import type { KernelGroup } from '../../lower/schedule.js';

/**
 * Elements per operand buffer. 2048 floats = 8 KiB: a dozen operands stay inside L1/L2 while the
 * per-chunk driver overhead (a few typed-array views) is amortised over 512 vectors.
 */
export const WASM_CHUNK = 2048;

const FLOAT32_LIKE: ReadonlySet<DType> = new Set<DType>(['float32', 'float16', 'bfloat16']);

/** Whether every value of a pointwise group can live in float32 lanes (see the header). */
export function float32Group(g: KernelGroup, low: Lowered): boolean {
  const info = (id: ValueId) => low.values.get(id)!;
  if (g.kind !== 'pointwise') return false;
  for (const id of g.inputs) if (!FLOAT32_LIKE.has(info(id).dtype)) return false;
  for (const n of g.nodes) {
    if (n.kind !== 'pointwise' || n.outputs.length !== 1) return false;
    const dt = info(n.outputs[0]!).dtype;
    if (!FLOAT32_LIKE.has(dt)) return false;
    // A cast into a half rounds; float32 lanes cannot express that without a store.
    if ((n.op === 'toDtype' || n.op === 'clone') && dt !== 'float32' && dt !== info((n.args[0] as { id: ValueId }).id).dtype) return false;
  }
  return true;
}

/**
 * Emits every node of a pointwise group in f32x4 lanes; `locals` holds the v128 local of each
 * group input on entry and of every computed value on return. False when an op has no Wasm form.
 */
export function emitGroup(f: FnBuilder, g: KernelGroup, low: Lowered, locals: Map<ValueId, number>): boolean {
  const info = (id: ValueId) => low.values.get(id)!;
  for (const n of g.nodes) {
    const out = info(n.outputs[0]!).dtype;
    const o: WasmOperands = {
      out,
      raw: (i) => n.args[i],
      local: (i) => {
        const a = n.args[i];
        return a?.kind === 'value' ? (locals.get(a.id) ?? null) : null;
      },
      push: (i) => {
        const a = n.args[i];
        if (!a) return false;
        if (a.kind === 'value') {
          const l = locals.get(a.id);
          if (l === undefined) return false;
          f.emit(get(l));
          return true;
        }
        if (a.kind === 'const' && (typeof a.value === 'number' || typeof a.value === 'boolean')) {
          f.emit(f32x4Const(castValue(Number(a.value), out)));
          return true;
        }
        return false;
      },
    };
    const r = WASM_TEMPLATES.get(n.op)?.(f, o) ?? null;
    if (r === null) return false;
    locals.set(n.outputs[0]!, r);
  }
  return true;
}

/** The module for a pointwise group, or null when some value or op has no f32x4 form. */
export function wasmPointwiseModule(g: KernelGroup, low: Lowered): Uint8Array | null {
  if (wasmApi() === undefined || !float32Group(g, low)) return null;
  const operands = [...g.outputs, ...g.inputs];
  const f = new FnBuilder('kern', [I32]);
  const i = f.local(I32);
  const end = f.local(I32);
  const locals = new Map<ValueId, number>();
  const base = (k: number): number => k * WASM_CHUNK * 4;
  f.emit(get(0), i32c(2), SHL, set(end), i32c(0), set(i), BLOCK, LOOP, get(i), get(end), GE_S, brIf(1));
  g.inputs.forEach((id, j) => {
    const l = f.local(V128);
    f.emit(get(i), v128Load(base(g.outputs.length + j)), set(l));
    locals.set(id, l);
  });
  if (!emitGroup(f, g, low, locals)) return null;
  g.outputs.forEach((id, k) => f.emit(get(i), get(locals.get(id)!), v128Store(base(k))));
  f.emit(get(i), i32c(16), ADD, set(i), br(0), END, END);
  const pages = Math.ceil((operands.length * WASM_CHUNK * 4) / 65536);
  return encodeModule({ functions: [f], pages, memory: 'export' });
}
