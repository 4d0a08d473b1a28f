/**
 * The backstop for tensors dropped without dispose(): a FinalizationRegistry releases a collected
 * tensor's hold on its storage. Registering (with an unregister token) and unregistering cost about
 * 0.3-0.4 us per tensor, a large share of a small eager op's host time, and most tensors of a hot
 * loop are temporaries disposed within microseconds. So registration is deferred: a new tensor waits
 * in a short queue that is drained when it holds QUEUE_LIMIT tensors or at the end of the current
 * job (a microtask), and only the tensors still alive then are registered. The queue's strong
 * references delay the collection of a dropped tensor until that drain, never past it.
 *
 * Under memory pressure (runtime/memory-pressure.ts) the allocator calls `collectNow` in the middle
 * of a synchronous loop: it drains the queue, forces a GC and runs the registry's pending callbacks
 * at once (cleanupSome), which the event loop would otherwise run only when the loop yields.
 */
import { finalizationRegistryWithCleanupSome, forceGc, onMemoryPressure } from '../runtime/memory-pressure.js';
import type { Storage } from './storage.js';

/** What the finalizer needs of a tensor (the Tensor class implements it). */
export interface Collectable {
  readonly storage: Storage;
  readonly isDisposed: boolean;
  /** Set here once the registry tracks the tensor; dispose() must then unregister it. */
  finalizerRegistered: boolean;
}

const Registry = finalizationRegistryWithCleanupSome();
const registry = new Registry<Storage>((storage) => storage.release(true)) as FinalizationRegistry<Storage> & { cleanupSome?: () => void };

// Large enough that a loop of eager ops, each disposing its temporaries, drains rarely and finds
// them all disposed; small enough that the queue keeps at most this many dropped tensors alive.
const QUEUE_LIMIT = 64;

const queue: Collectable[] = [];
let drainScheduled = false;

function drain(): void {
  drainScheduled = false;
  for (const t of queue) if (!t.isDisposed) register(t);
  queue.length = 0;
}

function register(t: Collectable): void {
  registry.register(t, t.storage, t);
  t.finalizerRegistered = true;
}

/** A new tensor: released by the registry if it is collected without dispose(). */
export function watch(t: Collectable): void {
  queue.push(t);
  if (queue.length >= QUEUE_LIMIT) drain();
  else if (!drainScheduled) {
    drainScheduled = true;
    queueMicrotask(drain);
  }
}

/** The tensor released its storage itself (dispose): the registry must not release it again. */
export function unwatch(t: Collectable): void {
  if (t.finalizerRegistered) {
    registry.unregister(t);
    t.finalizerRegistered = false;
  }
}

/** The tensor now holds another storage (setData_): the registry must release that one. */
export function rewatch(t: Collectable): void {
  if (!t.finalizerRegistered) return; // still queued: the drain registers its current storage
  registry.unregister(t);
  register(t);
}

/** Frees the storage of every unreachable tensor now, as far as the engine allows (see the header). */
export function collectNow(): void {
  drain();
  if (forceGc()) registry.cleanupSome?.();
}

onMemoryPressure(collectNow);
