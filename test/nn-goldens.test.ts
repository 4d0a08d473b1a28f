/**
 * PyTorch goldens for MultiheadAttention, LSTM, GRU and the pool modules: torch's float64 weights
 * are loaded by name into Kiln's modules (so this also checks that the state dict names match) and
 * the outputs compared. The fixture comes from `python scripts/make_nn_goldens.py`; without it the
 * test is skipped (the float64 references in the other nn tests still run).
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { assertClose } from './helpers/assert.js';

interface Flat { shape: number[]; values: (number | boolean)[]; dtype: string }
interface Case { kind: string; args: Record<string, number | boolean>; state: Record<string, Flat>; inputs: Record<string, Flat | boolean>; outputs: Record<string, Flat> }

const here = path.dirname(fileURLToPath(import.meta.url));
const file = [path.join(here, 'fixtures/nn-goldens.json'), path.join(here, '../../test/fixtures/nn-goldens.json')].find((p) => fs.existsSync(p));
const TOL = { atol: 1e-10, rtol: 1e-8 };

function t(f: Flat): kiln.Tensor {
  return kiln.tensor(f.values as number[], { dtype: f.dtype === 'bool' ? 'bool' : 'float64' }).reshape(f.shape);
}

test('nn modules match PyTorch goldens', { skip: file ? false : 'test/fixtures/nn-goldens.json is missing: run python scripts/make_nn_goldens.py' }, () => {
  const { cases } = JSON.parse(fs.readFileSync(file!, 'utf8')) as { cases: Case[] };
  for (const c of cases) {
    const a = c.args;
    const i = c.inputs as Record<string, Flat>;
    const check = (name: string, got: kiln.Tensor | null): void => assertClose(got!, c.outputs[name]!.values as number[], c.outputs[name]!.shape, TOL);
    const load = (m: kiln.nn.Module): void => {
      m.loadStateDict(Object.fromEntries(Object.entries(c.state).map(([k, v]) => [k, t(v)])));
    };
    if (c.kind === 'mha') {
      const m = new kiln.nn.MultiheadAttention(a.embedDim as number, a.numHeads as number, { batchFirst: a.batchFirst as boolean, dtype: 'float64' });
      load(m);
      const r = m.forward(t(i.query!), t(i.key!), t(i.value!), {
        keyPaddingMask: i.keyPaddingMask ? t(i.keyPaddingMask) : null,
        attnMask: i.attnMask ? t(i.attnMask) : null,
        averageAttnWeights: (c.inputs.averageAttnWeights as boolean | undefined) ?? true,
      });
      check('output', r.output);
      check('weights', r.weights);
    } else if (c.kind === 'lstm' || c.kind === 'gru') {
      const opts = { numLayers: a.numLayers as number, bidirectional: a.bidirectional as boolean, batchFirst: a.batchFirst as boolean, dtype: 'float64' as const };
      const h = i.h ? t(i.h) : null;
      if (c.kind === 'lstm') {
        const m = new kiln.nn.LSTM(a.inputSize as number, a.hiddenSize as number, opts);
        load(m);
        const r = m.forward(t(i.input!), { h, c: i.c ? t(i.c) : null });
        check('output', r.output);
        check('h', r.h);
        check('c', r.c);
      } else {
        const m = new kiln.nn.GRU(a.inputSize as number, a.hiddenSize as number, opts);
        load(m);
        const r = m.forward(t(i.input!), { h });
        check('output', r.output);
        check('h', r.h);
      }
    } else if (c.kind === 'maxPool2d') {
      check('output', new kiln.nn.MaxPool2d(a.kernelSize as number, { stride: a.stride as number, padding: a.padding as number, ceilMode: a.ceilMode as boolean }).forward(t(i.input!)));
    } else if (c.kind === 'avgPool2d') {
      check('output', new kiln.nn.AvgPool2d(a.kernelSize as number, { stride: a.stride as number, padding: a.padding as number, countIncludePad: a.countIncludePad as boolean }).forward(t(i.input!)));
    } else throw new Error(`nn-goldens: unknown case kind '${c.kind}'`);
  }
});
