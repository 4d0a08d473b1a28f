/**
 * Errors in OpenAI's shape: `{ error: { message, type, param, code } }` with an HTTP status. Every
 * check in the server throws an ApiError naming the request field at fault (`param`), so clients
 * (the openai package among them) can show which field was wrong; anything else that escapes a
 * handler becomes a 500 with its message.
 */

export type ErrorType = 'invalid_request_error' | 'authentication_error' | 'not_found_error' | 'rate_limit_error' | 'server_error';

export interface ErrorBody {
  error: { message: string; type: ErrorType; param: string | null; code: string | null };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: ErrorType = 'invalid_request_error',
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  get body(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** 400 for one request field. */
export function badRequest(param: string | null, message: string, code: string | null = null): ApiError {
  return new ApiError(400, message, 'invalid_request_error', param, code);
}

/** Any thrown value as an ApiError (500 unless it already is one). */
export function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new ApiError(500, message, 'server_error', null, null);
}
