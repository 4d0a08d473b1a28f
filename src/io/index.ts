/** `kiln.io`: safetensors files, Hugging Face model folders and their tokenizers. */
export {
  openSafetensors,
  loadSafetensors,
  saveSafetensors,
  SafetensorsFile,
  SafetensorsError,
  SAFETENSORS_DTYPES,
  MAX_HEADER_SIZE,
  type TensorInfo,
  type GetOptions,
} from './safetensors.js';
export { parseSafetensors, type ParseOptions } from './safetensors-bytes.js';
export { saveCheckpoint, loadCheckpoint, type CheckpointParts, type LoadCheckpointTargets, type LoadedCheckpoint } from './checkpoint.js';
export { openHfFolder, HfCheckpoint, type JsonObject } from './hf.js';
export { Tokenizer, StreamDecoder, type EncodeOptions, type DecodeOptions, type ChatMessage, type ChatTemplateOptions } from './tokenizer.js';
