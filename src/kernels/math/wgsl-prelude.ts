/**
 * The WGSL helpers that the WGSL math table (wgsl.ts) calls, for a kernel to prepend: the math
 * library of wgsl-libm/ (its header says why Kiln computes its own sin, exp, log, ... and spells
 * out NaN, infinity and domain edges), selected by what the kernel's source mentions.
 */
import { wgslLibmFor } from './wgsl-libm/index.js';

/** The line a kernel generator writes where the prelude goes, before the body that decides it exists. */
export const PRELUDE_MARK = '// kiln: math prelude';

/**
 * `source` with PRELUDE_MARK replaced by the helpers it uses, transitively (a kernel carries only
 * those, so that shader compilation does not pay for the whole library).
 */
export function withPrelude(source: string): string {
  return source.replace(PRELUDE_MARK, () => wgslLibmFor(source));
}
