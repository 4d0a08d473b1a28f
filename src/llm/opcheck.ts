/**
 * opcheck: validates a library op against its contract, like PyTorch's torch.library.opcheck.
 * For each sample and each implementation registered for the device (kernel, reference, vendor),
 * called directly so that every one is checked whatever the policy picks:
 *
 *   schema     arguments match the declared argument types; the manifest's mutated list matches
 *   mutation   tensor arguments are snapshotted; one that changed without being declared mutated
 *              is an error, and so is a declared-mutated argument left unchanged (samples are
 *              built so that a correct kernel changes it) or not returned as its aliased output
 *   meta       every output's shape, strides, dtype, device (and offset for aliases) equal the
 *              meta function's prediction; non-aliased outputs are fresh storage
 *   agreement  all implementations give the same outputs and mutated values within a tolerance
 *              for the dtype (ids exactly)
 *   dynamic    for each dynamic dim the manifest declares, the sample at two sizes still
 *              satisfies meta-vs-real through the dispatcher
 *   backward   where the manifest declares one, gradcheck in float64 against finite differences
 *
 * Everything is parameterised by the device, so the same samples validate cuda kernels later.
 * All failures are collected and thrown together.
 */
import { gradcheck } from '../autograd/gradcheck.js';
import { dispatch } from '../ops/dispatch.js';
import { getOp } from '../ops/registry.js';
import type { ArgType, OutMeta } from '../ops/schema.js';
import { Device, type DeviceLike } from '../runtime/device.js';
import type { DType } from '../tensor/dtype.js';
import { fmtShape } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';
import { manifestEntry } from '../ops/library/manifest.js';
import { llmImpls, type LlmImpl } from '../ops/library/policy.js';

export interface OpcheckSample {
  readonly label: string;
  /** Sizes of the named dynamic dims this sample uses (e.g. { T: 3 }). */
  readonly dims?: Readonly<Record<string, number>>;
  /** Fresh arguments on `device` with the given dynamic sizes. */
  make(dims: Readonly<Record<string, number>>, device: Device): unknown[];
  /** Gradient check: float64 inputs that require grad and the function of them to check. */
  readonly grad?: { inputs(device: Device): Tensor[]; fn(...inputs: Tensor[]): Tensor | Tensor[] };
}

export interface OpcheckOptions {
  device?: DeviceLike;
  /** Skip the cross-implementation comparison (e.g. a vendor kernel with other rounding). */
  skipAgreement?: boolean;
}

export interface OpcheckReport {
  readonly op: string;
  readonly implementations: readonly string[];
  /** Names of the checks that ran, e.g. 'meta[cpu-kernel] contiguous'. */
  readonly checks: readonly string[];
}

export class OpcheckError extends Error {
  constructor(
    readonly op: string,
    readonly failures: readonly string[],
  ) {
    super(`opcheck ${op}: ${failures.length} failure(s):\n  - ${failures.join('\n  - ')}`);
    this.name = 'OpcheckError';
  }
}

function argMatches(type: ArgType, v: unknown): boolean {
  const isT = v instanceof Tensor;
  switch (type) {
    case 'Tensor':
      return isT;
    case 'Tensor?':
      return isT || v === null;
    case 'Tensor[]':
      return Array.isArray(v) && v.every((x) => x instanceof Tensor);
    case 'Tensor?[]':
      return Array.isArray(v) && v.every((x) => x === null || x instanceof Tensor);
    case 'Tensor|Scalar':
      return isT || typeof v === 'number' || typeof v === 'boolean';
    case 'int':
      return Number.isInteger(v);
    case 'int?':
      return v === null || Number.isInteger(v);
    case 'float':
      return typeof v === 'number';
    case 'float?':
      return v === null || typeof v === 'number';
    case 'bool':
      return typeof v === 'boolean';
    case 'bool?':
      return v === null || typeof v === 'boolean';
    case 'str':
      return typeof v === 'string';
    case 'str?':
      return v === null || typeof v === 'string';
    default:
      return true; // lists, dtypes, devices, generators: not used by library ops
  }
}

function sameValues(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i]) && !(a[i] === b[i])) return false;
  return true;
}

/** Tolerance of cross-implementation agreement per dtype (rounding of one store, summation order). */
function tolerance(dtype: DType): { atol: number; rtol: number } {
  switch (dtype) {
    case 'float64':
      return { atol: 1e-9, rtol: 1e-9 };
    case 'float32':
      return { atol: 1e-5, rtol: 1e-4 };
    case 'float16':
      return { atol: 2e-3, rtol: 4e-3 };
    case 'bfloat16':
      return { atol: 1.6e-2, rtol: 1.6e-2 };
    default:
      return { atol: 0, rtol: 0 };
  }
}

function closeTo(a: readonly number[], b: readonly number[], dtype: DType): string | null {
  if (a.length !== b.length) return `lengths ${a.length} vs ${b.length}`;
  const { atol, rtol } = tolerance(dtype);
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (Number.isNaN(x) && Number.isNaN(y)) continue;
    if (!(Math.abs(x - y) <= atol + rtol * Math.abs(y))) return `element ${i}: ${x} vs ${y} (atol ${atol}, rtol ${rtol})`;
  }
  return null;
}

function metaMismatch(meta: OutMeta, real: Tensor): string | null {
  if (fmtShape(meta.shape) !== fmtShape(real.shape)) return `shape: meta ${fmtShape(meta.shape)}, real ${fmtShape(real.shape)}`;
  if (fmtShape(meta.strides) !== fmtShape(real.strides)) return `strides: meta ${fmtShape(meta.strides)}, real ${fmtShape(real.strides)}`;
  if (meta.dtype !== real.dtype) return `dtype: meta ${meta.dtype}, real ${real.dtype}`;
  if (!meta.device.equals(real.device)) return `device: meta ${meta.device.toString()}, real ${real.device.toString()}`;
  if (meta.offset !== undefined && meta.offset !== real.offset) return `offset: meta ${meta.offset}, real ${real.offset}`;
  return null;
}

interface RunResult {
  outputs: Tensor[];
  after: (number[] | null)[];
}

function runOne(opName: string, impl: LlmImpl, sample: OpcheckSample, device: Device, failures: string[], checks: string[]): RunResult | null {
  const op = getOp(opName);
  const where = `[${sample.label}] ${impl.name}`;
  const args = sample.make(sample.dims ?? {}, device);
  if (args.length !== op.args.length) {
    failures.push(`${where}: schema declares ${op.args.length} arguments, sample gives ${args.length}`);
    return null;
  }
  op.args.forEach((spec, i) => {
    if (!argMatches(spec.type, args[i])) failures.push(`${where}: argument '${spec.name}' does not match schema type ${spec.type} (got ${args[i] instanceof Tensor ? 'Tensor' : typeof args[i]})`);
  });
  checks.push(`schema ${where}`);
  const meta = op.meta(...(args as never[])) as OutMeta | OutMeta[];
  const metas = Array.isArray(meta) ? meta : [meta];
  const before = args.map((a) => (a instanceof Tensor ? a.toFlatArray() : null));
  let result: Tensor | Tensor[];
  try {
    result = impl.fn({ op: opName, out: meta }, ...args);
  } catch (e) {
    failures.push(`${where}: threw ${(e as Error).message}`);
    return null;
  }
  const outputs = Array.isArray(result) ? result : [result];
  if (outputs.length !== metas.length) {
    failures.push(`${where}: meta predicts ${metas.length} outputs, implementation returned ${outputs.length}`);
    return null;
  }
  outputs.forEach((o, k) => {
    const m = metaMismatch(metas[k]!, o);
    if (m) failures.push(`${where}: output ${k} ${m}`);
    const spec = op.outputs[Math.min(k, op.outputs.length - 1)]!;
    const aliasArg = spec.aliasOf === undefined ? -1 : op.args.findIndex((a) => a.name === spec.aliasOf);
    const aliased = aliasArg >= 0 ? args[aliasArg] : undefined;
    if (aliased instanceof Tensor) {
      if (o.storage !== aliased.storage) failures.push(`${where}: output ${k} is declared to alias '${spec.aliasOf}' but has its own storage`);
    } else {
      for (const a of args) if (a instanceof Tensor && a.storage === o.storage) failures.push(`${where}: output ${k} shares storage with an input but declares no alias`);
    }
  });
  checks.push(`meta ${where}`);
  const after = args.map((a) => (a instanceof Tensor ? a.toFlatArray() : null));
  op.args.forEach((spec, i) => {
    if (before[i] === null) return;
    const changed = !sameValues(before[i]!, after[i]!);
    if (changed && !spec.mutated) failures.push(`${where}: modified argument '${spec.name}', which the schema does not declare mutated`);
    if (!changed && spec.mutated) failures.push(`${where}: argument '${spec.name}' is declared mutated but was not written`);
  });
  checks.push(`mutation ${where}`);
  return { outputs, after };
}

/**
 * Backward check. On cpu: gradcheck in float64 (finite differences). Elsewhere finite differences
 * need float64 perturbations the device may not support, so the formula is gradchecked on cpu and
 * the device's float32 gradients of sum(out^2) must then match the cpu's float32 gradients.
 */
function backwardCheck(grad: NonNullable<OpcheckSample['grad']>, device: Device): void {
  const fn = (...xs: Tensor[]): Tensor | Tensor[] => grad.fn(...xs);
  if (device.type === 'cpu') {
    gradcheck(fn, grad.inputs(device));
    return;
  }
  const base = grad.inputs(Device.from('cpu'));
  gradcheck(fn, base);
  const gradsOn = (dev: string): (number[] | null)[] => {
    const ins = base.map((t) => {
      const c = t.detach().to({ device: dev, dtype: t.dtype === 'float64' ? 'float32' : t.dtype });
      return t.requiresGrad ? c.requiresGrad_(true) : c;
    });
    const r = fn(...ins);
    const outs = Array.isArray(r) ? r : [r];
    let loss: Tensor | null = null;
    for (const o of outs) {
      if (!o.requiresGrad) continue;
      const f = o.to('float32');
      const term = f.mul(f).sum();
      loss = loss ? loss.add(term) : term;
    }
    if (!loss) throw new Error(`no output requires grad on ${dev}`);
    loss.backward();
    return ins.map((t) => (t.grad ? t.grad.to('cpu').toFlatArray() : null));
  };
  const want = gradsOn('cpu');
  const got = gradsOn(device.toString());
  want.forEach((w, i) => {
    const g = got[i];
    if (!w || !g) {
      if (w !== g) throw new Error(`input ${i}: gradient missing on ${w ? device.toString() : 'cpu'}`);
      return;
    }
    const diff = closeTo(g, w, 'float32');
    if (diff) throw new Error(`input ${i}: ${device.toString()} gradient differs from cpu at ${diff}`);
  });
}

function dynamicCheck(opName: string, sample: OpcheckSample, device: Device, dim: string, failures: string[], checks: string[]): void {
  const base = sample.dims?.[dim];
  if (base === undefined) return;
  const op = getOp(opName);
  for (const size of [base, base * 2 + 1]) {
    const args = sample.make({ ...sample.dims, [dim]: size }, device);
    const meta = op.meta(...(args as never[])) as OutMeta | OutMeta[];
    const metas = Array.isArray(meta) ? meta : [meta];
    const out = dispatch(op, ...(args as never[])) as Tensor | Tensor[];
    const outs = Array.isArray(out) ? out : [out];
    outs.forEach((o, k) => {
      const m = metaMismatch(metas[k]!, o);
      if (m) failures.push(`[${sample.label}] dynamic ${dim}=${size}: output ${k} ${m}`);
    });
  }
  checks.push(`dynamic ${dim} [${sample.label}]`);
}

/** Validates `op` on `samples`; returns what ran, or throws OpcheckError listing every failure. */
export function opcheck(opName: string, samples: readonly OpcheckSample[], options: OpcheckOptions = {}): OpcheckReport {
  const device = Device.from(options.device ?? 'cpu');
  const failures: string[] = [];
  const checks: string[] = [];
  const op = getOp(opName);
  const entry = manifestEntry(opName);
  if (!entry) failures.push('no manifest entry (register it with registerManifestEntry)');
  const schemaMutated = op.args.filter((a) => a.mutated).map((a) => a.name).sort().join(',');
  if (entry && [...entry.mutates].sort().join(',') !== schemaMutated) failures.push(`manifest mutates [${entry.mutates.join(', ')}] but the schema mutates [${schemaMutated}]`);
  const impls = llmImpls(opName).filter((m) => m.device === '*' || m.device === device.type);
  if (impls.length === 0) failures.push(`no implementation for device ${device.toString()}`);
  if (samples.length === 0) failures.push('no samples');
  for (const sample of samples) {
    const runs = impls.map((impl) => ({ impl, r: runOne(opName, impl, sample, device, failures, checks) }));
    const ref = runs.find((x) => x.r !== null);
    if (!options.skipAgreement && ref) {
      for (const { impl, r } of runs) {
        if (!r || impl === ref.impl) continue;
        r.outputs.forEach((o, k) => {
          const diff = closeTo(o.toFlatArray(), ref.r!.outputs[k]!.toFlatArray(), o.dtype);
          if (diff) failures.push(`[${sample.label}] ${impl.name} vs ${ref.impl.name}: output ${k} differs at ${diff}`);
        });
        r.after.forEach((vals, i) => {
          if (!vals || !op.args[i]!.mutated) return;
          const diff = closeTo(vals, ref.r!.after[i]!, (sample.make(sample.dims ?? {}, device)[i] as Tensor).dtype);
          if (diff) failures.push(`[${sample.label}] ${impl.name} vs ${ref.impl.name}: mutated '${op.args[i]!.name}' differs at ${diff}`);
        });
      }
      checks.push(`agreement [${sample.label}]`);
    }
    for (const d of entry?.dynamic ?? []) dynamicCheck(opName, sample, device, d.name, failures, checks);
    if (entry?.backward === true && sample.grad) {
      try {
        backwardCheck(sample.grad, device);
        checks.push(`backward [${sample.label}]`);
      } catch (e) {
        failures.push(`[${sample.label}] backward: ${(e as Error).message}`);
      }
    }
  }
  if (entry?.backward === true && !samples.some((s) => s.grad)) failures.push('the manifest declares a backward formula but no sample checks it');
  if (failures.length > 0) throw new OpcheckError(opName, failures);
  return { op: opName, implementations: impls.map((m) => m.name), checks };
}
