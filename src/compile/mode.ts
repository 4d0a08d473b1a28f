/**
 * kiln.compile's `mode`, decoded once into named options. The mode string is a cache-key part and
 * a name in messages; everything else reads the options decodeMode returns, so what a mode means
 * is written down here and nowhere else (no `mode === 'max-autotune'` scattered over backends).
 *
 * - 'default': a CUDA graph replaces kernel-by-kernel launches where it measures faster;
 * - 'reduce-overhead': always a CUDA graph, whose static output buffers are returned as they are;
 * - 'max-autotune': every generated kernel's configs are timed on its first real run.
 */

export type CompileMode = 'default' | 'reduce-overhead' | 'max-autotune';

export interface ModeOptions {
  readonly name: CompileMode;
  /** Time every candidate config of each generated kernel on its first real run. */
  readonly tuneOnFirstRun: boolean;
  /** CUDA graphs when KILN_CUDA_GRAPHS does not decide: 'always' replays, 'measure' where faster. */
  readonly cudaGraphs: 'always' | 'measure';
  /** A CUDA graph returns its static output buffers themselves, not clones. */
  readonly aliasOutputs: boolean;
}

const MODES: { readonly [M in CompileMode]: ModeOptions } = {
  default: { name: 'default', tuneOnFirstRun: false, cudaGraphs: 'measure', aliasOutputs: false },
  'reduce-overhead': { name: 'reduce-overhead', tuneOnFirstRun: false, cudaGraphs: 'always', aliasOutputs: true },
  'max-autotune': { name: 'max-autotune', tuneOnFirstRun: true, cudaGraphs: 'measure', aliasOutputs: false },
};

/** Every mode, in the order error messages list them. */
export const COMPILE_MODES = Object.keys(MODES) as readonly CompileMode[];

/** The options of `mode` (undefined: 'default'); an unknown mode is an error naming the allowed ones. */
export function decodeMode(mode: unknown): ModeOptions {
  if (mode === undefined) return MODES.default;
  if (typeof mode === 'string' && Object.hasOwn(MODES, mode)) return MODES[mode as CompileMode];
  throw new Error(`kiln.compile: unknown mode '${String(mode)}' (expected ${COMPILE_MODES.map((m) => `'${m}'`).join(', ').replace(/, ([^,]*)$/, ' or $1')})`);
}
