/** Plain replies: JSON bodies, text bodies, and OpenAI-shaped errors. */
import type { ServerResponse } from 'node:http';
import { type ApiError, toApiError } from './errors.js';

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const data = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data), ...headers });
  res.end(data);
}

export function sendText(res: ServerResponse, status: number, text: string, contentType: string): void {
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** The error as JSON, unless the response has already started (then the connection is ended). */
export function sendError(res: ServerResponse, e: unknown, headers: Record<string, string> = {}): ApiError {
  const err = toApiError(e);
  if (res.headersSent) {
    res.end();
    return err;
  }
  // 413: the body was not read to its end; closing keeps the rest from being taken as a request.
  sendJson(res, err.status, err.body, err.status === 413 ? { Connection: 'close', ...headers } : headers);
  return err;
}
