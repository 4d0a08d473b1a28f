/**
 * The server's metrics (GET /metrics), all prefixed `kiln_`: requests by endpoint and status,
 * prompt and generated tokens, time to first token and request latency (histograms, seconds),
 * running and waiting requests, the last engine step's size, and KV cache blocks in use and in
 * all. Gauges read the engine when scraped, so they are never stale.
 */
import type { EngineLoop, StepInfo } from './engine-loop.js';
import { Counter, Gauge, Histogram, Registry } from './prometheus.js';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export class ServerMetrics {
  readonly registry = new Registry();
  readonly requests: Counter;
  readonly promptTokens: Counter;
  readonly generationTokens: Counter;
  readonly timeToFirstToken: Histogram;
  readonly requestLatency: Histogram;
  readonly steps: Counter;
  private last: StepInfo = { tokens: 0, sequences: 0, seconds: 0 };

  constructor(loop: EngineLoop) {
    const r = this.registry;
    const cache = loop.engine.cache;
    this.requests = r.add(new Counter('kiln_requests_total', 'HTTP requests answered, by endpoint and status code.'));
    this.promptTokens = r.add(new Counter('kiln_prompt_tokens_total', 'Prompt tokens of the generation requests admitted.'));
    this.generationTokens = r.add(new Counter('kiln_generation_tokens_total', 'Tokens generated.'));
    this.timeToFirstToken = r.add(new Histogram('kiln_time_to_first_token_seconds', 'From the request arriving to its first generated token.', LATENCY_BUCKETS));
    this.requestLatency = r.add(new Histogram('kiln_request_latency_seconds', 'From a generation request arriving to its last byte sent.', LATENCY_BUCKETS));
    this.steps = r.add(new Counter('kiln_engine_steps_total', 'Engine steps run.'));
    r.add(new Gauge('kiln_requests_running', 'Engine requests running (admitted, with cache blocks).', () => loop.numRunning));
    r.add(new Gauge('kiln_requests_waiting', 'Engine requests waiting for admission.', () => loop.numWaiting));
    r.add(new Gauge('kiln_last_step_tokens', 'Tokens the last engine step ran (prefill and decode): its batch size in tokens.', () => this.last.tokens));
    r.add(new Gauge('kiln_last_step_sequences', 'Requests that got a token in the last engine step.', () => this.last.sequences));
    r.add(new Gauge('kiln_last_step_seconds', 'Duration of the last engine step.', () => this.last.seconds));
    r.add(new Gauge('kiln_kv_cache_blocks_used', 'KV cache blocks held by requests.', () => cache.numBlocks - cache.allocator.numFree));
    r.add(new Gauge('kiln_kv_cache_blocks_total', 'KV cache blocks in all.', () => cache.numBlocks));
    r.add(new Gauge('kiln_kv_cache_block_size', 'Tokens per KV cache block.', () => cache.blockSize));
  }

  onStep(info: StepInfo): void {
    this.last = info;
    this.steps.inc();
  }

  render(): string {
    return this.registry.render();
  }
}
