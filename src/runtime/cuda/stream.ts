/**
 * CUDA streams and events behind the device ABI. Kiln's default stream on each device is a stream
 * created non-blocking (not the legacy NULL stream), so that work on it can be graph-captured and
 * never serialises against other libraries' streams; every copy and launch is asynchronous on it.
 */
import type { DeviceEvent, DeviceStream } from '../accelerator.js';
import { check, CUDA_ERROR_NOT_READY, cudaError, driver, makeCurrent } from './driver.js';
import type { Ptr } from './ffi.js';

const CU_STREAM_NON_BLOCKING = 1;
const CU_EVENT_DISABLE_TIMING = 2;

let nextStreamId = 1;

export class CudaStream implements DeviceStream {
  readonly deviceType = 'cuda' as const;
  /** Distinguishes streams in the allocator's per-stream free lists. */
  readonly id = nextStreamId++;
  /**
   * Whether the last thing enqueued here was a kernel: PDL (pdl.ts) gives the attribute by default
   * only to a launch that follows a kernel. Launches set it; copies, memsets, event records and
   * waits, and graph launches clear it (cuBLASLt calls leave it: a GEMM is a kernel too).
   */
  lastOpKernel = false;

  constructor(
    readonly deviceIndex: number,
    readonly handle: Ptr,
  ) {}

  static create(deviceIndex: number): CudaStream {
    makeCurrent(deviceIndex);
    const out: [Ptr | null] = [null];
    check(driver().cu.cuStreamCreate(out, CU_STREAM_NON_BLOCKING), `creating a stream on cuda:${deviceIndex}`);
    return new CudaStream(deviceIndex, out[0]!);
  }

  synchronize(): void {
    check(driver().cu.cuStreamSynchronize(this.handle), () => `synchronizing a stream of cuda:${this.deviceIndex} (an earlier asynchronous launch or copy may have failed)`);
  }

  /** Whether a CUDA graph capture is recording this stream (work enqueued now is not run). */
  isCapturing(): boolean {
    const status: [number] = [0];
    return driver().cu.cuStreamIsCapturing(this.handle, status) !== 0 || status[0] !== 0;
  }

  query(): boolean {
    const rc = driver().cu.cuStreamQuery(this.handle);
    if (rc === CUDA_ERROR_NOT_READY) return false;
    if (rc !== 0) throw cudaError(rc, `querying a stream of cuda:${this.deviceIndex}`);
    return true;
  }

  /** Makes this stream wait for `event` (recorded on another stream). */
  waitEvent(event: CudaEvent): void {
    check(driver().cu.cuStreamWaitEvent(this.handle, event.handle, 0), 'making a stream wait on an event');
    this.lastOpKernel = false;
  }
}

const registry = new FinalizationRegistry<Ptr>((h) => {
  try {
    driver().cu.cuEventDestroy_v2(h);
  } catch {
    // the process is shutting down
  }
});

export class CudaEvent implements DeviceEvent {
  readonly handle: Ptr;
  private recorded = false;

  constructor(
    readonly deviceIndex: number,
    readonly enableTiming: boolean,
  ) {
    makeCurrent(deviceIndex);
    const out: [Ptr | null] = [null];
    check(driver().cu.cuEventCreate(out, enableTiming ? 0 : CU_EVENT_DISABLE_TIMING), `creating an event on cuda:${deviceIndex}`);
    this.handle = out[0]!;
    registry.register(this, this.handle);
  }

  record(stream: DeviceStream): void {
    if (!(stream instanceof CudaStream)) throw new Error('Event.record: a cuda event can only be recorded on a cuda stream');
    if (stream.deviceIndex !== this.deviceIndex) throw new Error(`Event.record: event is on cuda:${this.deviceIndex} but the stream is on cuda:${stream.deviceIndex}`);
    check(driver().cu.cuEventRecord(this.handle, stream.handle), 'recording an event');
    stream.lastOpKernel = false;
    this.recorded = true;
  }

  synchronize(): void {
    if (!this.recorded) return;
    check(driver().cu.cuEventSynchronize(this.handle), 'waiting for an event');
  }

  query(): boolean {
    if (!this.recorded) return true;
    const rc = driver().cu.cuEventQuery(this.handle);
    if (rc === CUDA_ERROR_NOT_READY) return false;
    if (rc !== 0) throw cudaError(rc, 'querying an event');
    return true;
  }

  elapsedTime(end: DeviceEvent): number {
    if (!(end instanceof CudaEvent)) throw new Error('Event.elapsedTime: both events must be cuda events');
    if (!this.enableTiming || !end.enableTiming) throw new Error('Event.elapsedTime: both events must be created with enableTiming: true');
    if (!this.recorded || !end.recorded) throw new Error('Event.elapsedTime: both events must be recorded before measuring');
    // cuEventElapsedTime needs both events completed; waiting here matches torch.cuda.Event's use.
    end.synchronize();
    const ms: [number] = [0];
    check(driver().cu.cuEventElapsedTime_v2(ms, this.handle, end.handle), 'measuring the time between two events');
    return ms[0];
  }
}
