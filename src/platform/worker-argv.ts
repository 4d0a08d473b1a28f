/**
 * The Node options a worker thread is started with. A worker inherits its parent's `execArgv` by
 * default, and some of a process's options make no sense for a worker that runs a file: started as
 * `node --input-type=module -e '<code>'`, the worker rejects `--input-type` (it only goes with
 * string input) and dies before its first line, which a parent blocked in `Atomics.wait` (the
 * webgpu device thread) cannot even notice. So Kiln's workers are given the parent's options minus
 * the eval/print/check/interactive ones and `--input-type`. Where Node refuses the rest for a
 * worker (V8 flags such as `--experimental-wasm-relaxed-simd` are process-wide and not accepted
 * per worker), the caller starts the worker with none: the flags apply to it anyway.
 */
import { nodeProcess } from './node.js';

/** Options that take the next argument as their value unless written `--opt=value`. */
const DROP_WITH_VALUE = new Set(['-e', '--eval', '-p', '--print', '-pe', '--input-type']);
/** Options without a value. */
const DROP_FLAG = new Set(['-i', '--interactive', '-c', '--check']);
/** `--opt=value` forms. */
const DROP_PREFIX = ['--eval=', '--print=', '--input-type='];

/** `argv` (default: this process's execArgv) without what a worker running a file rejects. */
export function workerExecArgv(argv: readonly string[] = nodeProcess?.execArgv ?? []): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (DROP_WITH_VALUE.has(a)) i++;
    else if (!DROP_FLAG.has(a) && !DROP_PREFIX.some((p) => a.startsWith(p))) out.push(a);
  }
  return out;
}
