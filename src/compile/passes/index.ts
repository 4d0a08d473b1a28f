/**
 * The pass pipeline run on every captured graph before the backend sees it:
 * DCE -> CSE -> constant folding -> (conv+BatchNorm fold) -> (pattern rewrites) -> (horizontal linear
 * fusion, lifted-cat constants) -> (q/k norm + rotary fusion) -> (decompositions) -> CSE -> DCE.
 * Every pass keeps the graph's semantics (interpret(before) equals interpret(after)).
 */
import type { Tensor } from '../../tensor/tensor.js';
import type { Graph } from '../ir.js';
import { commonSubexpressionElimination } from './cse.js';
import { foldConvBatchNorm } from './conv-bn.js';
import { deadCodeElimination } from './dce.js';
import { decompose } from './decompose.js';
import { constantFolding } from './fold.js';
import { horizontalLinearFusion } from './horizontal.js';
import { liftedCatConstants } from './lifted-cat.js';
import { registeredGraphPass, registeredRewriteRules } from './extensions.js';
import { applyRewrites, defaultRewriteRules, type RewriteRule } from './rewrite.js';

export { deadCodeElimination } from './dce.js';
export { commonSubexpressionElimination } from './cse.js';
export { constantFolding, FOLD_LIMIT, type FoldResult } from './fold.js';
export { decompose, registerDecomposition, getDecomposition, listDecompositions, type Decomposition } from './decompose.js';
export { applyRewrites, matchNode, siluRule, defaultRewriteRules, P, Match, type RewriteRule, type OpPattern, type PatternArg } from './rewrite.js';
export { GraphBuilder, Val, isImpure, isMutating, isRandom } from './util.js';
export { registerRewriteRules, registeredRewriteRules, registerGraphPass, registeredGraphPass, type RewriteSet, type PassSlot } from './extensions.js';
export { graphSignature } from './signature.js';
export { horizontalLinearFusion, ConcatConstant, type HorizontalFusionResult } from './horizontal.js';
export { liftedCatConstants, type LiftedCatResult } from './lifted-cat.js';
export { foldConvBatchNorm } from './conv-bn.js';

export interface PassOptions {
  dce?: boolean;
  cse?: boolean;
  constantFolding?: boolean;
  /** Decompose composite ops to the core set (default: on for code-generating backends). */
  decompose?: boolean;
  /** conv2d -> eval batchNorm [-> relu] into conv2dBatchNorm (inference graphs only; default off). */
  foldConvBn?: boolean;
  /** Pattern rewrite rules applied before decompositions (default: none; 'default' = silu and the registered 'library' rules). */
  rewrites?: readonly RewriteRule[] | 'default';
  /**
   * Merge linears that share an input into one GEMM over concatenated weights (passes/horizontal.ts),
   * and make concatenations of lifted tensors derived constants (passes/lifted-cat.ts: the MoE
   * block's stacked expert weights). Only valid for programs run without grad; kiln.compile turns
   * it on for its inference programs.
   */
  horizontalFusion?: boolean;
  /**
   * Per-head q/k rmsNorm -> llm.applyRotaryEmb chains onto one llm.qkNormRotary launch per pair
   * (the pass src/llm registers in slot 'qkNormRotary'; needs the rotary rewrite first). No backward: inference only.
   */
  qkNormRotary?: boolean;
  /**
   * llm.qkNormRotary + llm.reshapeAndCache pairs of a decode step onto one llm.qkNormRotaryCache
   * (slot 'qkNormRotaryCache', run after 'qkNormRotary'). Inference only; kiln.compile turns it on by
   * default (KILN_QK_NORM_ROTARY_CACHE=0: off).
   */
  qkNormRotaryCache?: boolean;
  /**
   * A SwiGLU MLP's concatenated gate/up linear and silu * mul onto one llm.linearSiluAndMul (slot
   * 'linearSiluMul', after horizontal fusion). Inference only; kiln.compile turns it on by
   * default (KILN_LINEAR_SILU_MUL=0: off).
   */
  linearSiluMul?: boolean;
  /**
   * [residual add ->] rmsNorm -> linear (or llm.linearSiluAndMul) onto one llm.addRmsNormLinear:
   * the norm in the bf16 GEMV's prologue (slot 'addRmsNormLinear', after 'linearSiluMul', so the
   * gated linear is matched too). Inference only; kiln.compile runs it unless KILN_ADD_RMSNORM_LINEAR=0
   * (it fires on webgpu at one row, and everywhere the kernels take with KILN_ADD_RMSNORM_LINEAR=1).
   */
  addRmsNormLinear?: boolean;
  /**
   * A linear whose only reader is a GELU onto one llm.linearGelu, where a device has its kernel
   * (webgpu: the GELU in the GEMM's epilogue; slot 'linearGelu', after 'addRmsNormLinear', whose
   * matches keep their linear). Inference only; kiln.compile turns it on by default
   * (KILN_LINEAR_GELU=0: off).
   */
  linearGelu?: boolean;
}

/** What kiln.compile adds to the user's switches (not a `passes` option). */
export interface PipelineOptions extends PassOptions {
  /** Composite ops the decompositions leave whole (the target renders them natively; target.ts). */
  keepComposites?: ReadonlySet<string>;
  /**
   * The graph's sizes may become symbolic (compile/symbolic.ts): constant folding leaves view and
   * factory nodes in the graph (it still folds what reads them), since folding them would bake
   * their sizes into constant inputs.
   */
  symbolicSizes?: boolean;
  /**
   * With addRmsNormLinear: run its webgpu-only form (slot 'addRmsNormLinearWebgpu'), kiln.compile's
   * default when KILN_ADD_RMSNORM_LINEAR is unset (decided when the function is compiled).
   */
  addRmsNormLinearWebgpuOnly?: boolean;
}

export interface PassResult {
  graph: Graph;
  /** Tensors whose values were baked in by constant folding, with the storage version seen. */
  foldedSources: { tensor: Tensor; version: number }[];
}

export function runPasses(g: Graph, o: PipelineOptions = {}): PassResult {
  let graph = g;
  let foldedSources: PassResult['foldedSources'] = [];
  if (o.dce !== false) graph = deadCodeElimination(graph);
  if (o.cse !== false) graph = commonSubexpressionElimination(graph);
  if (o.constantFolding !== false) {
    const r = constantFolding(graph, { keepSized: o.symbolicSizes === true });
    graph = r.graph;
    foldedSources = r.foldedSources;
  }
  // Before decompositions, which would turn the batchNorm into pointwise ops.
  if (o.foldConvBn === true) graph = foldConvBatchNorm(graph).graph;
  const rules = o.rewrites === 'default' ? [...defaultRewriteRules, ...registeredRewriteRules('library')] : (o.rewrites ?? []);
  if (rules.length > 0) graph = applyRewrites(graph, rules).graph;
  if (o.horizontalFusion === true) {
    graph = horizontalLinearFusion(graph).graph;
    graph = liftedCatConstants(graph).graph;
  }
  const qkNormRotary = o.qkNormRotary === true ? registeredGraphPass('qkNormRotary') : undefined;
  if (qkNormRotary) graph = qkNormRotary(graph);
  const qkNormRotaryCache = o.qkNormRotaryCache === true ? registeredGraphPass('qkNormRotaryCache') : undefined;
  if (qkNormRotaryCache) graph = qkNormRotaryCache(graph);
  const linearSiluMul = o.linearSiluMul === true ? registeredGraphPass('linearSiluMul') : undefined;
  if (linearSiluMul) graph = linearSiluMul(graph);
  const addRmsNormLinear = o.addRmsNormLinear === true ? registeredGraphPass(o.addRmsNormLinearWebgpuOnly === true ? 'addRmsNormLinearWebgpu' : 'addRmsNormLinear') : undefined;
  if (addRmsNormLinear) graph = addRmsNormLinear(graph);
  const linearGelu = o.linearGelu === true ? registeredGraphPass('linearGelu') : undefined;
  if (linearGelu) graph = linearGelu(graph);
  if (o.decompose === true) {
    graph = decompose(graph, o.keepComposites ? { keep: o.keepComposites } : {});
    if (o.cse !== false) graph = commonSubexpressionElimination(graph);
  }
  if (o.dce !== false) graph = deadCodeElimination(graph);
  return { graph, foldedSources };
}
