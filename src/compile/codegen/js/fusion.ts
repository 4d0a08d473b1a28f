/**
 * What lowering fuses for the cpu target (codegen/js/target.ts): the template table's rules
 * (lower/fusion-rules.ts) on cpu values, and float32 linears as GEMM steps on the paths that have a
 * compiled GEMM. A module of its own because both the target and KilnProgram (which folds GEMM
 * epilogues, lower/gemm.ts) ask it.
 */
import { cpuPath } from '../../../kernels/cpu/native/path.js';
import { type FusionRules, type GemmRules, templateFusion } from '../../lower/fusion-rules.js';

/** float32 linears on cpu values, on the paths with a compiled GEMM. */
export const CPU_GEMM: GemmRules = {
  // The wasm path runs the Wasm GEMM, the native path the native GEMM (codegen/c/gemm.ts);
  // KILN_CPU_PATH=js means neither (the extern linear's JS engine).
  enabled: () => {
    const path = cpuPath();
    return path === 'wasm' || path === 'native';
  },
  operand: (v) => v.dtype === 'float32' && v.device.type === 'cpu',
};

export const CPU_FUSION: FusionRules = templateFusion((d) => d.type === 'cpu', CPU_GEMM);
