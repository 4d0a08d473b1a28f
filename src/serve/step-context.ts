/**
 * StepKv (models/step-kv.ts) over the paged cache for one engine step. Built on the host from each
 * scheduled sequence's block table, cached length and new-token count, then uploaded once and used
 * by every layer:
 *
 * - slot mapping [N] (int64): where each new token's K/V goes; write() is one llm.reshapeAndCache
 *   per layer (a kernel that writes only those rows: indexPut_ on cuda rewrites all of its
 *   destination through a float64 copy, which made a 128-token prefill of Qwen3-0.6B take ~2 s).
 * - per attention group a gather index [rows, S] (int64) over slots, in position order: read() is
 *   one index_select, viewed [rows, S, kvHeads, headDim] and transposed to [rows, kvHeads, S, D].
 * - Groups: consecutive one-token entries (decode, or the last token of a prompt) attend as one
 *   group; shorter rows are padded with their own position-0 slot (always written, so finite) and
 *   masked out, which leaves their softmax unchanged. Each longer chunk (prefill) is its own group:
 *   with nothing cached it is plainly causal; after a cached prefix of c tokens its query i sees
 *   keys j <= c + i (an explicit mask: torch's is_causal aligns top-left and would be wrong).
 */
import { tensor } from '../api/data.js';
import { indexSelect } from '../api/indexing.js';
import { reshapeAndCache } from '../api/llm.js';
import { transpose, view } from '../api/views.js';
import type { AttentionGroup, GroupKv, StepKv } from '../models/step-kv.js';
import type { Tensor } from '../tensor/tensor.js';
import type { PagedKvCache } from './kv-cache.js';

export interface StepEntry {
  readonly blockTable: readonly number[];
  /** Tokens of this sequence already in the cache (the new ones start at this position). */
  readonly contextLen: number;
  /** New tokens this step. */
  readonly numNew: number;
}

interface GroupPlan {
  readonly group: AttentionGroup;
  readonly keyLen: number;
  readonly gather: Tensor;
  readonly mask: Tensor | null;
  readonly causal: boolean;
}

export class PagedStepKv implements StepKv {
  readonly groups: readonly AttentionGroup[];
  readonly numTokens: number;
  private readonly plans: GroupPlan[] = [];
  private readonly slotMapping: Tensor;
  private readonly owned: Tensor[] = [];

  constructor(
    private readonly cache: PagedKvCache,
    entries: readonly StepEntry[],
  ) {
    const device = cache.geometry.device;
    const int64 = (data: number[] | number[][]): Tensor => this.own(tensor(data, { dtype: 'int64', device }));
    const slots: number[] = [];
    for (const e of entries) {
      if (e.numNew < 1) throw new Error(`PagedStepKv: an entry has ${e.numNew} new tokens`);
      if (cache.blocksFor(e.contextLen + e.numNew) > e.blockTable.length) {
        throw new Error(`PagedStepKv: ${e.contextLen + e.numNew} tokens need ${cache.blocksFor(e.contextLen + e.numNew)} blocks, the table has ${e.blockTable.length}`);
      }
      for (let p = e.contextLen; p < e.contextLen + e.numNew; p++) slots.push(cache.slot(e.blockTable, p));
    }
    this.numTokens = slots.length;
    this.slotMapping = int64(slots);
    let start = 0;
    for (let i = 0; i < entries.length; ) {
      let j = i + 1;
      if (entries[i]!.numNew === 1) while (j < entries.length && entries[j]!.numNew === 1) j++;
      const run = entries.slice(i, j);
      const group: AttentionGroup = { start, rows: run.length, queryLen: run[0]!.numNew };
      this.plans.push(this.plan(group, run, int64));
      start += group.rows * group.queryLen;
      i = j;
    }
    this.groups = this.plans.map((p) => p.group);
  }

  private plan(group: AttentionGroup, run: readonly StepEntry[], int64: (d: number[] | number[][]) => Tensor): GroupPlan {
    const device = this.cache.geometry.device;
    const lens = run.map((e) => e.contextLen + e.numNew);
    const S = Math.max(...lens);
    const gather = int64(run.map((e, r) => Array.from({ length: S }, (_, p) => this.cache.slot(e.blockTable, p < lens[r]! ? p : 0))));
    if (group.queryLen === 1) {
      // Decode rows: each query is the row's last position, so it sees all of its own keys.
      const ragged = lens.some((l) => l !== S);
      const mask = ragged ? this.own(tensor(lens.map((l) => [[Array.from({ length: S }, (_, p) => p < l)]]), { dtype: 'bool', device })) : null;
      return { group, keyLen: S, gather, mask, causal: false };
    }
    const { contextLen: c, numNew: T } = run[0]!;
    if (c === 0) return { group, keyLen: S, gather, mask: null, causal: true };
    const rows = Array.from({ length: T }, (_, i) => Array.from({ length: S }, (_, j) => j <= c + i));
    return { group, keyLen: S, gather, mask: this.own(tensor([[rows]], { dtype: 'bool', device })), causal: false };
  }

  write(layer: number, keys: Tensor, values: Tensor): void {
    reshapeAndCache(keys, values, this.cache.keys[layer]!, this.cache.values[layer]!, this.slotMapping);
  }

  read(layer: number, group: number): GroupKv {
    const p = this.plans[group]!;
    const { numKvHeads: h, headDim: d } = this.cache.geometry;
    const take = (slots: Tensor): Tensor => {
      const flat = indexSelect(slots, 0, view(p.gather, [-1]));
      const t = transpose(view(flat, [p.group.rows, p.keyLen, h, d]), 1, 2);
      return t;
    };
    return { keys: take(this.cache.keySlots[layer]!), values: take(this.cache.valueSlots[layer]!), mask: p.mask, causal: p.causal };
  }

  /** Frees the step's index and mask tensors (kiln.scope does it too when the step runs in one). */
  dispose(): void {
    for (const t of this.owned) t.dispose();
  }

  private own(t: Tensor): Tensor {
    this.owned.push(t);
    return t;
  }
}
