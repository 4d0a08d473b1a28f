/**
 * What lowering may fuse on webgpu (`WEBGPU_FUSION`): a pointwise node whose op the WGSL math table
 * (kernels/math/wgsl.ts) renders for its operands' dtypes, every value on a webgpu device;
 * reductions (sum, mean, prod, amax, amin) and row ops (softmax, logSoftmax, layerNorm, rmsNorm,
 * expanded by lowering) whose dtypes WGSL computes (no 64-bit types, no bool). Linears are no GEMM
 * steps: they run through dispatch, like everything else the rules refuse.
 */
import type { Device } from '../../../runtime/device.js';
import type { MathArg } from '../../../kernels/math/args.js';
import { WGSL_TEMPLATES, wgslComputeType } from '../../../kernels/math/wgsl.js';
import type { FusionRules } from '../../lower/fusion-rules.js';

const onWebgpu = (d: Device): boolean => d.type === 'webgpu';

/** Ops rendered by another op's table entry (as the eager kernels register them). */
const ENTRY_OF: ReadonlyMap<string, string> = new Map([['remainderScalar', 'remainder']]);

/** The WGSL table entry that renders op `op`. */
export const wgslEntry = (op: string): string => ENTRY_OF.get(op) ?? op;

export const WEBGPU_FUSION: FusionRules = {
  pointwise(n, values) {
    const t = WGSL_TEMPLATES.get(wgslEntry(n.op));
    if (!t || n.outputs.length !== 1) return false;
    const out = values.get(n.outputs[0]!)!;
    if (!onWebgpu(out.device) || wgslComputeType(out.dtype) === null) return false;
    const margs: MathArg[] = [];
    for (const a of n.args) {
      if (a.kind === 'list' || a.kind === 'sym') return false;
      if (a.kind === 'value') {
        const v = values.get(a.id)!;
        if (!onWebgpu(v.device) || wgslComputeType(v.dtype) === null) return false;
        margs.push({ kind: 'value', expr: 'x', dtype: v.dtype, shape: v.shape });
      } else margs.push({ kind: 'const', value: a.value });
    }
    return t(margs, { out: out.dtype }) !== null;
  },
  reduction: (input, out) =>
    onWebgpu(out.device) && onWebgpu(input.device) && input.dtype !== 'bool' && out.dtype !== 'bool' && wgslComputeType(input.dtype) !== null && wgslComputeType(out.dtype) !== null,
  rowOp: (_op, x) => onWebgpu(x.device) && wgslComputeType(x.dtype) === 'f32',
  gemm: null,
};
