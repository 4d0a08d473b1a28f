/** Prints the llm implementation chosen for rmsNorm and siluAndMul under this process's KILN_LLM_POLICY. */
import * as kiln from '../../src/index.js';

console.log(JSON.stringify({ rmsNorm: kiln.llm.llmChoice('llm.rmsNorm').name, siluAndMul: kiln.llm.llmChoice('llm.siluAndMul').name }));
