/**
 * KILN_GEMV_PREFETCH (src/kernels/cuda/gemv.ts, runtime/cuda/pdl.ts): the GEMVs' L2 prefetch of
 * their weight before the PDL wait. Without a GPU: with the option off every GEMV source is byte
 * for byte what it was before the option existed (a digest of all variants); with it on, the
 * pre-wait section comes first, the PDL prologue goes after it, hasPdlPrologue accepts it (and
 * refuses a section with a load or a store), the bounds in the source are the documented ones, and
 * the gating follows the option, PDL and KILN_PDL=wait. On cuda (skipped without a device): the
 * GEMVs give the same bits with PDL and the prefetch on as with both off, eager and through a
 * compiled (CUDA graph) program.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { GEMV_PREFETCH_MAX_BYTES, gemvGatedSource, gemvNormSource, gemvPrefetchSetting, gemvSource, gemvStats } from '../src/kernels/cuda/gemv.js';
import { getOption, setOption } from '../src/runtime/config.js';
import { launchStats } from '../src/runtime/cuda/launch.js';
import { hasPdlPrologue, insertPdlPrologue, pdlEnabled, pdlPrologue, prefetchSectionSafe, setPdlEnabled } from '../src/runtime/cuda/pdl.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

/** Every variant the GEMV builders make, as the sources were before KILN_GEMV_PREFETCH. */
function allSources(prefetch?: { earlyBlocks: number }): string[] {
  const out: string[] = [];
  for (const m of [1, 2, 4, 8]) {
    for (const kw of [1, 2, 4, 8]) {
      out.push(gemvSource(m, kw, prefetch));
      for (const fast of [false, true]) {
        out.push(gemvGatedSource(m, kw, fast, prefetch));
        for (const gated of [false, true]) out.push(gemvNormSource(m, kw, gated, fast, prefetch));
      }
    }
  }
  return out;
}

test('gemv prefetch off: every GEMV source is byte-identical to the sources before the option', () => {
  // sha256 of allSources() joined with '\n=====\n', rendered from the commit before KILN_GEMV_PREFETCH (a60756e).
  const digest = createHash('sha256').update(allSources().join('\n=====\n')).digest('hex');
  assert.equal(digest, 'f1cc7e54e1c667e81e5869e7bcc5faa9a220413b656bde056f15b491b6cd1a7e');
  assert.equal(allSources().some((s) => s.includes('kiln-pdl-prefetch')), false);
});

const kernelName = (src: string): string => /__launch_bounds__\(256\) (\w+)\(/.exec(src)![1]!;

test('gemv prefetch on: the section opens the body, the PDL wait follows it, then the early trigger', () => {
  for (const src of allSources({ earlyBlocks: 1056 })) {
    const name = kernelName(src);
    assert.equal(hasPdlPrologue(src, name), false, `${name}: no wait yet, so no PDL launch`);
    const withPdl = insertPdlPrologue(src, 132);
    assert.equal(hasPdlPrologue(withPdl, name), true, `${name}: prologue after the section`);
    const body = withPdl.slice(withPdl.indexOf('{', withPdl.indexOf(name)) + 1);
    const at = (s: string): number => body.indexOf(s);
    assert.ok(body.trimStart().startsWith('// kiln-pdl-prefetch:'), `${name}: the section comes first`);
    assert.ok(at('cp.async.bulk.prefetch.L2.global') < at('griddepcontrol.wait'), `${name}: prefetch before the wait`);
    assert.ok(at('griddepcontrol.wait') < at('gridDim.x <= 1056u'), `${name}: the GEMV's own trigger after the wait`);
    assert.ok(at('gridDim.x <= 1056u') < at('__ldg'), `${name}: the trigger before the first load`);
    assert.equal(body.split('griddepcontrol.wait').length - 1, 1, `${name}: one wait`);
    // The norm kernels' per-lane prefetch after the wait is replaced by the section's.
    assert.equal(body.includes('kiln_gv_prefetch(w'), false, `${name}: no second prefetch`);
  }
  // earlyBlocks 0 (KILN_PDL=wait): the section but no trigger of the GEMV's own.
  const waitOnly = gemvSource(1, 1, { earlyBlocks: 0 });
  assert.ok(waitOnly.includes('cp.async.bulk.prefetch') && !waitOnly.includes('launch_dependents'));
  // Trigger only ('cuda.gemv.prefetchParts' = 'trigger'): no section, the wait first, then the trigger;
  // the norm kernel keeps its per-lane prefetch after the wait.
  for (const src of [gemvSource(1, 4, { earlyBlocks: 1056, prefetch: false }), gemvNormSource(1, 1, true, false, { earlyBlocks: 1056, prefetch: false })]) {
    const withPdl = insertPdlPrologue(src, 132);
    assert.ok(!src.includes('kiln-pdl-prefetch') && hasPdlPrologue(withPdl, kernelName(src)));
    assert.ok(withPdl.indexOf('griddepcontrol.wait') < withPdl.indexOf('gridDim.x <= 1056u'));
  }
  assert.ok(gemvNormSource(1, 1, true, false, { earlyBlocks: 1056, prefetch: false }).includes('kiln_gv_prefetch(w'));
  // Without the option the norm kernel keeps its per-lane prefetch of the first group.
  assert.ok(gemvNormSource(1, 1, false, false).includes('kiln_gv_prefetch(w'));
});

test('gemv prefetch: the bounds in the source (bytes per range, blocks that prefetch, 16-byte sizes)', () => {
  const plain = gemvSource(1, 1, { earlyBlocks: 1 });
  const gated = gemvGatedSource(1, 1, false, { earlyBlocks: 1 });
  const cap = GEMV_PREFETCH_MAX_BYTES;
  assert.equal(cap, 24 * 2 ** 20);
  // One range of at most 24 MiB over 128 KiB per block: blocks 0..191; lanes 0..7.
  assert.ok(plain.includes(`span < ${cap}ll ? (unsigned int)span : ${cap}u`), 'plain cap');
  assert.ok(plain.includes('blockIdx.x < 192u && threadIdx.x < 8 '), 'plain blocks and lanes');
  // Two ranges (gate rows, up rows) of 12 MiB each: blocks 0..95, lanes 0..15.
  assert.ok(gated.includes(`span < ${cap / 2}ll ? (unsigned int)span : ${cap / 2}u`), 'gated cap');
  assert.ok(gated.includes('blockIdx.x < 96u && threadIdx.x < 16 '), 'gated blocks and lanes');
  assert.ok(plain.includes('ldw == (long long)K'), 'only contiguous rows');
});

test('prefetchSectionSafe: L2 prefetches and the trigger only; loads, stores and other asm refused', () => {
  const section = gemvSource(1, 1, { earlyBlocks: 1 });
  const s = section.slice(section.indexOf('// kiln-pdl-prefetch:'), section.indexOf('// kiln-pdl-prefetch-end'));
  assert.equal(prefetchSectionSafe(s), true);
  assert.equal(prefetchSectionSafe(s + '  float v = __ldg(x);\n'), false, 'a load');
  assert.equal(prefetchSectionSafe(s + '  out[0] = 1;\n'), false, 'an indexed store');
  assert.equal(prefetchSectionSafe(s + '  *reinterpret_cast<uint4*>(out) = v;\n'), false, 'a store through a cast');
  assert.equal(prefetchSectionSafe(s + '  asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(x));\n'), false, 'an asm load');
  assert.equal(prefetchSectionSafe(s + '  atomicAdd(out, 1);\n'), false, 'an atomic');
  // A kernel whose section holds a load is never launched early; one without the end marker neither.
  const bad = (body: string): string => `extern "C" __global__ void k(const float* x, float* out) {\n${body}\n  out[0] = 1.f;\n}`;
  const loadFirst = insertPdlPrologue(bad('  // kiln-pdl-prefetch: x\n  float v = __ldg(x);\n  // kiln-pdl-prefetch-end'), 0);
  assert.ok(loadFirst.includes('griddepcontrol.wait'));
  assert.equal(hasPdlPrologue(loadFirst, 'k'), false, 'a load before the wait');
  // A section without its end marker is not one: the wait goes first (safe) ...
  const noEnd = insertPdlPrologue(bad('  // kiln-pdl-prefetch: x\n'), 0);
  assert.equal(hasPdlPrologue(noEnd, 'k'), true);
  assert.ok(noEnd.indexOf('griddepcontrol.wait') < noEnd.indexOf('kiln-pdl-prefetch'));
  // ... and a prologue after an unterminated section does not count.
  assert.equal(hasPdlPrologue(bad(`  // kiln-pdl-prefetch: x\n  asm volatile("prefetch.global.L2 [%0];" :: "l"(x));${pdlPrologue(0)}`), 'k'), false, 'a section without its end');
  const fine = insertPdlPrologue(bad('  // kiln-pdl-prefetch: x\n  asm volatile("prefetch.global.L2 [%0];" :: "l"(x));\n  // kiln-pdl-prefetch-end'), 0);
  assert.equal(hasPdlPrologue(fine, 'k'), true);
  assert.ok(fine.indexOf('prefetch.global.L2') < fine.indexOf('griddepcontrol.wait'));
});

test('gemvPrefetchSetting: the option, PDL and KILN_PDL=wait decide; one wave of 256-thread blocks', () => {
  assert.equal(gemvPrefetchSetting('0', true, false, 132, 2048), undefined);
  assert.equal(gemvPrefetchSetting('1', false, false, 132, 2048), undefined, 'effective only with PDL');
  assert.deepEqual(gemvPrefetchSetting('1', true, false, 132, 2048), { earlyBlocks: 1056 });
  assert.deepEqual(gemvPrefetchSetting('1', true, true, 132, 2048), { earlyBlocks: 0 }, 'KILN_PDL=wait: no early trigger');
  assert.deepEqual(gemvPrefetchSetting('always', false, false, 78, 1536), { earlyBlocks: 468 });
  assert.deepEqual(gemvPrefetchSetting('1', true, false, 132, 2048, 'prefetch'), { earlyBlocks: 0 }, 'prefetch only');
  assert.deepEqual(gemvPrefetchSetting('1', true, false, 132, 2048, 'trigger'), { earlyBlocks: 1056, prefetch: false }, 'trigger only');
  assert.deepEqual(gemvPrefetchSetting('trigger', true, false, 132, 2048), { earlyBlocks: 1056, prefetch: false }, 'the option value trigger: the same');
  assert.equal(gemvPrefetchSetting('trigger', false, false, 132, 2048), undefined, 'trigger: effective only with PDL');
  // The option is declared and reads 'trigger' (the early trigger only) by default; other values are refused.
  assert.equal(getOption('KILN_GEMV_PREFETCH'), 'trigger');
  assert.throws(() => setOption('KILN_GEMV_PREFETCH', 'yes' as never), /KILN_GEMV_PREFETCH/);
});

function values(n: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32 - 0.5) * 2;
  });
}

test('cuda: GEMVs with PDL + prefetch give the bits of PDL and prefetch off (eager and compiled)', { skip }, () => {
  // Qwen3-0.6B's decode shapes, one row: qkv, o (on a narrowed, strided x), the gated gate/up, down.
  const bf = (n: number, seed: number, shape: number[]): Tensor => kiln.tensor(values(n, seed), { dtype: 'bfloat16', device: 'cuda' }).reshape(shape);
  const x = bf(1024, 1, [1, 1024]);
  const wqkv = bf(4096 * 1024, 2, [4096, 1024]);
  const wo = bf(1024 * 2048, 3, [1024, 2048]);
  const wgu = bf(6144 * 1024, 4, [6144, 1024]);
  const wd = bf(1024 * 3072, 5, [1024, 3072]);
  const step = (h: Tensor): Tensor => {
    const qkv = kiln.linear(h, wqkv);
    const o = kiln.linear(qkv.narrow(-1, 0, 2048), wo);
    const a = kiln.llm.linearSiluAndMul(o, wgu);
    const d = kiln.linear(a, wd);
    return kiln.cat([qkv, o, a, d], -1);
  };
  const host = (t: Tensor): number[] => t.to('float32').toFlatArray() as number[];
  const run = (pdl: boolean, prefetch: '0' | '1' | 'trigger'): { eager: number[]; compiled: number[] } => {
    setPdlEnabled(pdl);
    setOption('KILN_GEMV_PREFETCH', prefetch);
    try {
      const before = gemvStats.runs;
      const pdlBefore = launchStats.pdl;
      const eager = host(step(x));
      assert.ok(gemvStats.runs >= before + 4, 'the GEMVs ran');
      if (pdl && pdlEnabled(0)) assert.ok(launchStats.pdl > pdlBefore, 'PDL on (sm_90): launches carried the attribute');
      const f = kiln.compile(step, { mode: 'reduce-overhead' });
      f(x); // captures
      return { eager, compiled: host(f(x) as Tensor) };
    } finally {
      setPdlEnabled(undefined);
      setOption('KILN_GEMV_PREFETCH', undefined);
    }
  };
  const ref = run(false, '0');
  assert.equal(ref.eager.length, 4096 + 1024 + 3072 + 1024);
  assert.ok(ref.eager.some((v) => v !== 0) && ref.eager.every(Number.isFinite));
  for (const [pdl, pf] of [[true, '1'], [true, '0'], [true, 'trigger'], [false, '1']] as const) {
    const got = run(pdl, pf);
    assert.deepEqual(got.eager, ref.eager, `eager, PDL ${pdl}, prefetch ${pf}`);
    assert.deepEqual(got.compiled, ref.compiled, `compiled, PDL ${pdl}, prefetch ${pf}`);
  }
  assert.deepEqual(ref.compiled, ref.eager, 'compiled equals eager');
});
