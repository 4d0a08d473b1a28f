/**
 * CUDA graph capture and replay (driver API). `captureOn(stream, body)` runs `body` with `stream`
 * as the device's Kiln default stream (so every eager kernel, copy and allocation of the body goes
 * there) between cuStreamBeginCapture_v2 and cuStreamEndCapture, and instantiates the result.
 *
 * Capture mode is relaxed (CU_STREAM_CAPTURE_MODE_RELAXED): other threads' and libraries' calls
 * that are merely "potentially unsafe" (cuMemAlloc, module loads) do not invalidate the capture;
 * Kiln itself keeps allocations out of the capture by warming the stream's free lists first (see
 * src/compile/cuda-graphs). Anything that synchronises (reading a tensor back, cuStreamSynchronize)
 * fails inside capture; the capture is then ended and discarded and a GraphCaptureError explains
 * what could not be captured.
 */
import { check, cudaError, driver, makeCurrent } from './driver.js';
import type { CudaAccelerator } from './cuda-accelerator.js';
import type { Ptr } from './ffi.js';
import { CudaEvent, CudaStream } from './stream.js';

/** CUstreamCaptureMode: GLOBAL = 0, THREAD_LOCAL = 1, RELAXED = 2. */
const CU_STREAM_CAPTURE_MODE_RELAXED = 2;

/** Something in the captured body cannot run inside a CUDA graph (its message says what). */
export class GraphCaptureError extends Error {
  constructor(
    message: string,
    readonly reason: string,
  ) {
    super(message);
    this.name = 'GraphCaptureError';
  }
}

const registry = new FinalizationRegistry<{ exec: Ptr; graph: Ptr }>((h) => {
  try {
    driver().cu.cuGraphExecDestroy(h.exec);
    driver().cu.cuGraphDestroy(h.graph);
  } catch {
    // the process is shutting down
  }
});

/** An instantiated graph: replay it with launch(). */
export class CudaGraphExec {
  private destroyed = false;

  constructor(
    readonly deviceIndex: number,
    private readonly exec: Ptr,
    private readonly graph: Ptr,
    /** Nodes in the captured graph (kernels, copies, memsets). */
    readonly nodeCount: number,
  ) {
    registry.register(this, { exec, graph }, this);
  }

  /** Enqueues one replay on `stream` (asynchronous, about 3 us of host time whatever the node count). */
  launch(stream: CudaStream): void {
    if (this.destroyed) throw new Error('cuda graph: replay after destroy()');
    const rc = driver().cu.cuGraphLaunch(this.exec, stream.handle);
    if (rc !== 0) throw cudaError(rc, `replaying a CUDA graph of ${this.nodeCount} nodes on cuda:${this.deviceIndex}`);
    stream.lastOpKernel = false;
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    registry.unregister(this);
    const { cu } = driver();
    check(cu.cuGraphExecDestroy(this.exec), 'destroying a CUDA graph instance');
    check(cu.cuGraphDestroy(this.graph), 'destroying a CUDA graph');
  }
}

/**
 * Runs `body` with `stream` as the default stream of its device (restored afterwards). `stream`
 * first waits for the work already queued on the previous default stream, and the previous default
 * stream waits for `stream`'s work at the end, so ordering across the switch is kept on the device.
 */
export function withDefaultStream<T>(acc: CudaAccelerator, stream: CudaStream, body: () => T): T {
  const index = stream.deviceIndex;
  const prev = acc.setDefaultStream(index, stream);
  if (prev === stream) {
    try {
      return body();
    } finally {
      acc.setDefaultStream(index, prev);
    }
  }
  const before = new CudaEvent(index, false);
  before.record(prev);
  stream.waitEvent(before);
  try {
    return body();
  } finally {
    acc.setDefaultStream(index, prev);
    const after = new CudaEvent(index, false);
    after.record(stream);
    prev.waitEvent(after);
  }
}

/** Captures everything `body` enqueues while `stream` is the default stream, and instantiates it. */
export function captureOn(acc: CudaAccelerator, stream: CudaStream, body: () => void): CudaGraphExec {
  const index = stream.deviceIndex;
  makeCurrent(index);
  const { cu } = driver();
  return withDefaultStream(acc, stream, () => {
    check(cu.cuStreamBeginCapture_v2(stream.handle, CU_STREAM_CAPTURE_MODE_RELAXED), `beginning a CUDA graph capture on cuda:${index}`);
    let failure: Error | undefined;
    try {
      body();
    } catch (e) {
      failure = e as Error;
    }
    const out: [Ptr | null] = [null];
    const rc = cu.cuStreamEndCapture(stream.handle, out);
    if (failure || rc !== 0 || !out[0]) {
      if (out[0]) cu.cuGraphDestroy(out[0]);
      const reason = failure ? failure.message : cudaError(rc, 'ending the capture').message;
      throw new GraphCaptureError(`cuda graph: the call cannot be captured on cuda:${index}: ${reason}`, reason);
    }
    const graph = out[0];
    const count: [number] = [0];
    check(cu.cuGraphGetNodes(graph, null, count), 'counting the nodes of a captured CUDA graph');
    const exec: [Ptr | null] = [null];
    const irc = cu.cuGraphInstantiateWithFlags(exec, graph, 0);
    if (irc !== 0) {
      cu.cuGraphDestroy(graph);
      throw cudaError(irc, `instantiating a CUDA graph of ${Number(count[0])} nodes on cuda:${index}`);
    }
    return new CudaGraphExec(index, exec[0]!, graph, Number(count[0]));
  });
}

/** A new non-blocking stream (its own allocator free lists: a memory pool private to one graph). */
export function poolStream(deviceIndex: number): CudaStream {
  return CudaStream.create(deviceIndex);
}
