/**
 * Child process for the pool test: awaits tasks at top level (a worker unref'd mid-task would let
 * the process exit with the await unsettled) and then leaves the pool running: an idle pool must
 * not keep the process alive.
 */
import { compileInPool, compilePoolStats, registerCompileTaskHandler, type JsKernelResult } from '../../src/runtime/pool/index.js';

registerCompileTaskHandler('slow', new URL('./compile-pool-handlers.js', import.meta.url), 'slowEcho');
const slow = await compileInPool<{ payload: unknown }>({ kind: 'slow', payload: { ms: 100 } });
const k = await compileInPool<JsKernelResult>({ kind: 'js-kernel', payload: { source: 'return 1;', name: 'one' } });
console.log(JSON.stringify({ slow: slow.payload, kernelOk: k.ok, workers: compilePoolStats().workers }));
