/**
 * What a compile target can fuse: the questions lowering (lower.ts) and the GEMM pass (gemm.ts)
 * ask of the target (compile/target.ts) instead of testing device types. Each answer is about one
 * node or value; lowering turns a "no" into an extern step (the eager kernel, through dispatch).
 *
 * `templateFusion` is the rule set of the template table (ops.ts, the JavaScript templates): what
 * both built-in targets fuse today. A target passes which devices its kernels read and write, and
 * its GEMM-step rules (null: linears stay externs). A target whose generator fuses a different set
 * of ops or dtypes (a CUDA generator with its own table, a WebGPU one) writes its own FusionRules.
 */
import type { Device } from '../../runtime/device.js';
import type { IRNode, ValueId, ValueInfo } from '../ir.js';
import { TEMPLATES, type TArg } from './ops.js';

export interface FusionRules {
  /** Whether a pointwise node (tagged pointwise, or toDtype / clone) can join a fused kernel. */
  pointwise(n: IRNode, values: ReadonlyMap<ValueId, ValueInfo>): boolean;
  /** Whether a reduction (sum, mean, amax, amin, prod) from `input` to `out` can be fused. */
  reduction(input: ValueInfo, out: ValueInfo): boolean;
  /**
   * Whether a row op (softmax, logSoftmax, layerNorm, rmsNorm) on `x` is expanded into primitive
   * reductions and pointwise ops, which the scheduler fuses into row kernels; false leaves it an
   * extern. (Lowering still checks that the expansion is valid: a floating input, and so on.)
   */
  rowOp(op: string, x: ValueInfo): boolean;
  /** Linears as GEMM steps with a folded pointwise epilogue (gemm.ts); null: this target has none. */
  readonly gemm: GemmRules | null;
}

export interface GemmRules {
  /** Whether GEMM steps are on at all (cpu: only the wasm and native paths have a compiled GEMM). */
  enabled(): boolean;
  /** Whether the compiled GEMM reads or writes this value (an operand, the bias, the result). */
  operand(v: ValueInfo): boolean;
}

/** The template table's rules for a target whose kernels read and write values on `onDevice` devices. */
export function templateFusion(onDevice: (d: Device) => boolean, gemm: GemmRules | null): FusionRules {
  return {
    pointwise(n, values) {
      const t = TEMPLATES.get(n.op);
      if (!t || n.outputs.length !== 1) return false;
      const out = values.get(n.outputs[0]!)!;
      if (!onDevice(out.device)) return false;
      const targs: TArg[] = [];
      for (const a of n.args) {
        if (a.kind === 'list' || a.kind === 'sym') return false;
        if (a.kind === 'value') {
          const v = values.get(a.id)!;
          if (!onDevice(v.device)) return false;
          targs.push({ kind: 'value', expr: 'x', dtype: v.dtype, shape: v.shape });
        } else targs.push({ kind: 'const', value: a.value });
      }
      // float64 storage is not a kiln compute dtype for halves, but works like any direct dtype.
      return t(targs, { out: out.dtype }) !== null;
    },
    // Only the result's device is asked (as before targets existed): a reduction's input and output
    // share a device in any graph eager mode runs.
    reduction: (input, out) => onDevice(out.device) && input.dtype !== 'bool' && out.dtype !== 'bool',
    rowOp: (_op, x) => onDevice(x.device),
    gemm,
  };
}
