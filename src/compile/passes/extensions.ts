/**
 * Graph rewrites and passes contributed by layers above the compiler (today the LLM kernel
 * library, src/llm): they register here at import, so the compiler never imports them and the
 * layer order (docs/architecture.md) has no back-edge. Two kinds:
 *
 * - rewrite rules, either `library` rules (applied when a caller asks for the 'default' rule set)
 *   or `auto` rules (also run by kiln.compile on every code-generating backend because they always
 *   pay); each set keeps its registration order, which is the order rules are tried;
 * - named graph passes in fixed slots of the pipeline (`qkNormRotary`, then `qkNormRotaryCache`, then `linearSiluMul`, then `addRmsNormLinear`
 *   or its webgpu-only form `addRmsNormLinearWebgpu`); runPasses runs a slot only
 *   when its option is on and something is registered in it.
 */
import type { Graph } from '../ir.js';
import type { RewriteRule } from './rewrite.js';

export type RewriteSet = 'library' | 'auto';

/** The pipeline's pass slots a higher layer may fill (see passes/index.ts for where each runs). */
export type PassSlot = 'qkNormRotary' | 'qkNormRotaryCache' | 'linearSiluMul' | 'addRmsNormLinear' | 'addRmsNormLinearWebgpu' | 'linearGelu';

const rules: Record<RewriteSet, RewriteRule[]> = { library: [], auto: [] };
const passes = new Map<PassSlot, (g: Graph) => Graph>();

export function registerRewriteRules(set: RewriteSet, added: readonly RewriteRule[]): void {
  rules[set].push(...added);
}

/** The rules registered in a set, in registration order. */
export function registeredRewriteRules(set: RewriteSet): readonly RewriteRule[] {
  return rules[set];
}

export function registerGraphPass(slot: PassSlot, pass: (g: Graph) => Graph): void {
  if (passes.has(slot)) throw new Error(`registerGraphPass: slot '${slot}' already has a pass`);
  passes.set(slot, pass);
}

/** The pass registered in a slot, or undefined. */
export function registeredGraphPass(slot: PassSlot): ((g: Graph) => Graph) | undefined {
  return passes.get(slot);
}
