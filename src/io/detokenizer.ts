/**
 * Incremental detokenization for streaming: token ids arrive one at a time and the text must come
 * out as it grows, without ever emitting half of a multi-byte character. Byte-level BPE vocabularies
 * (GPT-2, Llama 3, Qwen) split rare characters and emoji over several tokens, and decoding such a
 * prefix alone yields U+FFFD.
 *
 * The method is the one of text-generation-inference and vLLM: keep two offsets into the ids,
 * `prefix` (where the decoded window starts) and `read` (where the text already emitted ends).
 * Each push decodes ids[prefix:read] and ids[prefix:]; when the second is longer and does not end in
 * U+FFFD, the difference is new text, and both offsets move up. Decoding a short window instead of
 * all ids keeps a push O(window) and still gives the decoder the left context that some decoders
 * (leading-space handling) need. Concatenating every push and flush() equals decoding all ids at
 * once for decoders that map each token to bytes independently (byte-level BPE, byte fallback).
 */

/** Decodes a list of ids to text; `decode([])` must be ''. */
export type DecodeFn = (ids: readonly number[]) => string;

const REPLACEMENT = '\uFFFD';

export class StreamDecoder {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;

  constructor(private readonly decode: DecodeFn) {}

  /** All ids pushed so far. */
  get tokenIds(): readonly number[] {
    return this.ids;
  }

  /** Adds one id; returns the text it completes ('' while a character is still incomplete). */
  push(id: number): string {
    this.ids.push(id);
    const prefixText = this.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const newText = this.decode(this.ids.slice(this.prefixOffset));
    if (newText.length > prefixText.length && !newText.endsWith(REPLACEMENT)) {
      this.prefixOffset = this.readOffset;
      this.readOffset = this.ids.length;
      return newText.slice(prefixText.length);
    }
    return '';
  }

  /**
   * The text still held back (bytes that never completed a character decode to U+FFFD here, as
   * they do when decoding all ids at once); the decoder then starts afresh after the last id.
   */
  flush(): string {
    const prefixText = this.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const newText = this.decode(this.ids.slice(this.prefixOffset));
    this.prefixOffset = this.readOffset = this.ids.length;
    return newText.length > prefixText.length ? newText.slice(prefixText.length) : '';
  }
}
