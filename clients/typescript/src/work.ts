/**
 * WorkClient: the HTTP worker protocol's routes one by one (docs/http-workers.md), each
 * typed by the API's OpenAPI document. Worker is built on it; use it directly for a
 * loop of your own. Every route needs a token with the scope `jobs:work`.
 */
import { Connection, type ConnectionOptions, type RetryOptions } from "./http.js";
import type {
  ClaimAnswer,
  ClaimRequest,
  ErrorIn,
  HeartbeatAnswer,
  HeartbeatsAnswer,
  LeasedJob,
  LeaseRenewal,
  OutcomeApplied,
  OutcomeIn,
  OutcomesAnswer,
  Outcome,
} from "./types.js";

export interface CallOptions {
  signal?: AbortSignal;
  retry?: RetryOptions;
}

export interface Progress {
  fraction?: number | null;
  message?: string | null;
}

export class WorkClient {
  readonly #http: Connection;

  constructor(options: ConnectionOptions | Connection) {
    this.#http = options instanceof Connection ? options : new Connection(options);
  }

  /** Up to `max` due jobs, each with its lease; with none due, waits up to
   * `wait_seconds` for one (a long poll). */
  async claim(order: ClaimRequest, options: CallOptions = {}): Promise<LeasedJob[]> {
    return (await this.claimAndReport(order, options)).jobs;
  }

  /** A claim that carries `order.outcomes` (as outcomes() takes them), applied while it
   * is made: the jobs, and each outcome's answer in order. One request for a worker's
   * finished batch and its next one. */
  async claimAndReport(order: ClaimRequest, options: CallOptions = {}): Promise<ClaimAnswer> {
    const answer = await this.#http.request<ClaimAnswer>("POST", "/claims", {
      body: order,
      ...options,
      // A claim whose client went away hands its jobs back; an outcome sent again is
      // answered as applied and changes nothing.
      idempotent: true,
      holdSeconds: order.wait_seconds ?? 0,
    });
    return answer.body;
  }

  /** Renews one lease (a LeaseLostError once it lost its job), with progress if given;
   * says whether the job was asked to stop. */
  async heartbeat(
    lease: string,
    body: { lease_seconds?: number | null; progress?: Progress | null } = {},
    options: CallOptions = {},
  ): Promise<HeartbeatAnswer> {
    const answer = await this.#http.request<HeartbeatAnswer>(
      "POST",
      `/jobs/${jobOf(lease)}/heartbeat`,
      { body: { lease, ...body }, ...options, idempotent: true },
    );
    return answer.body;
  }

  /** Renews many leases at once (at most 1,000), each answered in order: `ok` false for
   * one that lost its job. */
  async heartbeats(
    leases: string[],
    leaseSeconds?: number,
    options: CallOptions = {},
  ): Promise<LeaseRenewal[]> {
    const body: { leases: string[]; lease_seconds?: number } = { leases };
    if (leaseSeconds !== undefined) body.lease_seconds = leaseSeconds;
    const answer = await this.#http.request<HeartbeatsAnswer>("POST", "/heartbeats", {
      body,
      ...options,
      idempotent: true,
    });
    return answer.body.leases;
  }

  /** Completes the lease's job with `result`; a LeaseLostError (409) if the lease lost
   * it, and nothing changed. */
  async complete(
    lease: string,
    result: unknown = null,
    options: CallOptions = {},
  ): Promise<Outcome> {
    const answer = await this.#http.request<Outcome>("POST", `/jobs/${jobOf(lease)}/complete`, {
      body: { lease, result },
      ...options,
      idempotent: false, // a repeat after it landed is a 409, not an answer
    });
    return answer.body;
  }

  /** Fails the lease's attempt: retried (after `retry_in_seconds`, else the default
   * backoff) while attempts are left, failed for good with none or with `discard`,
   * cancelled if the job was asked to stop. */
  async fail(
    lease: string,
    error: ErrorIn,
    more: { retry_in_seconds?: number | null; discard?: boolean } = {},
    options: CallOptions = {},
  ): Promise<Outcome> {
    const answer = await this.#http.request<Outcome>("POST", `/jobs/${jobOf(lease)}/fail`, {
      body: { lease, error, ...more },
      ...options,
      idempotent: false,
    });
    return answer.body;
  }

  /** Hands the lease's job back: pending again at once, its attempt not counted (or
   * `cancelled`, if it was asked to stop), for another worker to take; what a worker
   * does with the jobs it could not finish when it stops. */
  async release(lease: string, options: CallOptions = {}): Promise<Outcome> {
    const answer = await this.#http.request<Outcome>("POST", `/jobs/${jobOf(lease)}/release`, {
      body: { lease },
      ...options,
      idempotent: true, // a repeat after it landed is a 409, and changes nothing
    });
    return answer.body;
  }

  /** Completions and failures together (at most 1,000), each answered in order: `ok`
   * false for a lease that lost its job. */
  async outcomes(outcomes: OutcomeIn[], options: CallOptions = {}): Promise<OutcomeApplied[]> {
    const answer = await this.#http.request<OutcomesAnswer>("POST", "/outcomes", {
      body: { outcomes },
      ...options,
      idempotent: true, // a repeat finds its leases ended: ok false, nothing changed
    });
    return answer.body.outcomes;
  }

  /** Adds lines to the attempt's log (`POST /jobs/{id}/logs`); answers whether the log
   * reached its size limit (later lines are dropped). A NotFoundError from a server
   * that has no such route. */
  async logs(
    lease: string,
    lines: string[],
    options: CallOptions = {},
  ): Promise<{ truncated: boolean }> {
    const answer = await this.#http.request<{ truncated: boolean }>(
      "POST",
      `/jobs/${jobOf(lease)}/logs`,
      { body: { lease, lines }, ...options, idempotent: false },
    );
    return answer.body;
  }
}

/** The job id a lease names (`<job id>.<claim>.<worker>`). */
export function jobOf(lease: string): string {
  const id = /^(\d{1,19})\./.exec(lease)?.[1];
  if (id === undefined) throw new TypeError(`not a lease: ${JSON.stringify(lease)}`);
  return id;
}
