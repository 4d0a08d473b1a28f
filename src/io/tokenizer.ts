/**
 * Tokenizers of Hugging Face model folders: tokenizer.json run by @huggingface/tokenizers (a pure
 * JS port of the Rust library), tokenizer_config.json for special tokens and the chat template,
 * generation_config.json for the end-of-sequence ids. encode/decode follow transformers' defaults
 * (special tokens added on encode, kept on decode); ids outside the vocabulary (models pad their
 * embedding past it) decode to nothing, as in the Rust library, so a stray sampled id cannot break
 * a stream. createStreamDecoder() gives the UTF-8-safe incremental decoder of detokenizer.ts.
 */
import { fs, path } from '../platform/index.js';
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import { ChatTemplate, type ChatMessage, type ChatTemplateOptions, type NamedTemplate } from './chat-template.js';
import { StreamDecoder } from './detokenizer.js';

export type { ChatMessage, ChatTemplateOptions } from './chat-template.js';
export { StreamDecoder } from './detokenizer.js';

type Json = Record<string, unknown>;

export interface EncodeOptions {
  /** Add the tokens the post-processor adds (BOS and the like; default true, as transformers). */
  addSpecialTokens?: boolean;
}

export interface DecodeOptions {
  /** Drop special tokens (<|im_end|>, ...) from the text (default false, as transformers). */
  skipSpecialTokens?: boolean;
}

// transformers' special_tokens_map: the attributes passed to chat templates when set.
const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function readJsonFile(file: string, required: boolean): Json | undefined {
  if (!fs.existsSync(file)) {
    if (required) throw new Error(`Tokenizer.fromFolder: ${file} not found (a tokenizer folder needs tokenizer.json)`);
    return undefined;
  }
  let v: unknown;
  try {
    v = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`Tokenizer.fromFolder: cannot read ${file}: ${(e as Error).message}`);
  }
  if (!isObject(v)) throw new Error(`Tokenizer.fromFolder: ${file}: expected a JSON object`);
  return v;
}

/** A special token as tokenizer_config.json writes it: a string, an AddedToken dict, or null. */
function tokenString(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (isObject(v) && typeof v.content === 'string') return v.content;
  return null;
}

export class Tokenizer {
  /** One more than the largest id with a token (vocabulary and added tokens). */
  readonly vocabSize: number;
  /** Ids that end generation: generation_config.json's eos_token_id, else the eos_token's id. */
  readonly eosTokenIds: readonly number[];
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly padToken: string | null;
  /** generation_config.json as read ({} when absent): the model's default sampling settings. */
  readonly generationConfig: Readonly<Json>;
  private readonly hf: HfTokenizer;
  private readonly template: ChatTemplate | null;
  private readonly origin: string;

  /**
   * From parsed tokenizer.json, tokenizer_config.json and generation_config.json objects;
   * `chatTemplate` overrides the config's template (chat_template.jinja).
   */
  static fromJSON(tokenizerJson: object, tokenizerConfig: object = {}, generationConfig: object = {}, chatTemplate?: string): Tokenizer {
    return new Tokenizer(tokenizerJson, tokenizerConfig, generationConfig, chatTemplate, 'Tokenizer.fromJSON', 'the tokenizer config');
  }

  /** From a model folder holding tokenizer.json (tokenizer_config.json, generation_config.json, chat_template.jinja optional). */
  static fromFolder(dir: string): Tokenizer {
    if (typeof dir !== 'string') throw new TypeError(`Tokenizer.fromFolder: dir must be a path string, got ${typeof dir}`);
    if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new Error(`Tokenizer.fromFolder: folder ${dir} does not exist`);
    const tokenizerJson = readJsonFile(path.join(dir, 'tokenizer.json'), true)!;
    const config = readJsonFile(path.join(dir, 'tokenizer_config.json'), false) ?? {};
    const generation = readJsonFile(path.join(dir, 'generation_config.json'), false) ?? {};
    // transformers saves the template as its own file now, and a file there wins over the config's.
    const jinjaFile = path.join(dir, 'chat_template.jinja');
    const jinja = fs.existsSync(jinjaFile) ? fs.readFileSync(jinjaFile, 'utf8') : undefined;
    return new Tokenizer(tokenizerJson, config, generation, jinja, 'Tokenizer.fromFolder', jinja !== undefined ? jinjaFile : path.join(dir, 'tokenizer_config.json'));
  }

  private constructor(tokenizerJson: object, tokenizerConfig: object, generationConfig: object, chatTemplate: string | undefined, fn: string, origin: string) {
    if (!isObject(tokenizerJson) || !isObject(tokenizerJson.model)) {
      throw new TypeError(`${fn}: tokenizerJson must be the parsed tokenizer.json (an object with a 'model'), got ${isObject(tokenizerJson) ? `keys ${Object.keys(tokenizerJson).join(', ')}` : typeof tokenizerJson}`);
    }
    if (!isObject(tokenizerConfig)) throw new TypeError(`${fn}: tokenizerConfig must be an object, got ${typeof tokenizerConfig}`);
    if (!isObject(generationConfig)) throw new TypeError(`${fn}: generationConfig must be an object, got ${typeof generationConfig}`);
    this.origin = origin;
    const json = { added_tokens: [], normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, ...tokenizerJson };
    // Current transformers default: no clean-up of spaces before punctuation on decode.
    const config: Json = { clean_up_tokenization_spaces: false, ...tokenizerConfig };
    try {
      this.hf = new HfTokenizer(json, config);
    } catch (e) {
      throw new Error(`${fn}: cannot build the tokenizer: ${(e as Error).message}`);
    }
    let maxId = -1;
    for (const id of this.hf.get_vocab(true).values()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;
    this.bosToken = tokenString(config.bos_token);
    this.eosToken = tokenString(config.eos_token);
    this.padToken = tokenString(config.pad_token);
    this.generationConfig = generationConfig;
    this.eosTokenIds = this.findEos(fn, generationConfig);

    const special: Json = {};
    for (const k of SPECIAL_TOKEN_KEYS) {
      const s = tokenString(config[k]);
      if (s !== null) special[k] = s;
    }
    if (Array.isArray(config.additional_special_tokens)) special.additional_special_tokens = config.additional_special_tokens.map(tokenString);
    const source = chatTemplate ?? (config.chat_template as string | NamedTemplate[] | undefined);
    if (source !== undefined && source !== null && typeof source !== 'string' && !Array.isArray(source)) {
      throw new TypeError(`${fn}: chat_template in ${origin} must be a string or a list of { name, template }, got ${typeof source}`);
    }
    this.template = source ? new ChatTemplate(source, special, origin) : null;
  }

  private findEos(fn: string, generation: Json): number[] {
    const g = generation.eos_token_id;
    if (g !== undefined && g !== null) {
      const ids = Array.isArray(g) ? g : [g];
      for (const id of ids) {
        if (!Number.isInteger(id)) throw new TypeError(`${fn}: generation_config eos_token_id must be an integer or a list of integers, got ${JSON.stringify(g)}`);
      }
      return ids as number[];
    }
    if (this.eosToken === null) return [];
    const id = this.hf.token_to_id(this.eosToken);
    if (id === undefined) throw new Error(`${fn}: eos_token '${this.eosToken}' of the tokenizer config is not in the vocabulary`);
    return [id];
  }

  /** Token ids of `text`. */
  encode(text: string, options: EncodeOptions = {}): number[] {
    if (typeof text !== 'string') throw new TypeError(`Tokenizer.encode: text must be a string, got ${typeof text}`);
    return this.hf.encode(text, { add_special_tokens: options.addSpecialTokens ?? true }).ids;
  }

  /** Text of `ids`; ids without a token (past the vocabulary) are skipped. */
  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    if (!Array.isArray(ids)) throw new TypeError(`Tokenizer.decode: ids must be an array of token ids, got ${typeof ids}`);
    const known: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!Number.isInteger(id) || id < 0) throw new RangeError(`Tokenizer.decode: ids[${i}] must be a non-negative integer token id, got ${id}`);
      if (id < this.vocabSize && this.hf.id_to_token(id) !== undefined) known.push(id);
    }
    if (known.length === 0) return '';
    return this.hf.decode(known, { skip_special_tokens: options.skipSpecialTokens ?? false });
  }

  tokenToId(token: string): number | undefined {
    return this.hf.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.hf.id_to_token(id);
  }

  /** Whether a chat template was found (tokenizer_config.json or chat_template.jinja). */
  get hasChatTemplate(): boolean {
    return this.template !== null;
  }

  /** The prompt text for a conversation, rendered with the model's chat template. */
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    if (!this.template) throw new Error(`Tokenizer.applyChatTemplate: no chat_template in ${this.origin} (nor a chat_template.jinja beside it)`);
    return this.template.render(messages, options);
  }

  /** An incremental decoder for streaming (see detokenizer.ts): push(id) returns the new text. */
  createStreamDecoder(options: DecodeOptions = {}): StreamDecoder {
    return new StreamDecoder((ids) => this.decode(ids, options));
  }
}
