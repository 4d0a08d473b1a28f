/**
 * The compiler's side of the CUDA C pointwise math: the expression table itself is shared with the
 * eager cuda kernels (kernels/math/cuda.ts); here is how a fused kernel declares a node's value.
 */
import type { DType } from '../../../tensor/dtype.js';
import { computeType } from './ctypes.js';

export { CUDA_TEMPLATES, type CArg, type CTemplate, type CTemplateCtx } from '../../../kernels/math/cuda.js';

/**
 * The declaration of node output `v` from its expression: the value as its dtype holds it inside a
 * fused kernel, mirroring roundExpr in lower/ops.ts. Floating intermediates stay in their compute
 * type; explicit casts round to the target (to a half and back), integers wrap like their stores.
 * `fromFloating`: whether the expression's operands are floating (a float-to-int cast truncates).
 */
export function declareValue(v: string, expr: string, dtype: DType, isCast: boolean, fromFloating: boolean): string {
  const t = computeType(dtype);
  switch (dtype) {
    case 'float32':
    case 'float64':
      return `const ${t} ${v} = (${t})(${expr});`;
    case 'float16':
      return isCast ? `const float ${v} = kiln_h2f(kiln_f2h((float)(${expr})));` : `const float ${v} = (float)(${expr});`;
    case 'bfloat16':
      return isCast ? `const float ${v} = kiln_bf2f(kiln_f2bf((float)(${expr})));` : `const float ${v} = (float)(${expr});`;
    case 'int32':
      return isCast && fromFloating ? `const int ${v} = (int)kiln_f2ll(${expr});` : `const int ${v} = (int)(${expr});`;
    case 'int64':
      return isCast && fromFloating ? `const long long ${v} = kiln_f2ll(${expr});` : `const long long ${v} = (long long)(${expr});`;
    case 'uint8':
      return isCast && fromFloating ? `const int ${v} = (int)(kiln_f2ll(${expr}) & 255);` : `const int ${v} = (int)(${expr}) & 255;`;
    case 'bool':
      return isCast ? `const int ${v} = (${expr}) != 0 && (${expr}) == (${expr}) ? 1 : 0;` : `const int ${v} = (int)(${expr});`;
    default:
      return dtype satisfies never;
  }
}
