/**
 * KILN_WEBGPU_ROTARY_REGISTERS (llm-rotary.ts registerBody): the webgpu q/k-norm + rotary kernels
 * in their register-resident form (every load of a head row issued before the norm's reduction,
 * subgroupAdd where the device has subgroups) and in the loop form, each against the float64
 * reference (helpers/qk-norm-rotary-ref.ts) within the dtype's tolerance: llm.qkNormRotary,
 * llm.applyRotaryEmb and llm.qkNormRotaryCache (cache rows and the copied value rows, a padding
 * slot), head dims 8, 80 (pairs past 64 per invocation: none; lanes past the row masked), 128 and
 * 256 (two pairs and four value elements per invocation), neox and gpt-j, float32 / float16 /
 * bfloat16, with subgroups and with the feature hidden. The sources are checked to be the form
 * asked for. Needs an adapter that computes (SwiftShader here).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import { webgpu } from '../src/kernels/webgpu/device.js';
import type { DType } from '../src/tensor/dtype.js';
import { makeTensor, rand } from './helpers/make.js';
import { refCacheWrite, refNormRotary } from './helpers/qk-norm-rotary-ref.js';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { hostF64, toBf16, toF16, worstRel } from './helpers/rounding-ref.js';

const skip = webgpuSkipReason();
const roundOf = (dtype: DType): ((v: number) => number) => (dtype === 'bfloat16' ? toBf16 : dtype === 'float16' ? toF16 : Math.fround);
const relTol = (dtype: DType): number => (dtype === 'bfloat16' ? 2 ** -6 : dtype === 'float16' ? 2 ** -9 : 2e-6);

interface Form {
  readonly label: string;
  readonly registers: boolean;
  readonly subgroups: boolean;
}

/** Runs f under a form, returning the sources rendered meanwhile. */
function under(form: Form, f: () => void): string[] {
  const acc = webgpu();
  const origKernel = acc.kernel.bind(acc);
  const origHas = acc.hasFeature.bind(acc);
  const sources: string[] = [];
  acc.kernel = (source: string, label: string) => {
    sources.push(source);
    return origKernel(source, label);
  };
  if (!form.subgroups) acc.hasFeature = (name: string) => name !== 'subgroups' && origHas(name);
  setOption('KILN_WEBGPU_ROTARY_REGISTERS', form.registers);
  try {
    f();
    return sources;
  } finally {
    acc.kernel = origKernel;
    acc.hasFeature = origHas;
    setOption('KILN_WEBGPU_ROTARY_REGISTERS', undefined);
  }
}

const forms = (): Form[] => {
  const sg = skip === false && webgpu().hasFeature('subgroups');
  return [
    { label: 'loop', registers: false, subgroups: sg },
    ...(sg ? [{ label: 'registers + subgroups', registers: true, subgroups: true }] : []),
    { label: 'registers, no subgroups', registers: true, subgroups: false },
  ];
};

test('webgpu q/k norm + rotary kernels in each form match float64', { skip }, () => {
  for (const form of forms()) {
    const sources = under(form, () => {
      for (const dtype of ['float32', 'float16', 'bfloat16'] as DType[]) {
        for (const d of [8, 80, 128, 256]) {
          for (const isNeox of [true, false]) {
            const label = `${form.label} ${dtype} d=${d} ${isNeox ? 'neox' : 'gpt-j'}`;
            const [N, H, Hkv] = [3, 2, 1];
            const q = rand([N, H, d], d + 1, 'contiguous', dtype).to('webgpu');
            const k = rand([N, Hkv, d], d + 2, 'contiguous', dtype).to('webgpu');
            const [qw, kw] = [rand([d], 3, 'contiguous', dtype, 0.5, 1.5).to('webgpu'), rand([d], 4, 'contiguous', dtype, 0.5, 1.5).to('webgpu')];
            const cos = rand([N, 1, d], 5, 'contiguous', dtype, -1, 1).to('webgpu');
            const sin = rand([N, 1, d], 6, 'contiguous', dtype, -1, 1).to('webgpu');
            const round = roundOf(dtype);
            const r = kiln.llm.qkNormRotary(q, k, qw, kw, 1e-6, cos, sin, isNeox);
            assert.ok(worstRel(hostF64(r.q), refNormRotary(q, qw, 1e-6, cos, sin, isNeox, round), relTol(dtype)) <= 1, `${label}: q`);
            assert.ok(worstRel(hostF64(r.k), refNormRotary(k, kw, 1e-6, cos, sin, isNeox, round), relTol(dtype)) <= 1, `${label}: k`);
            // The rotary alone (no norm): the reference with a unit weight and no normalisation is rotate(x).
            const rq = hostF64(kiln.llm.applyRotaryEmb(q, cos, sin, isNeox));
            const xv = hostF64(q);
            const cv = hostF64(cos.expand([N, H, d]).contiguous());
            const sv = hostF64(sin.expand([N, H, d]).contiguous());
            const want = xv.map((_, i) => {
              const j = i % d;
              const base = i - j;
              const half = d / 2;
              const [i1, i2] = isNeox ? (j < half ? [j, j + half] : [j - half, j]) : [j - (j % 2), j - (j % 2) + 1];
              const first = isNeox ? j < half : j % 2 === 0;
              const x1 = xv[base + i1]!;
              const x2 = xv[base + i2]!;
              return first ? x1 * cv[i]! - x2 * sv[i]! : x2 * cv[i]! + x1 * sv[i]!;
            });
            assert.ok(worstRel(rq, want, relTol(dtype)) <= 1, `${label}: applyRotaryEmb`);
            // The cache mode: k's rows into the key cache at their slots, v's rows copied; token 1 pads.
            const [NB, BS] = [3, 2];
            const v = rand([N, Hkv, d], 7, 'contiguous', dtype).to('webgpu');
            const kc = rand([NB, BS, Hkv, d], 8, 'contiguous', dtype).to('webgpu');
            const vc = rand([NB, BS, Hkv, d], 9, 'contiguous', dtype).to('webgpu');
            const slotList = [4, -1, 1];
            const [kc0, vc0] = [hostF64(kc), hostF64(vc)];
            const c = kiln.llm.qkNormRotaryCache(q, k, v, qw, kw, 1e-6, cos, sin, isNeox, kc, vc, makeTensor(slotList, [N], 'int32').to('webgpu'));
            const kr = refNormRotary(k, kw, 1e-6, cos, sin, isNeox, round);
            const { keys: wantK, values: wantV } = refCacheWrite(kc0, vc0, kr, hostF64(v), slotList, Hkv * d);
            assert.ok(worstRel(hostF64(c.q), refNormRotary(q, qw, 1e-6, cos, sin, isNeox, round), relTol(dtype)) <= 1, `${label}: cache mode q`);
            assert.ok(worstRel(hostF64(kc), wantK, relTol(dtype)) <= 1, `${label}: key cache`);
            assert.deepEqual(hostF64(vc), wantV, `${label}: value cache (copied rows, others untouched)`);
          }
        }
      }
    });
    const registerForm = sources.filter((s) => s.includes('let xa0 ='));
    if (form.registers) {
      assert.ok(registerForm.length > 0, `${form.label}: register-form sources rendered`);
      assert.equal(registerForm.some((s) => s.includes('subgroupAdd')), form.subgroups, `${form.label}: subgroupAdd where asked for`);
    } else assert.equal(registerForm.length, 0, `${form.label}: no register-form source`);
  }
});
