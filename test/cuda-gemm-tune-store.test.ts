/**
 * Persisted cuBLASLt autotune winners (src/runtime/cuda/gemm-tune-store.ts), without a GPU: plans
 * are plain objects with made-up candidate bytes, the timing function is a stub that picks a
 * candidate and counts its calls. Checks that a stored winner is reused across the in-memory layer
 * (a new process reads the disk), and that every part of the key (device, library version,
 * problem, candidate list) and a forged entry lead to timing again.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { getDiskCache } from '../src/runtime/cache/disk-cache.js';
import { gemmTuneStats, tunePersisted, type TunablePlan, type TuneDevice } from '../src/runtime/cuda/gemm-tune-store.js';
import { withCacheDir as withCacheDirAt } from './helpers/cache-dir.js';

const h200: TuneDevice = { arch: 'sm_90', name: 'NVIDIA H200', smCount: 132 };
const algo = (seed: number): Uint8Array => Uint8Array.from({ length: 64 }, (_, i) => (seed * 31 + i) & 255);
const candidates = (...seeds: number[]): Uint8Array[] => seeds.map(algo);
/** A fresh plan over copies of the candidates (a new process has new buffers with the same bytes). */
const planOf = (algos: readonly Uint8Array[]): TunablePlan => ({ algo: algos[0]!, algos: algos.map((a) => a.slice()), tuned: false });

const withCacheDir = (f: () => void): void => withCacheDirAt(f, 'kiln-gemm-tune-');

/** Runs tunePersisted with a stub timer that picks candidate `pick`; returns whether it timed and the chosen bytes. */
function tuneOnce(device: TuneDevice, problem: string, algos: readonly Uint8Array[], version: number, pick: number): { timed: boolean; chosen: number[] } {
  const plan = planOf(algos);
  let timed = false;
  tunePersisted(device, problem, plan, version, () => {
    timed = true;
    plan.tuned = true;
    plan.algo = plan.algos[pick]!;
  });
  assert.equal(plan.tuned, true);
  assert.ok(plan.algos.includes(plan.algo), 'the chosen algorithm is one of the plan candidates (same object)');
  return { timed, chosen: [...plan.algo] };
}

test('a winner is stored once and reused by a later process', () => {
  withCacheDir(() => {
    const algos = candidates(1, 2, 3, 4);
    const first = tuneOnce(h200, 'bf16,m128,n1024,k1024', algos, 130100, 2);
    assert.equal(first.timed, true);
    assert.deepEqual(first.chosen, [...algos[2]!]);
    getDiskCache().clearMemory(); // what a new process sees: only the disk
    const loadedBefore = gemmTuneStats.loaded;
    const second = tuneOnce(h200, 'bf16,m128,n1024,k1024', algos, 130100, 0);
    assert.equal(second.timed, false, 'the stored winner was used without timing');
    assert.deepEqual(second.chosen, [...algos[2]!]);
    assert.equal(gemmTuneStats.loaded, loadedBefore + 1);
  });
});

test('device, library version, problem and candidate list are all part of the key', () => {
  withCacheDir(() => {
    const algos = candidates(1, 2, 3);
    const problem = 'f32,m64,n512,k512,bias';
    assert.equal(tuneOnce(h200, problem, algos, 1, 1).timed, true);
    assert.equal(tuneOnce(h200, problem, algos, 1, 0).timed, false);
    assert.equal(tuneOnce({ ...h200, name: 'NVIDIA H100 80GB HBM3', smCount: 132 }, problem, algos, 1, 0).timed, true, 'another device of the same arch');
    assert.equal(tuneOnce({ ...h200, smCount: 114 }, problem, algos, 1, 0).timed, true, 'another SM count');
    assert.equal(tuneOnce({ ...h200, arch: 'sm_100' }, problem, algos, 1, 0).timed, true, 'another arch');
    assert.equal(tuneOnce(h200, problem, algos, 2, 0).timed, true, 'another cuBLASLt version');
    assert.equal(tuneOnce(h200, 'f32,m64,n512,k512', algos, 1, 0).timed, true, 'another problem (no bias epilogue)');
    assert.equal(tuneOnce(h200, problem, candidates(1, 2, 3, 4), 1, 0).timed, true, 'the heuristic offered another candidate list');
    assert.equal(tuneOnce(h200, problem, candidates(3, 2, 1), 1, 0).timed, true, 'the same candidates in another order');
  });
});

test('an entry whose winner is not among the candidates at its index is a miss and is re-timed', () => {
  withCacheDir(() => {
    const algos = candidates(5, 6);
    assert.equal(tuneOnce(h200, 'p', algos, 1, 1).timed, true);
    // Forge the stored entry: point it at index 0 with index 1's bytes.
    const dir = process.env.KILN_CACHE_DIR!;
    const files = fs.readdirSync(path.join(dir, 'cublaslt-algo'), { recursive: true }).map(String).filter((f) => f.endsWith('.json'));
    assert.equal(files.length, 1);
    const file = path.join(dir, 'cublaslt-algo', files[0]!);
    const [header, body] = fs.readFileSync(file, 'utf8').split('\n') as [string, string];
    const key = (JSON.parse(header) as { key: string }).key;
    const entry = JSON.parse(body) as { index: number; algo: string };
    assert.equal(entry.algo, Buffer.from(algos[1]!).toString('hex'));
    getDiskCache().put('cublaslt-algo', key, { ...entry, index: 0 });
    getDiskCache().clearMemory();
    const again = tuneOnce(h200, 'p', algos, 1, 1);
    assert.equal(again.timed, true, 'mismatched bytes: timed again');
    getDiskCache().clearMemory();
    assert.equal(tuneOnce(h200, 'p', algos, 1, 0).timed, false, 'the re-timed winner was stored over the forged entry');
  });
});
