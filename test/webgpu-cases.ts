/**
 * The pointwise cases the webgpu tests run: for every op the webgpu kernels register
 * (WEBGPU_POINTWISE) and every dtype they compute, argument lists built from the op's schema
 * (tensors of the dtype, one broadcast and one transposed operand, scalars, each rounding mode and
 * GELU form), with inputs inside each op's domain so cpu and webgpu can be compared. Built on the
 * CPU; a test moves the tensors where it runs them.
 */
import * as kiln from '../src/index.js';
import { getOp } from '../src/ops/registry.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { WEBGPU_POINTWISE } from '../src/kernels/webgpu/pointwise.js';

export const WEBGPU_TEST_DTYPES: readonly DType[] = ['float32', 'float16', 'bfloat16', 'int32', 'uint8', 'bool'];

export interface PwCase {
  readonly label: string;
  readonly op: string;
  readonly dtype: DType;
  /** Arguments on the CPU (tensors and constants). */
  readonly args: readonly unknown[];
}

/** Ops defined only for positive inputs (or where positives keep the comparison meaningful). */
const POSITIVE = new Set(['log', 'log2', 'log10', 'sqrt', 'rsqrt', 'pow', 'powScalar', 'reciprocal', 'div', 'div_', 'remainder', 'remainderScalar']);

function values(dtype: DType, shape: number[], positive: boolean, seed: number): Tensor {
  kiln.manualSeed(seed);
  if (dtype === 'bool') return kiln.gt(kiln.randn(shape), 0);
  if (dtype === 'int32' || dtype === 'uint8') return kiln.randint(positive ? 1 : dtype === 'uint8' ? 0 : -6, 7, shape, { dtype });
  const x = kiln.randn(shape).mul(2);
  return (positive ? x.abs().add(0.25) : x).to(dtype);
}

export function pointwiseCases(): PwCase[] {
  const out: PwCase[] = [];
  for (const [name] of WEBGPU_POINTWISE) {
    const op = getOp(name);
    const positive = POSITIVE.has(name);
    for (const dtype of WEBGPU_TEST_DTYPES) {
      const forms: { tag: string; args: unknown[] }[] = [];
      let seed = 1;
      const tensor = (shape: number[], i: number): Tensor => {
        // Divisors and exponents in the domain; other operands anywhere (positive for log-like ops).
        const pos = positive || (name === 'lerp' && i === 2);
        const t = values(i === 0 && name === 'where' ? 'bool' : dtype, shape, pos, seed++);
        return name === 'lerp' && i === 2 ? t.to('float32').sigmoid().to(dtype) : t;
      };
      const build = (variant: 'plain' | 'broadcast' | 'strided' | 'scalar'): unknown[] =>
        op.args.map((a, i) => {
          switch (a.type) {
            case 'Tensor':
            case 'Tensor?':
            case 'Tensor|Scalar': {
              if (variant === 'scalar' && a.type === 'Tensor|Scalar' && i > 0) return dtype.startsWith('int') || dtype === 'uint8' ? 3 : dtype === 'bool' ? true : 1.5;
              if (variant === 'broadcast' && i > 0) return tensor([5], i);
              if (variant === 'strided' && i === 0 && !name.endsWith('_')) return tensor([5, 3], i).t();
              return tensor([3, 5], i);
            }
            case 'Scalar':
              return name === 'powScalar' || name === 'remainderScalar' ? 2 : 1;
            case 'Scalar?':
              return i === 1 ? -1 : 1;
            case 'float':
              return a.name === 'beta' ? 1 : 20;
            case 'str':
              return 'none';
            case 'str?':
              return undefined;
            default:
              return undefined;
          }
        });
      for (const v of ['plain', 'broadcast', 'strided', 'scalar'] as const) forms.push({ tag: v, args: build(v) });
      if (name === 'div' || name === 'div_') for (const mode of ['trunc', 'floor']) forms.push({ tag: mode, args: [...build('plain').slice(0, 2), mode] });
      if (name === 'gelu') forms.push({ tag: 'tanh', args: [build('plain')[0], 'tanh'] });
      if (name === 'add' || name === 'sub') forms.push({ tag: 'alpha', args: [...build('plain').slice(0, 2), 2] });
      for (const f of forms) out.push({ label: `${name} ${dtype} ${f.tag}`, op: name, dtype, args: f.args });
    }
  }
  return out;
}

/** The case's arguments with its tensors copied to `device` (in-place ops get their own copy). */
export function argsOn(c: PwCase, device: string): unknown[] {
  return c.args.map((a) => (a instanceof kiln.Tensor ? a.to(device).clone() : a));
}
