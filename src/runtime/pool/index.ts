export {
  compileInPool,
  compileInPoolSync,
  compilePoolStats,
  shutdownCompilePool,
  registerCompileTaskHandler,
  compileTaskHandler,
  setCompileWorkers,
  compileWorkers,
  defaultCompileWorkers,
  CompileTaskError,
  type CompilePoolStats,
  type CompileTask,
  type HandlerSpec,
} from './pool.js';
export { jsKernelTask, kernelSourceHash, type JsKernelPayload, type JsKernelResult } from './js-kernel-task.js';
