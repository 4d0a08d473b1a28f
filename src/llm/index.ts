/**
 * kiln.llm: the LLM kernel library. Public op functions (rmsNorm, fusedAddRmsNorm, siluAndMul,
 * rotaryEmbedding, MoE routing and compute, mHC), the manifest of compiler contracts, the dispatch
 * policy (prefer/deny/order, freeze/thaw, llmManifestHash for cache keys), opcheck, and the
 * compiler's rewrite rules to library ops. Loading it registers the reference implementations and
 * the manifest; the ops and CPU kernels load with the op registry and the CPU kernel library.
 */
import './reference.js';
import './backward.js';
import './library.js';
import './decompositions.js';
import './compiler-passes.js';

export * from '../api/llm.js';
export { manifestEntries, manifestEntry, registerManifestEntry, type CompileKind, type DynamicDim, type ManifestEntry } from '../ops/library/manifest.js';
export {
  freezeLlmPolicy,
  getLlmPolicy,
  isLlmPolicyFrozen,
  llmChoice,
  llmImpls,
  llmManifestHash,
  registerLlmImpl,
  resetLlmPolicy,
  setLlmPolicy,
  thawLlmPolicy,
  type ImplFn,
  type ImplKind,
  type LlmImpl,
  type LlmPolicy,
} from '../ops/library/policy.js';
export { opcheck, OpcheckError, type OpcheckOptions, type OpcheckReport, type OpcheckSample } from './opcheck.js';
export { hasReference } from './reference.js';
