/**
 * The decode megakernel's CUDA C, run without a GPU: its host flavour
 * (kernels/cuda/codegen/decode-megakernel.ts, variant.host) compiled with g++ behind
 * scripts/cuda-emu/grid-emu.h (every thread of a small grid a live fiber, so the grid barriers,
 * block barriers and warp shuffles run as written) and compared with Kiln's cpu decode step
 * (DecodeRunner 'eager', whose tokens equal transformers' in test/decode-runner.test.ts) on random
 * dense bfloat16 Qwen3 models over identical caches: logits, the step's cache rows and the argmax,
 * at contexts of 1 to 301 tokens (one split, several splits, tokens past the prefetched ones), for
 * both weight streams and with every GEMV that allows it split along K. What this cannot check:
 * the PTX (loads, cp.async, acquire), memory ordering between SMs and timing; the H200 tests in
 * test/cuda-decode-megakernel.test.ts do.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { qwen3Config, shuffled, perturbNorms } from './helpers/qwen3-random.js';
import type { Tensor } from '../src/index.js';
import { decodeMegakernelSource, MK_LAYER_PTRS, megakernelGroups, megakernelPartFloats, megakernelSyncWords, type DecodeMegakernelDims, type DecodeMegakernelVariant } from '../src/kernels/cuda/codegen/decode-megakernel.js';
import { DecodeRunner } from '../src/serve/decode-runner.js';
import { PagedKvCache } from '../src/serve/kv-cache.js';
import { itemSize } from '../src/tensor/dtype.js';
import { bfloat16BitsToFloat32 } from '../src/tensor/half.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = [path.join(here, '..'), path.join(here, '../..')].find((p) => fs.existsSync(path.join(p, 'scripts/cuda-emu/grid-emu.h')))!;
const gxx = process.arch === 'x64' && spawnSync('g++', ['--version']).status === 0;
/** Emulated blocks: 4, or one per kv head where there are more (the kernel needs that many). */
const gridFor = (kvHeads: number): number => Math.max(4, kvHeads);


interface EmuLib {
  run(arena: Uint8Array, offs: BigInt64Array, nargs: number, layerOffs: BigInt64Array, n: number, tableAt: bigint): void;
}

/** Compiles the kernel's host flavour (cached by source) and loads it; `lag`: odd blocks run every lag-th round (grid-emu.h's EMU_LAG). */
function build(source: string, lag = 0): EmuLib {
  const wrapper = `${lag > 1 ? `#define EMU_LAG ${lag}\n` : ''}#include "${path.join(root, 'scripts/cuda-emu/grid-emu.h')}"
${source}
extern "C" void mk_arena_run(unsigned char* arena, const long long* offs, int nargs, const long long* layerOffs, int n, long long tableAt) {
  unsigned long long* table = reinterpret_cast<unsigned long long*>(arena + tableAt);
  for (int i = 0; i < n; i++) table[i] = (unsigned long long)(arena + layerOffs[i]);
  unsigned long long a[32];
  for (int i = 0; i < nargs; i++) a[i] = offs[i] < 0 ? 0ull : (unsigned long long)(arena + offs[i]);
  mk_host_launch(a);
}
`;
  const dir = path.join(os.tmpdir(), 'kiln-mk-emu');
  fs.mkdirSync(dir, { recursive: true });
  const key = createHash('sha256').update(wrapper).digest('hex').slice(0, 16);
  const so = path.join(dir, `${key}.so`);
  if (!fs.existsSync(so)) {
    // Per-process names, renamed into place: test processes running at once never share a half-written file.
    const cpp = path.join(dir, `${key}.${process.pid}.cpp`);
    fs.writeFileSync(cpp, wrapper);
    execFileSync('g++', ['-std=c++17', '-O1', '-w', '-shared', '-fPIC', cpp, '-o', `${so}.${process.pid}.tmp`]);
    fs.renameSync(`${so}.${process.pid}.tmp`, so);
    fs.rmSync(cpp, { force: true });
  }
  const koffi = createRequire(import.meta.url)('koffi') as { load(p: string): { func(sig: string): (...a: unknown[]) => unknown } };
  const fn = koffi.load(so).func('void mk_arena_run(uint8_t *arena, const int64_t *offs, int nargs, const int64_t *layerOffs, int n, int64_t tableAt)');
  return { run: (...a) => void fn(...a) };
}

/** One arena of host memory holding every buffer the kernel reads or writes, at 16-byte-aligned offsets. */
class Arena {
  private parts: { at: number; bytes: Uint8Array }[] = [];
  size = 0;
  add(bytes: Uint8Array | number): number {
    const at = Math.ceil(this.size / 16) * 16;
    const b = typeof bytes === 'number' ? new Uint8Array(bytes) : bytes;
    this.parts.push({ at, bytes: b });
    this.size = at + b.length;
    return at;
  }
  build(): Uint8Array {
    const out = new Uint8Array(this.size + 16);
    for (const p of this.parts) out.set(p.bytes, p.at);
    return out;
  }
}

const bytesOf = (t: Tensor): Uint8Array => {
  const c = t.contiguous();
  const n = c.numel() * itemSize(c.dtype);
  return new Uint8Array(c.storage.cpuArrayBuffer().slice(c.offset * itemSize(c.dtype), c.offset * itemSize(c.dtype) + n));
};
const bf16Floats = (b: Uint8Array): number[] => Array.from(new Uint16Array(b.buffer, b.byteOffset, b.length / 2), bfloat16BitsToFloat32);


const CASES: [string, Record<string, unknown>][] = [
  ['head dim 64, 4 query heads per kv head', qwen3Config(256, 8, 2, 64, 512, 2, 1000)],
  ['head dim 128, 2 query heads per kv head', qwen3Config(256, 2, 1, 128, 512, 2, 700)],
  // Qwen3-0.6B's layer widths (one layer, a small vocabulary).
  ['Qwen3-0.6B layer widths', qwen3Config(1024, 16, 8, 128, 3072, 1, 512)],
];

for (const [label, cfg] of CASES) {
  // [stream, cache slots, sync, pace, keys and values, norm and rotary rows, residuals, fold loads, grid x, early copies at]
  for (const [stream, kvSlots, sync, pace, kvLoad, constLoad, residLoad, joinLoads, gridTimes, earlyAt = 'start', arrive = 'fence'] of [
    ['next', 'registers', 'grid', 0, 'barrier', 'inline', 'end', 'serial', 1],
    ['ahead', 'registers', 'grid', 0, 'barrier', 'inline', 'end', 'serial', 1],
    ['next', 'shared', 'grid', 0, 'barrier', 'inline', 'end', 'serial', 1],
    ['next', 'shared', 'grid', 1, 'barrier', 'inline', 'end', 'serial', 1],
    ['next', 'shared', 'flow', 0, 'barrier', 'inline', 'end', 'serial', 1],
    ['next', 'registers', 'flow', 2, 'barrier', 'inline', 'end', 'serial', 1],
    ['next', 'shared', 'grid', 2, 'early', 'inline', 'end', 'serial', 1],
    ['next', 'shared', 'grid', 0, 'barrier', 'early', 'end', 'serial', 1],
    ['next', 'shared', 'grid', 2, 'early', 'early', 'early', 'serial', 1],
    ['next', 'registers', 'flow', 0, 'early', 'early', 'early', 'serial', 1],
    // Joint fold loads on twice the grid: up to 8 attention splits a kv head, so the fold runs
    // more than one chunk of FOLD_U splits at the longer contexts.
    ['next', 'shared', 'grid', 2, 'barrier', 'inline', 'end', 'joint', 2],
    ['next', 'shared', 'grid', 2, 'early', 'early', 'early', 'joint', 1, 'norm'],
    // Grid barriers by a flag (the block completing the count raises it; the others poll it).
    ['next', 'shared', 'grid', 2, 'early', 'early', 'early', 'joint', 1, 'norm', 'flag'],
    // The fold's first loads hoisted over the maxima and sums' round trip, on twice the grid (more than one chunk).
    ['next', 'shared', 'grid', 2, 'early', 'early', 'early', 'hoist', 2, 'norm'],
  ] as const) {
    const grid = gridFor(cfg.num_key_value_heads as number) * gridTimes;
    test(`decode megakernel (host emulation, ${grid} blocks) equals the cpu decode step: logits, cache rows, argmax (${label}; weights streamed ${stream}${pace > 0 ? `, ${pace} loads ahead` : ''}; cache slots in ${kvSlots}; keys and values loaded ${kvLoad === 'early' ? 'early' : 'at the barrier'}; norm and rotary rows ${constLoad === 'early' ? 'copied early' : 'inline'}; residuals read ${residLoad === 'early' ? 'early' : 'at the end'}; fold loads ${joinLoads}${joinLoads !== 'serial' ? ', bit-identical to serial' : ''}; early copies at ${earlyAt}; ${sync} sync${arrive === 'flag' ? ', barriers by a flag' : ''}; GEMVs split along K)`, { skip: gxx ? false : 'needs g++ on x86-64' }, () => {
      const model = kiln.models.Qwen3ForCausalLM.fromConfig(cfg, { dtype: 'bfloat16', seed: 3, initStd: 0.05 });
      assert.ok(perturbNorms(model, 23) > 0);
      const NB = 24;
      const cache = new PagedKvCache(model.kvGeometry(), { numBlocks: NB });
      kiln.manualSeed(17);
      for (const which of ['keys', 'values'] as const) for (const t of cache[which]) t.copy_(kiln.randn(t.shape as number[], { dtype: 'bfloat16' }));
      const runner = new DecodeRunner(model, cache, 'eager');
      const spec = model.wholeStepSpec({ keys: cache.keys, values: cache.values }, runner.maxBlocks);
      assert.equal(typeof spec, 'object', String(spec));
      if (typeof spec === 'string') return;
      const dims: DecodeMegakernelDims = {
        hidden: spec.hidden, heads: spec.heads, kvHeads: spec.kvHeads, headDim: spec.headDim, intermediate: spec.intermediate, layers: spec.layers.length, vocab: spec.vocab, eps: spec.eps,
        blockSize: cache.blockSize, numBlocks: NB, maxBlocks: runner.maxBlocks, grid,
      };
      const variant: DecodeMegakernelVariant = { loads: 'ldg', trace: false, stream, host: true, forceSplit: 2, kvSlots, sync, pace, kvLoad, constLoad, residLoad, joinLoads, earlyAt, arrive };
      // The flow MLP in more than one group of blocks wherever the sizes allow it (what its counters and partial sums are for).
      if (sync === 'flow') assert.ok(megakernelGroups(dims, variant) >= 2, `${megakernelGroups(dims, variant)} MLP groups`);
      const { source } = decodeMegakernelSource(dims, variant);
      // Under 'flow' blocks wait on counters of some blocks only: odd blocks lag, so a missing or short wait reads stale rows.
      const lib = build(source, sync === 'flow' ? 3 : 0);
      // The joint form's twin with serial loads: the same arithmetic in the same order, so the same bits.
      const serialTwin = joinLoads !== 'serial' ? build(decodeMegakernelSource(dims, { ...variant, joinLoads: 'serial' }).source, 0) : null;
      const table = shuffled(NB, 7);
      for (const P of cfg.hidden_size === 1024 ? [0, 130] : [0, 15, 16, 40, 150, 300]) {
        const blockTable = table.slice(0, Math.ceil((P + 1) / 16));
        const slot = cache.slot(blockTable, P);
        // The emulated kernel's inputs: the cache as it is before the reference step writes its row.
        const arena = new Arena();
        const layerOffs: number[] = [];
        const cacheAt: { k: number; v: number }[] = [];
        spec.layers.forEach((w, l) => {
          const ks = arena.add(bytesOf(cache.keys[l]!));
          const vs = arena.add(bytesOf(cache.values[l]!));
          cacheAt.push({ k: ks, v: vs });
          const at = [w.inputNorm, w.q, w.k, w.v, w.qNorm, w.kNorm, w.o, w.postNorm, w.gate, w.up, w.down].map((t) => arena.add(bytesOf(t)));
          layerOffs.push(...at, ks, vs);
        });
        assert.equal(layerOffs.length, spec.layers.length * MK_LAYER_PTRS);
        const tableAt = arena.add(8 * layerOffs.length);
        const i64 = (v: number): Uint8Array => new Uint8Array(new BigInt64Array([BigInt(v)]).buffer);
        const tableRow = new Int32Array(runner.maxBlocks);
        tableRow.set(blockTable);
        const hostArgs: number[] = [
          tableAt,
          arena.add(bytesOf(spec.embed)),
          arena.add(bytesOf(spec.finalNorm)),
          arena.add(bytesOf(spec.lmHead)),
          arena.add(bytesOf(spec.cos)),
          arena.add(bytesOf(spec.sin)),
          arena.add(i64((P * 37 + 11) % dims.vocab)),
          arena.add(i64(P)),
          arena.add(i64(slot)),
          arena.add(new Uint8Array(tableRow.buffer)),
          arena.add(new Uint8Array(new Int32Array([P + 1]).buffer)),
          arena.add(2 * dims.hidden), // h
          arena.add(2 * (dims.heads + 2 * dims.kvHeads) * dims.headDim), // qkv
          arena.add(2 * dims.intermediate), // act
          arena.add(4 * megakernelPartFloats(dims, variant)), // partials
          arena.add(4 * megakernelSyncWords(dims, variant)), // barrier, exit and flow counters
          arena.add(2 * dims.vocab), // logits
          arena.add(8), // error claim
          arena.add(32), // error report
          arena.add(new Uint8Array(new BigInt64Array([1n, 2n, 3n]).buffer)),
          -1, // no trace
        ];
        const mem = arena.build();
        const twinMem = serialTwin !== null ? mem.slice() : null;
        const runOn = (l: EmuLib, arena: Uint8Array): void => l.run(arena, new BigInt64Array(hostArgs.map(BigInt)), hostArgs.length, new BigInt64Array(layerOffs.map(BigInt)), layerOffs.length, BigInt(tableAt));
        runOn(lib, mem);
        if (serialTwin !== null && twinMem !== null) {
          runOn(serialTwin, twinMem);
          const at = hostArgs[16]!;
          assert.deepEqual(mem.subarray(at, at + 2 * dims.vocab), twinMem.subarray(at, at + 2 * dims.vocab), `context ${P + 1}: joint and serial fold loads give different logits`);
        }
        const report: BigInt64Array = new BigInt64Array(mem.buffer, hostArgs[18]!, 4);
        assert.equal(report[0], 0n, `context ${P + 1}: the kernel reported error code ${report[0]} (value ${report[1]}, size ${report[2]})`);
        assert.deepEqual([...new Uint32Array(mem.buffer, hostArgs[15]!, megakernelSyncWords(dims, variant))], new Array(megakernelSyncWords(dims, variant)).fill(0), 'the barrier words are reset for the next launch');
        const got = bf16Floats(mem.subarray(hostArgs[16]!, hostArgs[16]! + 2 * dims.vocab));
        const want = kiln.noGrad(() => runner.run([{ tokenId: (P * 37 + 11) % dims.vocab, position: P, blockTable }]).to('float32').toFlatArray() as number[]);
        const scale = Math.max(...want.map(Math.abs));
        let worst = 0;
        for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
        assert.ok(worst <= 0.02 * scale, `context ${P + 1}: logits differ by ${worst} (largest logit ${scale})`);
        const argmax = (x: number[]): number => x.indexOf(Math.max(...x));
        assert.equal(argmax(got), argmax(want), `context ${P + 1}: argmax`);
        const rowElems = dims.kvHeads * dims.headDim;
        spec.layers.forEach((_, l) => {
          for (const [which, at] of [['keySlots', cacheAt[l]!.k], ['valueSlots', cacheAt[l]!.v]] as const) {
            const ref = cache[which][l]!.narrow(0, slot, 1).to('float32').toFlatArray() as number[];
            const row = bf16Floats(mem.subarray(at + 2 * slot * rowElems, at + 2 * (slot + 1) * rowElems));
            const tol = 0.02 * Math.max(...ref.map(Math.abs));
            row.forEach((x, i) => assert.ok(Math.abs(x - ref[i]!) <= tol, `context ${P + 1}, layer ${l} ${which}[${i}]: ${x} vs ${ref[i]}`));
          }
        });
      }
      runner.dispose();
      cache.dispose();
    });
  }
}
