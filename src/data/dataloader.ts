/**
 * DataLoader (torch.utils.data.DataLoader): batches of a Dataset in sequential or seeded shuffled
 * order, collated by defaultCollate or a collateFn, through a sync iterator (`for (const b of
 * loader)`) or an async one (`for await (const b of loader)`).
 *
 * Prefetch, and why there are no workers: JS datasets are closures over in-process state and
 * tensors cannot cross threads without copies, so there is no worker pool. Instead the async
 * iterator keeps `prefetch` batches (default 2) in flight beyond the one handed out: their items are
 * requested at once (so a dataset whose `get` returns Promises, a file read or a decode, overlaps
 * those reads with training), and building them starts in a later macrotask, so the work runs
 * while the training loop awaits (a device sync, a log write) rather than inside `next()`. Batches
 * still in flight when the loop breaks are disposed. The sync iterator builds each batch when asked
 * and needs a dataset whose `get` returns plain values.
 *
 * Shuffling draws a fresh permutation (Fisher-Yates) from `generator` at the start of every pass,
 * so a loader seeded with `new kiln.Generator(seed)` gives the same sequence of epochs every run
 * (the default is the global generator, which kiln.manualSeed resets).
 */
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import { defaultGenerator, type Generator } from '../tensor/random.js';
import { Tensor } from '../tensor/tensor.js';
import { defaultCollate, type Collated } from './collate.js';
import type { Dataset } from './dataset.js';

export interface DataLoaderOptions<T, B> {
  /** Samples per batch (default 1). */
  batchSize?: number;
  /** Reshuffle the order at every pass (default false). */
  shuffle?: boolean;
  /** The source of shuffled orders (default: the global generator). */
  generator?: Generator;
  /** Drop the last batch when it is smaller than batchSize (default false). */
  dropLast?: boolean;
  /** Makes a batch from a list of samples (default: defaultCollate). */
  collateFn?: (samples: T[]) => B;
  /** Async iteration: batches prepared ahead of the one handed out (default 2; 0 = none). */
  prefetch?: number;
}

const LOADER_KEYS = keysOf<DataLoaderOptions<unknown, unknown>>({ batchSize: true, shuffle: true, generator: true, dropLast: true, collateFn: true, prefetch: true });

function disposeTensors(v: unknown): void {
  if (v instanceof Tensor) {
    if (!v.isDisposed) v.dispose();
  } else if (Array.isArray(v)) v.forEach(disposeTensors);
  else if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) Object.values(v).forEach(disposeTensors);
}

export class DataLoader<T, B = Collated<T>> implements Iterable<B>, AsyncIterable<B> {
  readonly batchSize: number;
  readonly shuffle: boolean;
  readonly dropLast: boolean;
  readonly prefetch: number;
  private readonly generator: Generator;
  private readonly collateFn: ((samples: T[]) => B) | null;

  constructor(
    readonly dataset: Dataset<T>,
    options: DataLoaderOptions<T, B> = {},
  ) {
    checkOptionKeys('DataLoader', options, LOADER_KEYS);
    if (dataset === null || typeof dataset !== 'object' || typeof dataset.get !== 'function' || !Number.isInteger(dataset.length) || dataset.length < 0) {
      throw new TypeError('DataLoader: dataset must have an integer length >= 0 and a get(index) method');
    }
    this.batchSize = options.batchSize ?? 1;
    if (!Number.isInteger(this.batchSize) || this.batchSize < 1) throw new Error(`DataLoader: batchSize must be a positive integer, got ${this.batchSize}`);
    this.prefetch = options.prefetch ?? 2;
    if (!Number.isInteger(this.prefetch) || this.prefetch < 0) throw new Error(`DataLoader: prefetch must be a non-negative integer, got ${this.prefetch}`);
    this.shuffle = options.shuffle ?? false;
    this.dropLast = options.dropLast ?? false;
    if (options.generator !== undefined && !this.shuffle) throw new Error('DataLoader: a generator was given but shuffle is false; it would be unused');
    this.generator = options.generator ?? defaultGenerator;
    this.collateFn = options.collateFn ?? null;
  }

  /** Batches per pass. */
  get length(): number {
    const n = this.dataset.length;
    return this.dropLast ? Math.floor(n / this.batchSize) : Math.ceil(n / this.batchSize);
  }

  /** The sample indices of each batch of one pass (draws a permutation when shuffling). */
  private batchIndices(): number[][] {
    const n = this.dataset.length;
    const order = Array.from({ length: n }, (_, i) => i);
    if (this.shuffle) {
      for (let i = n - 1; i > 0; i--) {
        const j = this.generator.nextInt(0, i + 1);
        [order[i], order[j]] = [order[j]!, order[i]!];
      }
    }
    const out: number[][] = [];
    for (let b = 0; b < this.length; b++) out.push(order.slice(b * this.batchSize, (b + 1) * this.batchSize));
    return out;
  }

  private collate(samples: T[]): B {
    return this.collateFn ? this.collateFn(samples) : (defaultCollate(samples) as B);
  }

  private batchedRead(): boolean {
    return this.collateFn === null && typeof this.dataset.getBatch === 'function';
  }

  *[Symbol.iterator](): Iterator<B> {
    for (const indices of this.batchIndices()) {
      if (this.batchedRead()) {
        const b = this.dataset.getBatch!(indices);
        if (b instanceof Promise) throw new TypeError('DataLoader: dataset.getBatch returned a Promise; iterate with `for await`');
        yield b as unknown as B;
        continue;
      }
      const samples = indices.map((i) => {
        const s = this.dataset.get(i);
        if (s instanceof Promise) throw new TypeError(`DataLoader: dataset.get(${i}) returned a Promise; iterate with \`for await\``);
        return s;
      });
      yield this.collate(samples);
    }
  }

  private async build(indices: number[]): Promise<B> {
    // Item reads start now (async datasets overlap their I/O); the synchronous work (a sync get,
    // collate) waits for a later macrotask, so it runs while the consumer is awaiting.
    if (this.batchedRead()) {
      await new Promise((r) => setImmediate(r));
      return (await this.dataset.getBatch!(indices)) as unknown as B;
    }
    const reads = indices.map((i) => this.dataset.get(i));
    await new Promise((r) => setImmediate(r));
    return this.collate(await Promise.all(reads));
  }

  async *[Symbol.asyncIterator](): AsyncIterator<B> {
    const batches = this.batchIndices();
    const pending: Promise<B>[] = [];
    let next = 0;
    const launch = (): void => {
      const p = this.build(batches[next++]!);
      // A prefetched batch may fail before it is awaited; the error is raised when it is.
      p.catch(() => undefined);
      pending.push(p);
    };
    try {
      while (pending.length > 0 || next < batches.length) {
        while (next < batches.length && pending.length < this.prefetch + 1) launch();
        const batch = await pending.shift()!;
        yield batch;
      }
    } finally {
      // The loop ended early (break, throw): nobody will receive the batches still in flight.
      for (const p of pending) p.then(disposeTensors, () => undefined);
    }
  }
}
