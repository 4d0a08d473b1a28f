/**
 * A model's cpu weights moved into huge-page mappings at load time (KILN_CPU_HUGE_PAGES, default
 * on; kernels/cpu/native/huge-pages.ts says why and what it measured). Called when a Qwen3 model is
 * built or loaded and after `to()`, before any program could have captured a weight's old
 * memory. Each parameter storage of at least 2 MiB is copied once; tied weights share a storage
 * and move once. Anywhere huge pages are not available the weights stay as they are.
 */
import { HUGE_PAGE_MIN_BYTES, moveStorageToHugePages } from '../kernels/cpu/native/huge-pages.js';
import type { Module } from '../nn/module.js';
import { getOption } from '../runtime/config.js';
import type { Storage } from '../tensor/storage.js';

export interface HugePageMove {
  /** Storages moved, and their bytes. */
  moved: number;
  bytes: number;
  /** Why the first storage that qualified stayed (none: every one moved, or none qualified). */
  reason?: string;
}

export function moveWeightsToHugePages(module: Module): HugePageMove {
  const result: HugePageMove = { moved: 0, bytes: 0 };
  if (!getOption('KILN_CPU_HUGE_PAGES')) return result;
  const seen = new Set<Storage>();
  for (const p of module.parameters()) {
    const s = p.storage;
    if (seen.has(s) || s.device.type !== 'cpu' || s.nbytes < HUGE_PAGE_MIN_BYTES || s.isLent) continue;
    seen.add(s);
    const r = moveStorageToHugePages(s);
    if (r === true) {
      result.moved++;
      result.bytes += s.nbytes;
    } else if (r === 'already in huge pages') {
      continue; // to() kept this storage (same dtype and device)
    } else {
      result.reason ??= r;
      // Unavailable here (no Linux, no THP, no koffi): the rest would fail alike.
      break;
    }
  }
  return result;
}
