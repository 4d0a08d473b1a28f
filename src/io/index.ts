/** `kiln.io`: safetensors files and Hugging Face model folders. */
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
export { openHfFolder, HfCheckpoint, type JsonObject } from './hf.js';
