/**
 * Request bodies: read at most `limit` bytes and parse them as one JSON object. A declared
 * Content-Length over the limit is refused before reading anything; a body that grows past it
 * while streaming in is refused as soon as it does. Either way the rest is discarded rather than
 * left unread, so a client still sending gets the 413 instead of a reset connection.
 */
import type { IncomingMessage } from 'node:http';
import { ApiError, badRequest } from './errors.js';

export const DEFAULT_BODY_LIMIT = 1 << 20;

function tooLarge(limit: number): ApiError {
  return new ApiError(413, `the request body is larger than ${limit} bytes`, 'invalid_request_error', null, 'request_too_large');
}

/** The raw body, or a 413 ApiError. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    return Promise.reject(tooLarge(limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    });
    let ended = false;
    req.on('end', () => {
      ended = true;
      if (!over) resolve(Buffer.concat(chunks));
    });
    req.on('error', (e) => reject(e));
    // A client gone mid-body: nothing to answer, but the promise must settle.
    req.on('close', () => {
      if (!ended) reject(new Error('the client closed the connection before the body ended'));
    });
  });
}

/** The body parsed as a JSON object: 400 if it is not JSON or not an object. */
export async function readJsonObject(req: IncomingMessage, limit: number): Promise<Record<string, unknown>> {
  const raw = await readBody(req, limit);
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    throw badRequest(null, `the request body is not valid JSON: ${(e as Error).message}`, 'invalid_json');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw badRequest(null, `the request body must be a JSON object, got ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}`, 'invalid_json');
  }
  return value as Record<string, unknown>;
}
