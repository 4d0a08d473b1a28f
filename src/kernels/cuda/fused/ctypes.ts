/**
 * Conversions of the fused-group renderer (body.ts): a stored element to its compute type, a
 * computed value to its storage type, and the declaration of a node's value as its dtype holds it
 * inside a fused kernel. The storage and compute types, literals and libm names are the eager
 * generator's (kernels/cuda/codegen/ctypes.ts, one table for both and the math table); these
 * differ from its loadAs/storeAs in form because the fused kernels name their values.
 */
import type { DType } from '../../../tensor/dtype.js';
import { computeType } from '../codegen/ctypes.js';

/** Converts a raw stored element (expression) to its compute type. */
export function loadConvert(d: DType, raw: string): string {
  switch (d) {
    case 'float16':
      return `kiln_h2f(${raw})`;
    case 'bfloat16':
      return `kiln_bf2f(${raw})`;
    case 'uint8':
    case 'bool':
      return `(int)(${raw})`;
    default:
      return raw;
  }
}

/** Converts a computed value (identifier) of dtype `d` to its storage type. */
export function storeConvert(d: DType, v: string): string {
  switch (d) {
    case 'float16':
      return `kiln_f2h(${v})`;
    case 'bfloat16':
      return `kiln_f2bf(${v})`;
    case 'uint8':
      return `(unsigned char)(${v})`;
    case 'bool':
      return `(unsigned char)(${v} != 0)`;
    default:
      return v;
  }
}

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
