/**
 * Worker thread of the Wasm cpu path's pool (wasm-threads.ts has the protocol): instantiates the
 * GEMM module on the shared memory, reports READY, then waits on SEQ and runs its share of each
 * task it is tagged for. Every exception is caught and reported through ERR so the caller never
 * waits for a share that will not come.
 */
import { workerThreads } from '../../platform/index.js';
import { wasmApi } from './wasm-asm.js';
import { runCalls, runTiles, sgemmMacros, warmUpMacros } from './wasm-sgemm.js';
import { CTRL, MAX_PAGES } from './wasm-threads.js';

interface Data {
  memory: { buffer: ArrayBuffer };
  module: object;
  ctrl: Int32Array;
  index: number;
}

const { memory, module, ctrl, index } = workerThreads.workerData as Data;
const inst = new (wasmApi()!.Instance)(module, { env: { mem: memory } });
const macros = sgemmMacros(inst.exports);
// Tier up before taking shares, on a private instance (its own small memory), so the shared memory is untouched.
try {
  const mem = new (wasmApi()!.Memory)({ initial: 1, maximum: MAX_PAGES, shared: true });
  warmUpMacros(sgemmMacros(new (wasmApi()!.Instance)(module, { env: { mem } }).exports), 64);
} catch {
  // warm-up is an optimisation only
}
let words = new Int32Array(memory.buffer);
let seen = Atomics.load(ctrl, CTRL.SEQ);
Atomics.store(ctrl, CTRL.READY + index, 1);

for (;;) {
  Atomics.wait(ctrl, CTRL.SEQ, seen);
  const s = Atomics.load(ctrl, CTRL.SEQ);
  if (s === seen) continue;
  seen = s;
  if (Atomics.load(ctrl, CTRL.TASK + index) !== s) continue;
  try {
    const a = CTRL.ARGS;
    const r = CTRL.RANGE + 4 * index;
    if (ctrl[CTRL.OP] === 2) {
      // the memory may have grown since the last task
      if (words.length * 4 !== memory.buffer.byteLength) words = new Int32Array(memory.buffer);
      runCalls(macros, words, ctrl[a]!, ctrl[r]!, ctrl[r + 1]!);
    } else runTiles(macros, { mS: ctrl[a]!, nS: ctrl[a + 1]!, k: ctrl[a + 2]!, a: ctrl[a + 3]!, b: ctrl[a + 4]!, c: ctrl[a + 5]!, ldc: ctrl[a + 6]!, lda: ctrl[a + 7]! }, ctrl[r]!, ctrl[r + 1]!, ctrl[r + 2]!, ctrl[r + 3]!);
  } catch {
    Atomics.store(ctrl, CTRL.ERR + index, 1);
  }
  Atomics.store(ctrl, CTRL.DONE + index, s);
  Atomics.notify(ctrl, CTRL.DONE + index);
}
