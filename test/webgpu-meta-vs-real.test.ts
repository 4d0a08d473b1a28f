/**
 * The meta contract on webgpu: every registered op on each of its samples (test/samples/, the ones
 * meta-vs-real.test.ts runs on the cpu), moved onto webgpu with their layouts intact
 * (transposed, sliced, broadcast, channels_last), and the meta function's shape, strides, dtype and
 * device compared with the webgpu kernel's real output. The compiler plans webgpu memory from
 * meta, so a kernel that lays out its output differently is a bug here.
 *
 * A sample whose data has no WGSL type (float64, int64 arithmetic) fails with the webgpu kernels'
 * dtype error; those are counted and must name a 64-bit dtype, and every op must run at least one
 * of its samples. Needs a real adapter: skips without one.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import '../src/index.js';
import { dispatch } from '../src/ops/dispatch.js';
import { getOp, listOps } from '../src/ops/registry.js';
import type { OutMeta } from '../src/ops/schema.js';
import { Tensor } from '../src/tensor/tensor.js';
import { argsOnWebgpu, webgpuSkipReason } from './helpers/webgpu.js';
import { allSamples } from './samples/index.js';

const skip = webgpuSkipReason();

function compare(where: string, meta: OutMeta, real: Tensor): string | null {
  if (!(real instanceof Tensor)) return `${where}: kernel returned a non-tensor`;
  if (real.shape.join(',') !== meta.shape.join(',')) return `${where}: shape [${real.shape}], meta [${meta.shape}]`;
  if (real.strides.join(',') !== meta.strides.join(',')) return `${where}: strides [${real.strides}], meta [${meta.strides}]`;
  if (real.dtype !== meta.dtype) return `${where}: dtype ${real.dtype}, meta ${meta.dtype}`;
  if (!real.device.equals(meta.device)) return `${where}: device ${real.device.toString()}, meta ${meta.device.toString()}`;
  if (real.device.type !== 'webgpu') return `${where}: ran on ${real.device.toString()}`;
  if (meta.offset !== undefined && real.offset !== meta.offset) return `${where}: offset ${real.offset}, meta ${meta.offset}`;
  return null;
}

/** A webgpu kernel's error for data WGSL cannot hold: it names webgpu and a 64-bit dtype. */
const isWideError = (msg: string): boolean => /webgpu/.test(msg) && /\b(float64|int64)\b/.test(msg);

test('meta matches real on webgpu for every registered op', { skip }, () => {
  const failures: string[] = [];
  const wide: string[] = [];
  const ran = new Set<string>();
  for (const sample of allSamples) {
    const where = `${sample.op} [${sample.label}]`;
    const op = getOp(sample.op);
    let meta: OutMeta | OutMeta[];
    let real: Tensor | Tensor[];
    try {
      meta = op.meta(...argsOnWebgpu(sample.args())) as OutMeta | OutMeta[];
      real = dispatch(op, ...(argsOnWebgpu(sample.args()) as never[])) as Tensor | Tensor[];
    } catch (e) {
      const msg = (e as Error).message.split('\n')[0]!;
      if (isWideError(msg)) wide.push(`${where}: ${msg}`);
      else failures.push(`${where}: ${msg}`);
      continue;
    }
    const metas = Array.isArray(meta) ? meta : [meta];
    const reals = Array.isArray(real) ? real : [real];
    if (metas.length !== reals.length) {
      failures.push(`${where}: meta gives ${metas.length} outputs, the kernel ${reals.length}`);
      continue;
    }
    const bad = metas.map((m, i) => compare(`${where} #${i}`, m, reals[i]!)).filter((x): x is string => x !== null);
    failures.push(...bad);
    if (bad.length === 0) ran.add(sample.op);
  }
  const never = listOps()
    .map((o) => o.name)
    .filter((n) => !ran.has(n));
  assert.deepEqual(failures, [], `${failures.length} samples fail on webgpu:\n${failures.join('\n')}`);
  assert.deepEqual(never, [], `ops with no sample that runs on webgpu (the 64-bit ones: ${wide.join('; ')})`);
});
