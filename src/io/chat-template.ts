/**
 * Chat templates: the Jinja template a model folder ships (tokenizer_config.json's `chat_template`,
 * or chat_template.jinja beside it) rendered with @huggingface/jinja and the variables transformers'
 * apply_chat_template passes: `messages`, `tools` and `documents` (none unless given),
 * `add_generation_prompt`, the special-token strings (bos_token, eos_token, ...), then the caller's
 * extra variables. `enable_thinking` is passed only when set, because templates test
 * `enable_thinking is defined`.
 */
import { Template } from '@huggingface/jinja';

export interface ChatMessage {
  role: string;
  content: string;
  /** Other fields templates read (reasoning_content, tool_calls, name, ...). */
  [key: string]: unknown;
}

export interface ChatTemplateOptions {
  /** Append the header that starts the assistant's turn (default false, as transformers). */
  addGenerationPrompt?: boolean;
  /** Qwen3-style switch; passed as `enable_thinking` only when given. */
  enableThinking?: boolean;
  /** Tool schemas (`tools`); none by default. */
  tools?: readonly unknown[];
  /** Retrieval documents (`documents`); none by default. */
  documents?: readonly unknown[];
  /** Further template variables (transformers' **kwargs); they override the ones above. */
  templateKwargs?: Readonly<Record<string, unknown>>;
}

/** A template named in a list, as tokenizer_config.json may hold several ('default', 'tool_use'). */
export interface NamedTemplate {
  name: string;
  template: string;
}

export class ChatTemplate {
  private readonly compiled = new Map<string, Template>();
  private readonly templates: ReadonlyMap<string, string>;

  /**
   * `source`: one template, or named ones; `specialTokens`: the strings passed as variables
   * (bos_token, eos_token, ...); `origin`: where the template came from, for error messages.
   */
  constructor(
    source: string | readonly NamedTemplate[],
    private readonly specialTokens: Readonly<Record<string, unknown>>,
    private readonly origin: string,
  ) {
    const map = new Map<string, string>();
    if (typeof source === 'string') map.set('default', source);
    else for (const t of source) map.set(t.name, t.template);
    this.templates = map;
  }

  /** The template text used for these options (transformers' choice: 'tool_use' when tools are given and it exists). */
  source(options: ChatTemplateOptions = {}): string {
    const name = options.tools && this.templates.has('tool_use') ? 'tool_use' : 'default';
    const t = this.templates.get(name);
    if (t === undefined) {
      throw new Error(`applyChatTemplate: ${this.origin} has no '${name}' chat template (it has: ${[...this.templates.keys()].join(', ')})`);
    }
    return t;
  }

  render(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    if (!Array.isArray(messages)) throw new TypeError(`applyChatTemplate: messages must be an array of { role, content }, got ${typeof messages}`);
    messages.forEach((m, i) => {
      if (typeof m !== 'object' || m === null || typeof m.role !== 'string') {
        throw new TypeError(`applyChatTemplate: messages[${i}] must be an object with a string 'role', got ${JSON.stringify(m)}`);
      }
    });
    const text = this.source(options);
    let template = this.compiled.get(text);
    if (!template) {
      try {
        template = new Template(text);
      } catch (e) {
        throw new Error(`applyChatTemplate: cannot parse the chat template of ${this.origin}: ${(e as Error).message}`);
      }
      this.compiled.set(text, template);
    }
    const vars: Record<string, unknown> = {
      messages,
      tools: options.tools ?? null,
      documents: options.documents ?? null,
      add_generation_prompt: options.addGenerationPrompt ?? false,
      ...this.specialTokens,
    };
    if (options.enableThinking !== undefined) vars.enable_thinking = options.enableThinking;
    Object.assign(vars, options.templateKwargs ?? {});
    try {
      return template.render(vars);
    } catch (e) {
      throw new Error(`applyChatTemplate: rendering the chat template of ${this.origin} failed: ${(e as Error).message}`);
    }
  }
}
