/**
 * The one place requests are made: the bearer token, JSON bodies, a refusal turned into
 * a JobqueueError, and retries with backoff of what is transient (a refused or reset
 * connection, a 503, respecting its Retry-After). A 4xx is never retried.
 */
import { ConnectionFailedError, errorFor, type JobqueueError } from "./errors.js";

export interface RetryOptions {
  /** Retries after the first try, for a transient failure (default 5). */
  retries?: number;
  /** The first retry's delay; each next one doubles, with jitter (default 250 ms). */
  minDelayMs?: number;
  /** The longest delay between two tries, Retry-After included (default 10 s). */
  maxDelayMs?: number;
}

export interface ConnectionOptions {
  /** The API's base URL, e.g. `http://127.0.0.1:5001`. */
  url: string;
  /** An API token (`jobqueue tokens create`), sent as `Authorization: Bearer`. */
  token?: string;
  retry?: RetryOptions;
  /** Longest wait for an answer, beyond a long poll's own wait (default 60 s). */
  timeoutMs?: number;
  /** Extra headers for every request. */
  headers?: Record<string, string>;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
}

export interface RequestOptions {
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /**
   * Whether the request may be sent again after it may have reached the server (a reset
   * connection, a 502/504, a timeout, a 503 that says the job may be stored). Requests
   * that change nothing, or change it once whatever the repeats, are; an enqueue
   * without an Idempotency-Key or unique key is not. A refused connection, or a 503
   * saying nothing was stored, is retried either way.
   */
  idempotent?: boolean;
  /** Seconds the server may hold the request (a long poll), added to the timeout. */
  holdSeconds?: number;
  /** Overrides of the connection's retries, for this request. */
  retry?: RetryOptions;
}

export interface Answer<T> {
  status: number;
  body: T;
  headers: Headers;
}

// Errors of a connection that never carried the request: safe to retry any request.
const NOT_SENT = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
]);
// Errors after which the server may have acted: retried only if idempotent.
const MAYBE_SENT = new Set([
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "ECONNABORTED",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

type Failure =
  | {
      kind: "answer";
      error: JobqueueError;
      retryAfterMs: number | undefined;
      safe: boolean;
      transient: boolean;
    }
  | { kind: "transport"; error: unknown; safe: boolean; transient: boolean };

export class Connection {
  readonly url: string;
  readonly #token: string | undefined;
  readonly #retry: Required<RetryOptions>;
  readonly #timeoutMs: number;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;

  constructor(options: ConnectionOptions) {
    if (!options || typeof options.url !== "string" || options.url === "") {
      throw new TypeError("jobqueue-client: `url` (the API's base URL) is required");
    }
    this.url = options.url.replace(/\/+$/, "");
    this.#token = options.token;
    this.#retry = resolveRetry(options.retry);
    this.#timeoutMs = options.timeoutMs ?? 60_000;
    this.#headers = { ...options.headers };
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** The answer of a 2xx; a refusal throws its JobqueueError, after the retries of a
   * transient one. */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<Answer<T>> {
    const retry = options.retry ? { ...this.#retry, ...options.retry } : this.#retry;
    for (let attempt = 0; ; attempt++) {
      const outcome = await this.#once<T>(method, path, options);
      if ("status" in outcome) return outcome;
      const failure = outcome.failure;
      const retriable = failure.transient && (failure.safe || options.idempotent === true);
      if (!retriable || attempt >= retry.retries || options.signal?.aborted) {
        throw failure.error;
      }
      const backoff = backoffMs(attempt, retry);
      const wait =
        failure.kind === "answer" && failure.retryAfterMs !== undefined
          ? Math.min(Math.max(failure.retryAfterMs, backoff), retry.maxDelayMs)
          : backoff;
      await sleep(wait, options.signal);
    }
  }

  async #once<T>(
    method: string,
    path: string,
    options: RequestOptions,
  ): Promise<Answer<T> | { failure: Failure }> {
    const info = { method, path };
    const headers: Record<string, string> = { Accept: "application/json", ...this.#headers };
    if (this.#token) headers.Authorization = `Bearer ${this.#token}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["Content-Type"] = "application/json";
    }
    Object.assign(headers, options.headers);
    const timeout = AbortSignal.timeout(this.#timeoutMs + (options.holdSeconds ?? 0) * 1000);
    const { signal, dispose } = either(timeout, options.signal);
    let answer: Response;
    let text: string;
    try {
      answer = await this.#fetch(this.url + withQuery(path, options.query), {
        method,
        headers,
        body,
        signal,
      });
      text = await answer.text();
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason ?? error;
      const code = errorCode(error);
      const timedOut = timeout.aborted;
      const safe = code !== undefined && NOT_SENT.has(code);
      const transient = safe || timedOut || (code !== undefined && MAYBE_SENT.has(code));
      const reason = timedOut ? "no answer in time" : (code ?? describeError(error));
      return {
        failure: {
          kind: "transport",
          safe,
          transient: transient || code === undefined,
          error: new ConnectionFailedError(`${method} ${path}: no answer (${reason})`, {
            status: 0,
            code: "connection_failed",
            request: info,
            cause: error,
          }),
        },
      };
    } finally {
      dispose();
    }
    const parsed = parse(text, answer.headers.get("content-type"));
    if (answer.ok) return { status: answer.status, body: parsed as T, headers: answer.headers };
    const error = errorFor(answer.status, parsed, info);
    const status = answer.status;
    // A 503 changed nothing, but an enqueue's may have stored its job ("stored": "unknown").
    const stored = (parsed as { stored?: unknown } | undefined)?.stored;
    const transient = status === 503 || status === 502 || status === 504;
    if (!transient) {
      return {
        failure: { kind: "answer", error, retryAfterMs: undefined, safe: false, transient },
      };
    }
    return {
      failure: {
        kind: "answer",
        error,
        transient,
        retryAfterMs: retryAfterMs(answer.headers.get("retry-after")),
        safe: status === 503 && stored !== "unknown",
      },
    };
  }
}

/** A signal aborted when either is (AbortSignal.any, which Node 18 lacks), and a
 * dispose that detaches it from the caller's, which may live long (a worker's). */
function either(
  timeout: AbortSignal,
  caller: AbortSignal | undefined,
): { signal: AbortSignal; dispose: () => void } {
  if (caller === undefined) return { signal: timeout, dispose: () => undefined };
  const combined = new AbortController();
  const onAbort = (event: Event): void => combined.abort((event.target as AbortSignal).reason);
  if (caller.aborted) combined.abort(caller.reason);
  caller.addEventListener("abort", onAbort, { once: true });
  timeout.addEventListener("abort", onAbort, { once: true });
  return {
    signal: combined.signal,
    dispose: () => {
      caller.removeEventListener("abort", onAbort);
      timeout.removeEventListener("abort", onAbort);
    },
  };
}

function resolveRetry(retry: RetryOptions | undefined): Required<RetryOptions> {
  return {
    retries: retry?.retries ?? 5,
    minDelayMs: retry?.minDelayMs ?? 250,
    maxDelayMs: retry?.maxDelayMs ?? 10_000,
  };
}

/** The delay before retry number `attempt` (0 for the first): exponential, jittered. */
export function backoffMs(attempt: number, retry: Required<RetryOptions>): number {
  const ceiling = Math.min(retry.maxDelayMs, retry.minDelayMs * 2 ** Math.min(attempt, 30));
  return ceiling / 2 + (Math.random() * ceiling) / 2;
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date. */
export function retryAfterMs(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = Number(header.trim());
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** Resolves after `ms`, or rejects with the signal's reason once it is aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function withQuery(path: string, query: RequestOptions["query"]): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined) params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

function parse(text: string, contentType: string | null): unknown {
  if (text === "") return undefined;
  if (contentType && /json/i.test(contentType)) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

/** The system error code fetch's failure carries (its cause, or one of an
 * AggregateError's), e.g. ECONNREFUSED. */
function errorCode(error: unknown): string | undefined {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current !== null && typeof current === "object" && !seen.has(current)) {
    seen.add(current);
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") return code;
    const errors = (current as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors.length > 0) {
      current = errors[0];
      continue;
    }
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
