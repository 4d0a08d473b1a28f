/** The OpenAI-compatible HTTP server (`kiln serve`): createServer and its parts. */
export { createServer, DEFAULT_HOST, DEFAULT_PORT, DEFAULT_MAX_QUEUE, DEFAULT_SHUTDOWN_MS, type ServerOptions, type KilnServer, type ListenAddress, type CloseOptions } from './server.js';
export { ApiError, type ErrorBody, type ErrorType } from './errors.js';
export { EngineLoop, DEFAULT_MAX_SLICE_MS, type LoopClient, type LoopRequest, type StepInfo, type EngineLoopOptions } from './engine-loop.js';
export { ServerMetrics } from './metrics.js';
export { StopMatcher, type StopResult } from './stop-matcher.js';
export { DEFAULT_BODY_LIMIT } from './body.js';
