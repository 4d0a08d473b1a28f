/**
 * The device thread's bind groups, made once and reused (issue #20). createBindGroup is the
 * dearest call of a dispatch through Dawn for Node (about 20 us each on the CI machine, against
 * under 2 us for setBindGroup and dispatchWorkgroups together), and a decode step asks for one per
 * dispatch, about a thousand: with a group per dispatch the device thread, not the GPU, set the pace.
 *
 * A dispatch binds its storage buffers (by id) and its metadata words. The words used to live in a
 * buffer made per batch, so no group could outlive its batch; here they are interned in an arena, a
 * buffer that outlives batches: equal words get the same slot, so a dispatch that repeats one of
 * an earlier step (same pipeline, same buffers, same words: every dispatch of a compiled program,
 * and most of an eager loop's, whose allocator hands out the same blocks each step) finds its
 * group made. A new slot's words are written with queue.writeBuffer where they are interned: that
 * runs before the batch's submit, and no earlier command reads a slot not handed out before.
 *
 * Bounds: the arena holds `slots` slots of the storage-offset alignment; when full, a fresh arena
 * replaces it and every group goes (they bind the old one, which is retired after the batch's
 * submit). Groups of a destroyed buffer are dropped with it; past `maxGroups`, all are.
 *
 * The Dawn objects come through `DawnIo`, so the bookkeeping is tested without a device.
 */

/** What the cache needs of the device (the worker passes Dawn's calls; tests pass fakes). */
export interface DawnIo<Buf, Layout, Group> {
  /** A storage buffer of `bytes` for metadata (STORAGE | COPY_DST). */
  createArena(bytes: number): Buf;
  /** queue.writeBuffer(arena, byteOffset, words). */
  writeArena(arena: Buf, byteOffset: number, words: Uint32Array): void;
  /** Destroys an arena after the current batch's submit. */
  retireArena(arena: Buf): void;
  /** createBindGroup: `buffers` at bindings 0..n-1, the arena's range at binding n. */
  createBindGroup(layout: Layout, buffers: readonly number[], arena: Buf, metaOffset: number, metaBytes: number, label: string): Group;
}

interface MetaEntry {
  readonly words: Uint32Array;
  /** Byte offset of its slot in the arena. */
  readonly offset: number;
  readonly bytes: number;
}

interface GroupEntry {
  /** Its key's hash (the bucket it sits in). */
  readonly hash: number;
  readonly pipeline: number;
  readonly buffers: readonly number[];
  readonly metaOffset: number;
  readonly group: unknown;
  dead: boolean;
}

export interface BindGroupStats {
  /** Bind groups made, and dispatches that found theirs made. */
  made: number;
  hits: number;
  /** Metadata slots written, and arenas replaced because full. */
  metaWrites: number;
  arenaResets: number;
}

/** FNV-1a over 32-bit words. */
function mix(h: number, w: number): number {
  return Math.imul(h ^ w, 16777619);
}

export class BindGroupCache<Buf, Layout, Group> {
  private arena: Buf | undefined;
  /** Next free slot of the arena. */
  private used = 0;
  private readonly metas = new Map<number, MetaEntry[]>();
  private readonly groups = new Map<number, GroupEntry[]>();
  private readonly byBuffer = new Map<number, GroupEntry[]>();
  private groupCount = 0;
  readonly stats: BindGroupStats = { made: 0, hits: 0, metaWrites: 0, arenaResets: 0 };

  constructor(
    private readonly io: DawnIo<Buf, Layout, Group>,
    /** Bytes per slot: the device's minStorageBufferOffsetAlignment (a binding's offset must be a multiple). */
    private readonly slotBytes: number,
    private readonly slots = 8192,
    private readonly maxGroups = 1 << 15,
  ) {}

  /**
   * The bind group of a dispatch: pipeline `pipeline` (its layout `layout`), buffer ids
   * `ids[from..from+n)`, metadata `words[at..at+len)`.
   */
  groupFor(pipeline: number, layout: Layout, label: string, ids: ArrayLike<number>, from: number, n: number, words: Uint32Array, at: number, len: number): Group {
    const meta = this.intern(words, at, len);
    let h = mix(mix(0x811c9dc5, pipeline), meta.offset);
    for (let j = 0; j < n; j++) h = mix(h, ids[from + j]!);
    const bucket = this.groups.get(h);
    if (bucket) {
      for (const e of bucket) {
        if (e.pipeline !== pipeline || e.metaOffset !== meta.offset || e.buffers.length !== n) continue;
        let same = true;
        for (let j = 0; j < n && same; j++) same = e.buffers[j] === ids[from + j];
        if (same) {
          this.stats.hits++;
          return e.group as Group;
        }
      }
    }
    const buffers: number[] = new Array<number>(n);
    for (let j = 0; j < n; j++) buffers[j] = ids[from + j]!;
    if (this.groupCount >= this.maxGroups) this.dropGroups();
    const group = this.io.createBindGroup(layout, buffers, this.arena!, meta.offset, meta.bytes, label);
    const e: GroupEntry = { hash: h, pipeline, buffers, metaOffset: meta.offset, group, dead: false };
    const list = this.groups.get(h);
    if (list) list.push(e);
    else this.groups.set(h, [e]);
    for (const id of buffers) {
      const l = this.byBuffer.get(id);
      if (l) l.push(e);
      else this.byBuffer.set(id, [e]);
    }
    this.groupCount++;
    this.stats.made++;
    return group;
  }

  /** Forgets the groups that bind buffer `id` (it is being destroyed). */
  dropBuffer(id: number): void {
    const list = this.byBuffer.get(id);
    if (!list) return;
    this.byBuffer.delete(id);
    for (const e of list) {
      if (e.dead) continue;
      e.dead = true;
      this.groupCount--;
      const bucket = this.groups.get(e.hash);
      const i = bucket ? bucket.indexOf(e) : -1;
      if (i < 0) continue;
      bucket!.splice(i, 1);
      if (bucket!.length === 0) this.groups.delete(e.hash);
    }
  }

  /** Bind groups held now (tests). */
  get size(): number {
    return this.groupCount;
  }

  private dropGroups(): void {
    this.groups.clear();
    this.byBuffer.clear();
    this.groupCount = 0;
  }

  /** The slot holding `words[at..at+len)`, written on first sight. */
  private intern(words: Uint32Array, at: number, len: number): MetaEntry {
    let h = mix(0x811c9dc5, len);
    for (let k = 0; k < len; k++) h = mix(h, words[at + k]!);
    const bucket = this.metas.get(h);
    if (bucket) {
      for (const m of bucket) {
        if (m.words.length !== len) continue;
        let same = true;
        for (let k = 0; k < len && same; k++) same = m.words[k] === words[at + k];
        if (same) return m;
      }
    }
    const slots = Math.max(1, Math.ceil((len * 4) / this.slotBytes));
    if (slots > this.slots) throw new Error(`webgpu: a dispatch's ${len} metadata words do not fit the metadata arena (${this.slots * this.slotBytes} bytes)`);
    if (this.arena === undefined || this.used + slots > this.slots) this.reset();
    const m: MetaEntry = { words: words.slice(at, at + len), offset: this.used * this.slotBytes, bytes: slots * this.slotBytes };
    this.used += slots;
    if (len > 0) this.io.writeArena(this.arena!, m.offset, m.words);
    this.stats.metaWrites++;
    const list = this.metas.get(h);
    if (list) list.push(m);
    else this.metas.set(h, [m]);
    return m;
  }

  /** A fresh arena: the old one (and every group binding it) goes. */
  private reset(): void {
    if (this.arena !== undefined) {
      this.io.retireArena(this.arena);
      this.stats.arenaResets++;
    }
    this.arena = this.io.createArena(this.slots * this.slotBytes);
    this.used = 0;
    this.metas.clear();
    this.dropGroups();
  }
}
