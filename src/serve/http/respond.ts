/**
 * Sends a Generation's result, as one JSON response or as server-sent events (stream: true):
 * `data: {chunk}\n\n` per delta in the endpoint's chunk shape, then the usage chunk when
 * stream_options.include_usage asked for it, then `data: [DONE]\n\n`. Headers go out at once for a
 * stream, so a client sees the stream open before the first token. If the engine fails mid-stream
 * the error is sent as a last event (OpenAI's error shape) before [DONE]. Deltas are gathered,
 * then formatted and written together when the engine loop flushes (once per slice of steps: one
 * socket write per client, not one per token), in the order they were made; the last ones go with
 * the end. When the
 * client closes the connection first, the generation is cancelled, which frees its engine requests
 * at once.
 */
import type { ServerResponse } from 'node:http';
import type { ChoiceDecoder, ChoiceDelta } from './choice.js';
import { toApiError } from './errors.js';
import type { Generation, Usage } from './generation.js';
import { sendError, sendJson } from './reply.js';

export interface Formatter {
  /** Chunks sent when the stream opens (chat: each choice's role). */
  opening(choices: readonly ChoiceDecoder[]): object[];
  /** The chunk for one delta. */
  chunk(choice: ChoiceDecoder, delta: ChoiceDelta): object;
  /** The usage-only chunk (stream_options.include_usage). */
  usageChunk(usage: Usage): object;
  /** The whole non-streamed response. */
  response(choices: readonly ChoiceDecoder[], usage: Usage): object;
}

export interface StreamOptions {
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

/** One server-sent event. */
function event(data: object | string): string {
  return `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}

/**
 * Starts `gen` and answers with it; resolves when the response has ended (or the client left).
 * If gen.start refuses the request (400, 429, 503) nothing has been sent yet: the promise rejects
 * with that error and the caller answers it as JSON.
 */
export function respond(res: ServerResponse, gen: Generation, options: StreamOptions, fmt: Formatter): Promise<void> {
  return new Promise((resolve) => {
    let finished = false;
    res.on('close', () => {
      if (!finished) gen.cancel();
      resolve();
    });
    if (!options.stream) {
      gen.start({
        onDelta: () => {},
        onDone: (error) => {
          finished = true;
          if (error) sendError(res, error);
          else sendJson(res, 200, fmt.response(gen.choices, gen.usage));
        },
      });
      return;
    }
    // Submit before the headers, so that a refusal is still a plain JSON error; outputs only
    // come from later steps, after the headers below.
    // Deltas made and not yet written. They are formatted when written, in the order they came
    // (the formatters keep per-choice offsets): on a GPU the flush runs while the next step
    // computes (engine-loop.ts), so the JSON work overlaps it too.
    let deltas: [ChoiceDecoder, ChoiceDelta][] = [];
    const drain = (): string => {
      let text = '';
      for (const [choice, delta] of deltas) text += event(fmt.chunk(choice, delta));
      deltas = [];
      return text;
    };
    gen.start({
      onDelta: (choice, delta) => {
        if (!res.writableEnded) deltas.push([choice, delta]);
      },
      onFlush: () => {
        const text = drain();
        if (text.length > 0 && !res.writableEnded) res.write(text);
      },
      onDone: (error) => {
        finished = true;
        if (res.writableEnded) return;
        let text = drain();
        if (error) text += event(toApiError(error).body);
        else if (options.includeUsage) text += event(fmt.usageChunk(gen.usage));
        text += event('[DONE]');
        res.end(text);
      },
    });
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    const opening = fmt.opening(gen.choices).map(event).join('');
    if (opening.length > 0) res.write(opening);
  });
}
