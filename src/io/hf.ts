/**
 * Hugging Face model folders: `config.json` plus either `model.safetensors` or a sharded
 * checkpoint (`model.safetensors.index.json`, whose `weight_map` names the shard of each tensor).
 * Each shard is opened once, on first use (header only); tensors are read lazily by name.
 */
import { fs, path } from '../platform/index.js';
import type { Tensor } from '../tensor/tensor.js';
import { type GetOptions, openSafetensors, type SafetensorsFile, type TensorInfo } from './safetensors.js';

export type JsonObject = Record<string, unknown>;

function readJson(file: string, what: string): JsonObject {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`hf: cannot read ${what} ${file}: ${(e as Error).message}`);
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`hf: ${file}: malformed JSON: ${(e as Error).message}`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`hf: ${file}: expected a JSON object`);
  return v as JsonObject;
}

/** An opened model folder; close() closes every shard opened so far. */
export class HfCheckpoint {
  readonly folder: string;
  readonly config: JsonObject;
  /** tensor name -> shard file name (relative to the folder). */
  readonly weightMap: ReadonlyMap<string, string>;
  private readonly shards = new Map<string, SafetensorsFile>();

  /** @internal Use openHfFolder. */
  constructor(folder: string) {
    this.folder = folder;
    this.config = readJson(path.join(folder, 'config.json'), 'config');
    const indexFile = path.join(folder, 'model.safetensors.index.json');
    const single = path.join(folder, 'model.safetensors');
    const map = new Map<string, string>();
    if (fs.existsSync(indexFile)) {
      const index = readJson(indexFile, 'index');
      const wm = index.weight_map;
      if (typeof wm !== 'object' || wm === null || Array.isArray(wm)) throw new Error(`hf: ${indexFile}: missing 'weight_map' object`);
      for (const [name, shard] of Object.entries(wm as JsonObject)) {
        if (typeof shard !== 'string') throw new Error(`hf: ${indexFile}: weight_map['${name}'] must be a file name, got ${JSON.stringify(shard)}`);
        if (path.isAbsolute(shard) || shard.split(/[\\/]/).includes('..')) throw new Error(`hf: ${indexFile}: weight_map['${name}'] = '${shard}' points outside the folder`);
        map.set(name, shard);
      }
      for (const shard of new Set(map.values())) {
        if (!fs.existsSync(path.join(folder, shard))) throw new Error(`hf: ${indexFile}: shard '${shard}' named in weight_map does not exist`);
      }
    } else if (fs.existsSync(single)) {
      const f = this.shard('model.safetensors');
      for (const k of f.keys()) map.set(k, 'model.safetensors');
    } else {
      throw new Error(`hf: ${folder}: neither model.safetensors nor model.safetensors.index.json found`);
    }
    this.weightMap = map;
  }

  private shard(file: string): SafetensorsFile {
    let f = this.shards.get(file);
    if (!f) {
      f = openSafetensors(path.join(this.folder, file));
      this.shards.set(file, f);
    }
    return f;
  }

  private locate(name: string): SafetensorsFile {
    const file = this.weightMap.get(name);
    if (file === undefined) throw new Error(`hf: ${this.folder}: no tensor named '${name}' in the checkpoint`);
    const f = this.shard(file);
    if (!f.has(name)) throw new Error(`hf: ${this.folder}: weight_map puts '${name}' in ${file}, but that shard has no such tensor`);
    return f;
  }

  keys(): string[] {
    return [...this.weightMap.keys()];
  }

  has(name: string): boolean {
    return this.weightMap.has(name);
  }

  info(name: string): TensorInfo {
    return this.locate(name).info(name);
  }

  get(name: string, options: GetOptions = {}): Tensor {
    return this.locate(name).get(name, options);
  }

  /** Every tensor (each read on demand, in weight_map order). */
  stateDict(options: GetOptions = {}): Record<string, Tensor> {
    const out: Record<string, Tensor> = {};
    for (const k of this.keys()) out[k] = this.get(k, options);
    return out;
  }

  close(): void {
    for (const f of this.shards.values()) f.close();
    this.shards.clear();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** Opens a Hugging Face model folder (config.json + safetensors weights). */
export function openHfFolder(folder: string): HfCheckpoint {
  return new HfCheckpoint(folder);
}
