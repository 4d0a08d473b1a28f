/**
 * max-autotune on webgpu (issue #20): the launch configs a compiled WGSL kernel may run with
 * (workgroup sizes; for reductions a row per workgroup or per invocation) all compute the same
 * numbers as the cpu, and mode 'max-autotune' times them with device timestamps (kiln.Event over
 * timestamp queries), keeps one of them and stores it on disk; with device timestamps off
 * (KILN_WEBGPU_TIMESTAMPS=0, as on an adapter without timestamp-query) it keeps the default config
 * and says so under KILN_LOG=tune. Numbers and counters, never timing. Needs a webgpu adapter
 * that computes (SwiftShader in CI); skips otherwise.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { WgslProgram } from '../src/compile/codegen/wgsl/program.js';
import type { FusedConfig } from '../src/kernels/webgpu/fused/run.js';
import { setOption } from '../src/runtime/config.js';
import { setNoteSink } from '../src/runtime/notes.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { withCacheDir } from './helpers/cache-dir.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

type Fn = (...xs: Tensor[]) => Tensor | Tensor[];

interface Case {
  readonly label: string;
  readonly fn: Fn;
  readonly inputs: () => Tensor[];
}

const CASES: readonly Case[] = [
  { label: 'pointwise chain', fn: (x, y) => kiln.add(kiln.mul(x!, 2), kiln.sin(y!)), inputs: () => [kiln.randn([37, 53]), kiln.randn([53])] },
  { label: 'sum and mean over long rows', fn: (x) => [kiln.sum(kiln.mul(x!, x!), -1), kiln.mean(x!, -1)], inputs: () => [kiln.randn([9, 700])] },
  { label: 'softmax over rows', fn: (x) => kiln.softmax(kiln.mul(x!, 1.5), -1), inputs: () => [kiln.randn([16, 130])] },
  { label: 'sum over the outer dim', fn: (x) => kiln.sum(x!, 0), inputs: () => [kiln.randn([300, 48])] },
  { label: 'argmax and amax over rows', fn: (x) => [kiln.argmax(x!, -1), kiln.amax(x!, -1)], inputs: () => [kiln.randn([12, 257])] },
  { label: 'layerNorm', fn: (x, g) => kiln.nn.functional.layerNorm(x!, [96], g, g, 1e-5), inputs: () => [kiln.randn([10, 96]), kiln.add(kiln.randn([96]), 1)] },
];

const list = (out: unknown): Tensor[] => (Array.isArray(out) ? (out as Tensor[]) : [out as Tensor]);

function assertClose(got: Tensor, want: Tensor, what: string): void {
  assert.deepEqual(got.shape, want.shape, `${what}: shape`);
  const g = got.to('cpu').toFlatArray() as number[];
  const w = want.toFlatArray() as number[];
  for (let i = 0; i < w.length; i++) {
    const a = Number(g[i]);
    const b = Number(w[i]);
    assert.ok(a === b || Math.abs(a - b) <= 1e-5 + 1e-5 * Math.abs(b), `${what}: element ${i} is ${a}, cpu ${b}`);
  }
}

/** The case compiled (mode `mode`) and run once on webgpu: its program and the webgpu inputs. */
function compiled(c: Case, mode: 'default' | 'max-autotune'): { program: WgslProgram; xs: Tensor[]; out: Tensor[]; cpu: Tensor[] } {
  kiln.manualSeed(11);
  const cpuInputs = c.inputs();
  const xs = cpuInputs.map((t) => t.to('webgpu'));
  const cf = kiln.compile(c.fn as (...a: Tensor[]) => Tensor, { mode });
  const out = list(kiln.noGrad(() => cf(...xs)));
  const programs = cf.programs().inference;
  assert.equal(programs.length, 1, `${c.label}: one compiled program`);
  return { program: programs[0] as WgslProgram, xs, out, cpu: list(c.fn(...cpuInputs)) };
}

test('every candidate config of every compiled WGSL kernel computes the cpu numbers', { skip }, () => {
  for (const c of CASES) {
    const { program, xs, cpu } = compiled(c, 'default');
    assert.ok(program.stats.kernels > 0, `${c.label}: at least one WGSL kernel`);
    let count = 1;
    const used = new Set<string>();
    for (let i = 0; i < count; i++) {
      const seen: FusedConfig[][] = [];
      const q = new (program.constructor as typeof WgslProgram)(program.low, program.sched, {
        pick: ({ candidates }) => {
          seen.push([...candidates]);
          count = Math.max(count, candidates.length);
          return i;
        },
      });
      const out = list(kiln.noGrad(() => q.run(xs)));
      assert.equal(q.stats.fallbacks, 0, `${c.label}: every kernel launched`);
      for (const [k, want] of cpu.entries()) assertClose(out[k]!, want, `${c.label}, candidate ${i}, output ${k}`);
      for (const d of q.seed().decisions) used.add(`${d.key}=${d.config.strategy}/${d.config.workgroup}`);
      for (const cands of seen) assert.equal(new Set(cands.map((x) => `${x.strategy}/${x.workgroup}`)).size, cands.length, `${c.label}: candidates are distinct`);
    }
    assert.ok(count >= 3, `${c.label}: at least three candidates (workgroup sizes), got ${count}`);
    assert.ok(used.size >= count, `${c.label}: each candidate was launched (${[...used].join(', ')})`);
  }
});

test('max-autotune times the candidates with device timestamps, keeps one and stores it on disk', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const lines: string[] = [];
  const prev = setNoteSink((l) => lines.push(l));
  setOption('KILN_LOG', 'tune');
  try {
    withCacheDir(() => {
      for (const c of [CASES[1]!, CASES[2]!]) {
        const { program, out, cpu } = compiled(c, 'max-autotune');
        for (const [k, want] of cpu.entries()) assertClose(out[k]!, want, `${c.label} (max-autotune), output ${k}`);
        const decisions = program.seed().decisions;
        assert.equal(decisions.length, program.stats.kernels, `${c.label}: one decision per kernel`);
        if (acc.deviceTimestamps) {
          assert.equal(program.stats.tuned, program.stats.kernels, `${c.label}: every kernel was timed`);
          assert.ok(lines.some((l) => l.includes('picked') && l.includes('(device timestamps)')), `${c.label}: the tune log names the winner:\n${lines.join('\n')}`);
        } else {
          assert.equal(program.stats.defaulted, program.stats.kernels);
        }
      }
      if (acc.deviceTimestamps) {
        const dir = path.join(process.env.KILN_CACHE_DIR!, 'autotune');
        assert.ok(fs.existsSync(dir) && fs.readdirSync(dir, { recursive: true }).some((f) => String(f).endsWith('.json')), 'the winners are on disk');
      }
    }, 'kiln-wgtune-');
  } finally {
    setOption('KILN_LOG', undefined);
    setNoteSink(prev);
  }
});

test('without device timestamps max-autotune keeps the default config and says so (KILN_LOG=tune)', { skip }, () => {
  const lines: string[] = [];
  const prev = setNoteSink((l) => lines.push(l));
  setOption('KILN_LOG', 'tune');
  setOption('KILN_WEBGPU_TIMESTAMPS', false);
  try {
    withCacheDir(() => {
      const c = CASES[2]!;
      const { program, out, cpu } = compiled(c, 'max-autotune');
      assertClose(out[0]!, cpu[0]!, `${c.label} without timestamps`);
      assert.deepEqual([program.stats.tuned, program.stats.tuneCacheHits, program.stats.defaulted], [0, 0, program.stats.kernels]);
      assert.ok(
        lines.some((l) => l.startsWith('kiln[tune]:') && l.includes('keeps the default config') && (l.includes('KILN_WEBGPU_TIMESTAMPS=0') || l.includes('no timestamp-query'))),
        `the log says why:\n${lines.join('\n')}`,
      );
    }, 'kiln-wgtune-');
  } finally {
    setOption('KILN_WEBGPU_TIMESTAMPS', undefined);
    setOption('KILN_LOG', undefined);
    setNoteSink(prev);
  }
});
