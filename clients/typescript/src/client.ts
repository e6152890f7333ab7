/**
 * Client: enqueue jobs, read them, wait for their end, cancel them, send them signals;
 * over jobqueue's HTTP API (docs/http-api.md).
 */
import { Connection, type ConnectionOptions } from "./http.js";
import {
  FINAL_STATES,
  type Attempt,
  type Job,
  type NewJob,
  type NewSignal,
  type SignalSent,
} from "./types.js";

export type ClientOptions = ConnectionOptions;

export interface EnqueueOptions {
  /** The queue (default: `default`). */
  queue?: string;
  /** Lower runs first (default 0). */
  priority?: number;
  /** Attempts before the job stays failed (default: the server's MAX_ATTEMPTS). */
  maxAttempts?: number;
  /** Not started before this time. */
  runAt?: Date | string;
  /** Not started before this many seconds from now (not with `runAt`). */
  delaySeconds?: number;
  /** While a job with this key is pending or running, no new one is stored: the answer
   * is that job (docs/unique-jobs.md). */
  uniqueKey?: string;
  /** Seconds the unique key stays taken after its job completed. */
  uniqueFor?: number;
  /** The job's concurrency key, for its queue's key limits (docs/limits.md). */
  concurrencyKey?: string;
  /** An Idempotency-Key (1 to 255 printable ASCII characters): a retry of the request
   * gets the job the first one stored, never a second job (docs/idempotency.md). With
   * it (or a `uniqueKey`), an enqueue whose answer was lost is retried safely. */
  idempotencyKey?: string;
  /** W3C Trace Context of the caller, kept with the job. */
  traceparent?: string;
  tracestate?: string;
  signal?: AbortSignal;
}

export interface WaitOptions {
  /** Give up after this many seconds, and return the job as it is then (default: wait
   * as long as it takes). */
  timeoutSeconds?: number;
  signal?: AbortSignal;
}

// Each long poll of GET /jobs/{id}?wait= holds a request open: kept under the idle
// timeout of most proxies (the server allows up to 300 s).
const WAIT_CHUNK_SECONDS = 55;

export class Client {
  readonly #http: Connection;

  constructor(options: ClientOptions) {
    this.#http = new Connection(options);
  }

  /** Stores a job and answers it (201), or the job that holds its unique key or that
   * its Idempotency-Key stored before (200). Needs the scope `jobs:enqueue`. */
  async enqueue(
    type: string,
    payload: Record<string, unknown> = {},
    options: EnqueueOptions = {},
  ): Promise<Job> {
    const job: NewJob = { type, payload };
    if (options.queue !== undefined) job.queue = options.queue;
    if (options.priority !== undefined) job.priority = options.priority;
    if (options.maxAttempts !== undefined) job.max_attempts = options.maxAttempts;
    if (options.runAt !== undefined) {
      job.run_at = options.runAt instanceof Date ? options.runAt.toISOString() : options.runAt;
    }
    if (options.delaySeconds !== undefined) job.delay_seconds = options.delaySeconds;
    if (options.uniqueKey !== undefined) job.unique_key = options.uniqueKey;
    if (options.uniqueFor !== undefined) job.unique_for = options.uniqueFor;
    if (options.concurrencyKey !== undefined) job.concurrency_key = options.concurrencyKey;
    const headers: Record<string, string> = {};
    if (options.idempotencyKey !== undefined) {
      headers["Idempotency-Key"] = structuredString(options.idempotencyKey);
    }
    if (options.traceparent !== undefined) headers.traceparent = options.traceparent;
    if (options.tracestate !== undefined) headers.tracestate = options.tracestate;
    const answer = await this.#http.request<Job>("POST", "/jobs", {
      body: job,
      headers,
      signal: options.signal,
      idempotent: options.idempotencyKey !== undefined || options.uniqueKey !== undefined,
    });
    return answer.body;
  }

  /** The job as stored now. A NotFoundError if there is none. */
  async get(id: number, options: { signal?: AbortSignal } = {}): Promise<Job> {
    const answer = await this.#http.request<Job>("GET", `/jobs/${jobId(id)}`, {
      signal: options.signal,
      idempotent: true,
    });
    return answer.body;
  }

  /** The job once it is completed, failed or cancelled; or, once `timeoutSeconds` have
   * passed, as it is then (check its `status`). Long polls GET /jobs/{id}?wait=S, woken
   * by the job's end. */
  async wait(id: number, options: WaitOptions = {}): Promise<Job> {
    const path = `/jobs/${jobId(id)}`;
    const deadline =
      options.timeoutSeconds === undefined ? Infinity : Date.now() + options.timeoutSeconds * 1000;
    for (;;) {
      const remaining = (deadline - Date.now()) / 1000;
      const chunk = Math.min(remaining, WAIT_CHUNK_SECONDS);
      const answer = await this.#http.request<Job>("GET", path, {
        query: chunk >= 0.001 ? { wait: Number(chunk.toFixed(3)) } : undefined,
        holdSeconds: Math.max(chunk, 0),
        signal: options.signal,
        idempotent: true,
      });
      const job = answer.body;
      if (FINAL_STATES.includes(job.status) || chunk < 0.001) return job;
    }
  }

  /** Cancels a pending job at once, or asks a running one to stop (its worker ends it
   * `cancelled`). A ConflictError for a completed or failed job. Scope `jobs:control`. */
  async cancel(id: number, options: { signal?: AbortSignal } = {}): Promise<Job> {
    const answer = await this.#http.request<Job>("POST", `/jobs/${jobId(id)}/cancel`, {
      signal: options.signal,
      idempotent: true,
    });
    return answer.body;
  }

  /** Sends a durable job a signal, for its handler's `ctx.wait_for_signal(name)`: kept
   * if the job does not wait for it yet, waking it if it does (docs/durable.md#signals).
   * A ConflictError for a job that has ended, a NotFoundError for none. Scope
   * `jobs:signal`. Not retried once sent: a second signal would be a second signal. */
  async sendSignal(
    id: number,
    name: string,
    payload: unknown = null,
    options: { signal?: AbortSignal } = {},
  ): Promise<SignalSent> {
    jobId(id); // a positive integer, or a TypeError before anything is sent
    const body: NewSignal = { name, job_id: id, payload };
    const answer = await this.#http.request<SignalSent>("POST", "/signals", {
      body,
      signal: options.signal,
    });
    return answer.body;
  }

  /** The job's failed attempts (and those that logged), oldest first. */
  async attempts(id: number, options: { signal?: AbortSignal } = {}): Promise<Attempt[]> {
    const answer = await this.#http.request<{ attempts: Attempt[] }>(
      "GET",
      `/jobs/${jobId(id)}/attempts`,
      { signal: options.signal, idempotent: true },
    );
    return answer.body.attempts;
  }
}

function jobId(id: number): string {
  if (!Number.isSafeInteger(id)) throw new TypeError(`a job id is an integer, got ${String(id)}`);
  return String(id);
}

/** `key` as a structured-field string, the form the Idempotency-Key header takes. */
function structuredString(key: string): string {
  if (!/^[\x20-\x7e]*$/.test(key)) {
    throw new RangeError("an Idempotency-Key is printable ASCII only");
  }
  return `"${key.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}
