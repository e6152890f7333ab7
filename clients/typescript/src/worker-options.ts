/**
 * What a Worker takes (its options, its handlers) and what a handler is given (its
 * context): see worker.ts.
 */
import type { ConnectionOptions } from "./http.js";
import type { LeasedJob } from "./types.js";

export interface WorkerOptions extends ConnectionOptions {
  /** The worker's name, 1 to 100 of `A-Z a-z 0-9 . _ : @ -`; `GET /workers` shows it as
   * `http:<token name>:<name>` (default: the host's name and the process id). */
  name?: string;
  /** The queues to claim from, in this order (default `["default"]`). */
  queues?: string[];
  /** Only jobs of these types; `null`: of every type (default: the registered types). */
  types?: string[] | null;
  /** Jobs run at once (default 10). */
  concurrency?: number;
  /** How long each claimed job is held without a heartbeat (default 30 s): a worker that
   * dies loses its jobs to the rescuer after this. */
  leaseSeconds?: number;
  /** How long a claim waits for a job when none is due (default 20 s, at most 60). */
  waitSeconds?: number;
  /** At shutdown, how long running handlers may take to finish before they are aborted
   * and their jobs handed back (default 30 s). */
  graceSeconds?: number;
  /** How long finished jobs' outcomes are gathered into one `POST /outcomes` while
   * other jobs run (default 5 ms; with none running, they are sent at once). */
  outcomeDelayMs?: number;
  /** Stop (and drain) on SIGTERM and SIGINT; a second signal aborts at once
   * (default true). */
  handleSignals?: boolean;
  /** Where the worker's own warnings go (default: console); null: nowhere. */
  logger?: WorkerLogger | null;
}

export interface WorkerLogger {
  warn(message: string, ...details: unknown[]): void;
  error(message: string, ...details: unknown[]): void;
}

/** What a handler is given besides the payload. */
export interface JobContext {
  /** The job as its claim handed it out: `id`, `type`, `queue`, `attempt` (1 for the
   * first), `max_attempts`, `trace_id`, `parent_results`, `tags`, `meta`, `lease`... */
  readonly job: LeasedJob;
  /** Aborted when the job was cancelled (its reason a JobCancelledError), its lease was
   * lost (a LeaseLostError), or at shutdown once the grace period is over (a
   * WorkerShutdownError). Pass it on to fetch and timers; return or throw soon after. */
  readonly signal: AbortSignal;
  /** Reports how far the job is (a fraction from 0 to 1, and/or a message), shown with
   * the job. Sent with a heartbeat of its own, at most about once a second per job. */
  progress(fraction?: number | null, message?: string | null): void;
  /** Adds a line (formatted as console.log formats its arguments) to the attempt's log,
   * as a Python handler's `ctx.log` does. The lines are buffered and sent with
   * `POST /jobs/{id}/logs` before the outcome (and with the heartbeats of a long job);
   * a server without that route drops them, and past 1,000 lines a job's are dropped. */
  log(...args: unknown[]): void;
}

export type Handler<P = Record<string, unknown>, R = unknown> = (
  payload: P,
  ctx: JobContext,
) => R | Promise<R>;

export interface WorkerStats {
  claimed: number;
  completed: number;
  failed: number;
  /** Jobs whose handler threw a JobSnooze: due again later, the attempt not counted. */
  snoozed: number;
  /** Jobs whose lease was lost before their outcome was applied (another worker has
   * them, or they ended). */
  lost: number;
  /** Jobs still running at shutdown after the grace period, handed back (pending at
   * once, their attempt not counted). */
  released: number;
  /** Jobs still running at shutdown that could not be handed back (a server without
   * `POST /jobs/{id}/release`, or unreachable): left to their leases. */
  abandoned: number;
}
