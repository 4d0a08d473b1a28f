/**
 * A model's cpu weights moved into huge-page mappings at load time (KILN_CPU_HUGE_PAGES, default
 * on; kernels/cpu/native/huge-pages.ts says why and what it measured). Called when a Qwen3 model is
 * built or loaded and after `to()`, before any program could have captured a weight's old
 * memory. Each parameter storage of at least 2 MiB is copied once; tied weights share a storage
 * and move once. Anywhere huge pages are not available the weights stay as they are.
 */
import { hugePagesAvailable, moveStorageToHugePages } from '../kernels/cpu/native/huge-pages.js';
import type { Module } from '../nn/module.js';
import { getOption } from '../runtime/config.js';
import type { Storage } from '../tensor/storage.js';

export function moveWeightsToHugePages(module: Module): void {
  if (!getOption('KILN_CPU_HUGE_PAGES') || hugePagesAvailable() !== true) return;
  const seen = new Set<Storage>();
  for (const p of module.parameters()) {
    if (seen.has(p.storage)) continue;
    seen.add(p.storage);
    // Storages that do not qualify (small, not cpu, already moved) say why and stay.
    moveStorageToHugePages(p.storage);
  }
}
