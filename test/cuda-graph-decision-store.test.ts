/**
 * Stored CUDA graph decisions (src/compile/cuda-graphs/decision-store.ts), without a GPU: what is
 * stored (clear decisions only), what the key separates (program, call signature), and when
 * nothing is stored at all (no cache context, process-local constants, KILN_TUNE_STORE=0).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getDiskCache } from '../src/runtime/cache/disk-cache.js';
import { decisionStore } from '../src/compile/cuda-graphs/decision-store.js';
import type { BackendOptions } from '../src/compile/backend.js';
import { withCacheDir as withCacheDirAt } from './helpers/cache-dir.js';

const withCacheDir = (f: () => void): void => withCacheDirAt(f, 'kiln-graph-decision-');

const opts = (signature: string, guardKey = '1|arg0:float32@cuda:0[4096,4096]contiguous'): BackendOptions => ({ mode: 'default', logCode: false, cacheContext: { signature, guardKey } });

test('clear decisions are stored per program and call signature and read back by a new process', () => {
  withCacheDir(() => {
    const a = decisionStore(opts('sig-a'), 0)!;
    assert.ok(a);
    a.store('float32[4096,4096|4096,1]#direct', { plainMs: 30, graphMs: 2.7 });
    getDiskCache().clearMemory(); // a new process: only the disk
    const again = decisionStore(opts('sig-a'), 0)!;
    assert.deepEqual(again.load('float32[4096,4096|4096,1]#direct'), { plainMs: 30, graphMs: 2.7 });
    assert.equal(again.load('float32[4096,4096|4096,1]'), undefined, 'the copying graph of the same signature is another call');
    assert.equal(again.load('bfloat16[4096,4096|4096,1]#direct'), undefined, 'another argument dtype');
    assert.equal(decisionStore(opts('sig-b'), 0)!.load('float32[4096,4096|4096,1]#direct'), undefined, 'another program');
    assert.equal(decisionStore(opts('sig-a', 'other guards'), 0)!.load('float32[4096,4096|4096,1]#direct'), undefined, 'other guards');
    assert.equal(decisionStore({ ...opts('sig-a'), mode: 'max-autotune' }, 0)!.load('float32[4096,4096|4096,1]#direct'), undefined, 'another mode');
  });
});

test('close calls are not stored (each process measures again); bad values are never stored', () => {
  withCacheDir(() => {
    const s = decisionStore(opts('sig'), 0)!;
    s.store('k1', { plainMs: 0.044, graphMs: 0.042 });
    s.store('k2', { plainMs: Infinity, graphMs: 1 });
    s.store('k3', { plainMs: 0, graphMs: 1 });
    s.store('k4', { plainMs: 1, graphMs: 1.6 });
    getDiskCache().clearMemory();
    assert.equal(s.load('k1'), undefined);
    assert.equal(s.load('k2'), undefined);
    assert.equal(s.load('k3'), undefined);
    assert.deepEqual(s.load('k4'), { plainMs: 1, graphMs: 1.6 }, 'plain clearly faster is stored too');
  });
});

test('a whole-call capture failure is stored per program', () => {
  withCacheDir(() => {
    assert.equal(decisionStore(opts('sig-a'), 0)!.loadCaptureFailure(), undefined);
    decisionStore(opts('sig-a'), 0)!.storeCaptureFailure('embedding synchronises');
    getDiskCache().clearMemory();
    assert.equal(decisionStore(opts('sig-a'), 0)!.loadCaptureFailure(), 'embedding synchronises');
    assert.equal(decisionStore(opts('sig-b'), 0)!.loadCaptureFailure(), undefined, 'another program');
  });
});

test('no store without a cache context, for process-local constants, or with KILN_TUNE_STORE=0', () => {
  assert.equal(decisionStore({ mode: 'default', logCode: false }, 0), null);
  assert.equal(decisionStore(opts('add(%0, o#12)'), 0), null);
  const saved = process.env.KILN_TUNE_STORE;
  process.env.KILN_TUNE_STORE = '0';
  try {
    assert.equal(decisionStore(opts('sig'), 0), null);
  } finally {
    if (saved === undefined) delete process.env.KILN_TUNE_STORE;
    else process.env.KILN_TUNE_STORE = saved;
  }
});
