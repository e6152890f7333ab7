/**
 * Worker: runs jobs in Node.js over jobqueue's HTTP worker protocol
 * (docs/http-workers.md), with the guarantees of a Python worker: each claimed job is
 * held by a lease that one `POST /heartbeats` renews for all the running jobs about
 * every third of the lease; outcomes go in batches (`POST /outcomes`); a job whose
 * lease was lost is never reported, and one still running when the worker stops is
 * handed back (`POST /jobs/{id}/release`), or else left to its lease, which the
 * rescuer takes back once it runs out.
 */
import { hostname } from "node:os";
import { format } from "node:util";

import { describe, JobqueueError, LeaseLostError } from "./errors.js";
import { backoffMs, sleep, type RetryOptions } from "./http.js";
import {
  completion,
  failure,
  JobCancelledError,
  JobSnooze,
  message,
  snooze,
  storable,
  WorkerShutdownError,
} from "./outcomes.js";
import type { ClaimRequest, LeasedJob, OutcomeApplied, OutcomeIn } from "./types.js";
import type {
  Handler,
  JobContext,
  WorkerLogger,
  WorkerOptions,
  WorkerStats,
} from "./worker-options.js";
import { WorkClient } from "./work.js";

interface Running {
  readonly job: LeasedJob;
  readonly controller: AbortController;
  cancelRequested: boolean;
  lost: boolean;
  abandoned: boolean;
  progress: { fraction: number | null; message: string | null } | undefined;
  progressTimer: NodeJS.Timeout | undefined;
  progressSending: boolean;
  progressSentAt: number;
  logs: string[];
  logsDropped: number;
  logsClosed: boolean;
}

const MAX_CLAIM = 100;
const MAX_BATCH = 1000;
const PROGRESS_INTERVAL_MS = 1000;
const MAX_LOG_LINES = 1000;
const MAX_LOG_LINE = 16_000;
const WORKER_NAME = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$/;

export class Worker {
  readonly name: string;
  readonly stats: WorkerStats = {
    claimed: 0,
    completed: 0,
    failed: 0,
    snoozed: 0,
    lost: 0,
    released: 0,
    abandoned: 0,
  };
  readonly #work: WorkClient;
  readonly #handlers = new Map<string, Handler<any, any>>();
  readonly #queues: string[];
  readonly #types: string[] | null | undefined;
  readonly #concurrency: number;
  readonly #leaseSeconds: number;
  readonly #waitSeconds: number;
  readonly #graceMs: number;
  readonly #outcomeDelayMs: number;
  readonly #handleSignals: boolean;
  readonly #logger: WorkerLogger | null;
  readonly #fastRetry: RetryOptions;

  readonly #running = new Map<string, Running>(); // by lease: handlers running
  readonly #reporting = new Map<string, Running>(); // by lease: outcome not yet applied
  readonly #outbox: { entry: Running; outcome: OutcomeIn }[] = [];
  #outboxTimer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #outboxFailures = 0;
  #beating = false;
  #logsSupported = true;

  #state: "idle" | "running" | "stopping" | "stopped" = "idle";
  #stopped: Promise<void> | undefined;
  #stopClaiming = new AbortController(); // aborts the claim in flight, and waits
  #abortNow = new AbortController(); // ends the grace period at once
  #slotWaiters: (() => void)[] = [];
  // The claim loop was woken for freed slots and has not claimed yet: the outcomes
  // reported meanwhile go with its claim, rather than in a request of their own.
  #claimDue = false;
  readonly #finishing = new Set<Promise<void>>(); // ended jobs sending their log lines
  #fatal: unknown;

  constructor(options: WorkerOptions) {
    this.#work = new WorkClient(options);
    this.name = options.name ?? defaultName();
    if (!WORKER_NAME.test(this.name)) {
      throw new RangeError(
        `a worker's name is 1 to 100 of A-Z a-z 0-9 . _ : @ - (starting with a letter or digit), got ${JSON.stringify(this.name)}`,
      );
    }
    this.#queues = options.queues ?? ["default"];
    if (Array.isArray(options.types) && options.types.length === 0) {
      throw new RangeError("`types` names at least one type (null: every type)");
    }
    this.#types = options.types;
    this.#concurrency = positiveInteger("concurrency", options.concurrency ?? 10);
    this.#leaseSeconds = within("leaseSeconds", options.leaseSeconds ?? 30, 1, 3600);
    this.#waitSeconds = within("waitSeconds", options.waitSeconds ?? 20, 0, 60);
    this.#graceMs = within("graceSeconds", options.graceSeconds ?? 30, 0, Infinity) * 1000;
    this.#outcomeDelayMs = within("outcomeDelayMs", options.outcomeDelayMs ?? 5, 0, 60_000);
    this.#handleSignals = options.handleSignals ?? true;
    this.#logger = options.logger === undefined ? console : options.logger;
    // Renewals must land within the lease: their retries stay well inside a third of it.
    const third = (this.#leaseSeconds * 1000) / 3;
    this.#fastRetry = { retries: 3, minDelayMs: Math.min(250, third / 8), maxDelayMs: third / 4 };
  }

  /** Runs `handler` for the jobs of `type`: what it returns (JSON, or nothing) completes
   * the job; what it throws fails the attempt (error type = its name, with its message
   * and stack), retried while attempts are left. */
  register<P = Record<string, unknown>, R = unknown>(type: string, handler: Handler<P, R>): this {
    if (this.#state !== "idle") throw new Error("register handlers before run()");
    if (typeof handler !== "function") throw new TypeError("a handler is a function");
    this.#handlers.set(type, handler as Handler<any, any>);
    return this;
  }

  /** The number of handlers running now. */
  get running(): number {
    return this.#running.size;
  }

  /** Claims and runs jobs until stop() (or SIGTERM/SIGINT), then drains: stops
   * claiming, lets the running handlers finish within the grace period and reports
   * them, then aborts the rest and hands their jobs back (pending at once, the attempt
   * not counted; where the server cannot, their leases run out). Rejects if the
   * server refused the worker (a 401, 403 or 422 of its claims). */
  async run(): Promise<void> {
    if (this.#state !== "idle") throw new Error("a Worker runs once");
    if (this.#types === undefined && this.#handlers.size === 0) {
      throw new Error("register a handler before run() (or give `types`)");
    }
    this.#state = "running";
    let finished!: () => void;
    this.#stopped = new Promise((resolve) => (finished = resolve));
    const onSignal = (): void => {
      if (this.#state === "running") void this.stop();
      else this.#abortNow.abort();
    };
    if (this.#handleSignals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    const beat = setInterval(() => void this.#beat(), (this.#leaseSeconds * 1000) / 3);
    try {
      await this.#claimLoop();
      await this.#drain();
    } finally {
      clearInterval(beat);
      if (this.#handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
      this.#state = "stopped";
      finished();
    }
    if (this.#fatal !== undefined) throw this.#fatal;
  }

  /** Stops claiming and drains (see run()); resolves once run() has ended. With
   * `{ graceSeconds: 0 }`, running handlers are aborted at once. */
  async stop(options: { graceSeconds?: number } = {}): Promise<void> {
    if (options.graceSeconds !== undefined && options.graceSeconds <= 0) this.#abortNow.abort();
    if (this.#state === "idle") {
      this.#state = "stopped";
      return;
    }
    if (this.#state === "running") this.#state = "stopping";
    this.#stopClaiming.abort();
    this.#wakeClaimer();
    await this.#stopped;
  }

  // -- claiming ----------------------------------------------------------------------

  async #claimLoop(): Promise<void> {
    const types = this.#types === undefined ? [...this.#handlers.keys()].sort() : this.#types;
    let failures = 0;
    while (this.#state === "running") {
      const free = this.#concurrency - this.#running.size;
      if (free <= 0) {
        await new Promise<void>((resolve) => this.#slotWaiters.push(resolve));
        continue;
      }
      this.#claimDue = false;
      const carried = this.#carried();
      const order: ClaimRequest = {
        worker: this.name,
        queues: this.#queues,
        types,
        max: Math.min(free, MAX_CLAIM),
        // A claim carrying outcomes answers at once: their answers are not held up by
        // a long poll (the next claim waits instead).
        wait_seconds: carried.length > 0 ? 0 : this.#waitSeconds,
        lease_seconds: this.#leaseSeconds,
      };
      if (carried.length > 0) order.outcomes = carried.map((b) => b.outcome);
      let jobs: LeasedJob[];
      try {
        const answer = await this.#work.claimAndReport(order, {
          signal: this.#stopClaiming.signal,
        });
        jobs = answer.jobs;
        if (carried.length > 0) {
          const answers = answer.outcomes ?? [];
          this.#answered(carried, answers);
          // A server that answered none (one from before claims carried outcomes and
          // ignoring them): they go again on their own.
          this.#putBack(carried.slice(answers.length));
        }
        failures = 0;
      } catch (error) {
        if (carried.length > 0) {
          // Sent again on their own (POST /outcomes), where a refused one is found and
          // a refused result becomes a failure; an outcome the server applied before is
          // answered as applied.
          this.#putBack(carried);
          if (this.#state === "running" && isRefusal(error)) continue;
        }
        if (this.#state !== "running") break;
        if (error instanceof JobqueueError && error.status >= 400 && error.status < 500) {
          // Refused: a token, scope, queue or field that retrying cannot mend.
          this.#fatal = error;
          this.#logger?.error(
            `jobqueue worker ${this.name}: claims refused, stopping: ${error.message}`,
          );
          this.#state = "stopping";
          break;
        }
        this.#logger?.warn(
          `jobqueue worker ${this.name}: claim failed, retrying: ${message(error)}`,
        );
        try {
          await sleep(
            backoffMs(failures++, { retries: 0, minDelayMs: 500, maxDelayMs: 15_000 }),
            this.#stopClaiming.signal,
          );
        } catch {
          break; // stopping
        }
        continue;
      }
      for (const job of jobs) this.#start(job);
    }
    // No claim will carry what was held for one.
    this.#claimDue = false;
    this.#flush();
  }

  #putBack(outcomes: { entry: Running; outcome: OutcomeIn }[]): void {
    if (outcomes.length === 0) return;
    this.#outbox.unshift(...outcomes);
    this.#flush();
  }

  #wakeClaimer(): void {
    const waiters = this.#slotWaiters;
    this.#slotWaiters = [];
    if (waiters.length > 0 && this.#state === "running") this.#claimDue = true;
    for (const wake of waiters) wake();
  }

  /** The outcomes waiting to be sent, for the claim about to go (none while a flush is
   * sending others: they go in order). */
  #carried(): { entry: Running; outcome: OutcomeIn }[] {
    if (this.#flushing !== undefined || this.#outbox.length === 0) return [];
    clearTimeout(this.#outboxTimer);
    this.#outboxTimer = undefined;
    return this.#outbox.splice(0, MAX_BATCH);
  }

  // -- running a job -------------------------------------------------------------------

  #start(job: LeasedJob): void {
    this.stats.claimed++;
    const entry: Running = {
      job,
      controller: new AbortController(),
      cancelRequested: false,
      lost: false,
      abandoned: false,
      progress: undefined,
      progressTimer: undefined,
      progressSending: false,
      progressSentAt: 0,
      logs: [],
      logsDropped: 0,
      logsClosed: false,
    };
    this.#running.set(job.lease, entry);
    void this.#execute(entry);
  }

  async #execute(entry: Running): Promise<void> {
    const { job } = entry;
    const ctx: JobContext = {
      job,
      signal: entry.controller.signal,
      progress: (fraction, text) => this.#progress(entry, fraction, text),
      log: (...args) => this.#log(entry, args),
    };
    let outcome: OutcomeIn;
    try {
      const handler = this.#handlers.get(job.type);
      if (handler === undefined) {
        const known = [...this.#handlers.keys()].join(", ") || "none";
        throw Object.assign(new Error(`no handler for type ${job.type} (registered: ${known})`), {
          name: "NoHandlerError",
        });
      }
      const result: unknown = await handler(job.payload, ctx);
      outcome = completion(job.lease, result);
    } catch (error) {
      outcome =
        error instanceof JobSnooze ? snooze(job.lease, error.seconds) : failure(job.lease, error);
    }
    clearTimeout(entry.progressTimer);
    if (entry.abandoned) return; // past the shutdown grace: handed back, not reported
    this.#running.delete(job.lease);
    this.#wakeClaimer();
    if (entry.lost) {
      this.stats.lost++;
      return;
    }
    if (entry.cancelRequested && outcome.error == null) {
      // Asked to stop: a failure ends it `cancelled` (a completion would complete it).
      outcome = failure(job.lease, new JobCancelledError());
    }
    this.#reporting.set(job.lease, entry);
    if (entry.logs.length > 0) {
      const sending = this.#sendLogs(entry);
      this.#finishing.add(sending);
      await sending;
      this.#finishing.delete(sending);
    }
    this.#report(entry, outcome);
  }

  #progress(entry: Running, fraction?: number | null, text?: string | null): void {
    if (!this.#running.has(entry.job.lease) || entry.lost) return;
    let f: number | null = null;
    if (fraction !== undefined && fraction !== null) {
      if (typeof fraction !== "number" || !Number.isFinite(fraction)) {
        throw new RangeError(`progress is a fraction from 0 to 1, got ${String(fraction)}`);
      }
      f = Math.min(1, Math.max(0, fraction));
    }
    const m = text === undefined || text === null ? null : storable(String(text), 1000);
    entry.progress = { fraction: f, message: m };
    this.#scheduleProgress(entry);
  }

  #scheduleProgress(entry: Running): void {
    if (entry.progressSending || entry.progressTimer !== undefined) return;
    const wait = Math.max(0, entry.progressSentAt + PROGRESS_INTERVAL_MS - Date.now());
    entry.progressTimer = setTimeout(() => {
      entry.progressTimer = undefined;
      void this.#sendProgress(entry);
    }, wait);
  }

  async #sendProgress(entry: Running): Promise<void> {
    const progress = entry.progress;
    if (progress === undefined || !this.#running.has(entry.job.lease) || entry.lost) return;
    entry.progress = undefined;
    entry.progressSending = true;
    entry.progressSentAt = Date.now();
    try {
      const answer = await this.#work.heartbeat(
        entry.job.lease,
        { lease_seconds: this.#leaseSeconds, progress },
        { retry: this.#fastRetry },
      );
      if (answer.cancel_requested) this.#cancelled(entry);
    } catch (error) {
      if (error instanceof LeaseLostError) this.#lose(entry, error);
      else
        this.#logger?.warn(
          `jobqueue worker ${this.name}: progress of job ${entry.job.id} not sent: ${message(error)}`,
        );
    } finally {
      entry.progressSending = false;
      if (entry.progress !== undefined) this.#scheduleProgress(entry);
    }
  }

  #log(entry: Running, args: unknown[]): void {
    if (!this.#logsSupported || entry.logsClosed) return;
    if (entry.logs.length >= MAX_LOG_LINES) {
      entry.logsDropped++;
      return;
    }
    entry.logs.push(storable(format(...args), MAX_LOG_LINE));
  }

  async #sendLogs(entry: Running): Promise<void> {
    const lines = entry.logs.splice(0, entry.logs.length);
    if (entry.logsDropped > 0) {
      lines.push(`(${entry.logsDropped} more lines dropped by the worker)`);
      entry.logsDropped = 0;
    }
    if (lines.length === 0 || !this.#logsSupported || entry.lost) return;
    try {
      const answer = await this.#work.logs(entry.job.lease, lines, { retry: this.#fastRetry });
      if (answer.truncated) entry.logsClosed = true;
    } catch (error) {
      if (error instanceof JobqueueError && error.status === 404) {
        this.#logsSupported = false; // a server without the log route
      } else if (error instanceof LeaseLostError) {
        this.#lose(entry, error);
      } else {
        this.#logger?.warn(
          `jobqueue worker ${this.name}: log lines of job ${entry.job.id} dropped: ${message(error)}`,
        );
      }
    }
  }

  #cancelled(entry: Running): void {
    if (entry.cancelRequested) return;
    entry.cancelRequested = true;
    entry.controller.abort(new JobCancelledError());
  }

  #lose(entry: Running, error: Error): void {
    if (entry.lost) return;
    entry.lost = true;
    entry.controller.abort(error);
  }

  // -- heartbeats ----------------------------------------------------------------------

  async #beat(): Promise<void> {
    if (this.#beating) return;
    const entries = [...this.#running.values(), ...this.#reporting.values()].filter((e) => !e.lost);
    if (entries.length === 0) return;
    this.#beating = true;
    try {
      for (let i = 0; i < entries.length; i += MAX_BATCH) {
        const group = entries.slice(i, i + MAX_BATCH);
        const renewals = await this.#work.heartbeats(
          group.map((e) => e.job.lease),
          this.#leaseSeconds,
          { retry: this.#fastRetry },
        );
        renewals.forEach((renewal, n) => {
          const entry = group[n];
          if (entry === undefined || entry.job.lease !== renewal.lease) return;
          if (!renewal.ok) {
            this.#lose(
              entry,
              new LeaseLostError(`job ${entry.job.id}: ${renewal.detail ?? "lease lost"}`, {
                status: 409,
                code: "lease_lost",
                detail: renewal.detail,
                request: { method: "POST", path: "/heartbeats" },
              }),
            );
          } else if (renewal.cancel_requested) {
            this.#cancelled(entry);
          }
        });
      }
      // A long job's log lines go with its renewals.
      for (const entry of this.#running.values()) {
        if (entry.logs.length > 0 && !entry.lost) void this.#sendLogs(entry);
      }
    } catch (error) {
      this.#logger?.warn(`jobqueue worker ${this.name}: heartbeat failed: ${message(error)}`);
    } finally {
      this.#beating = false;
    }
  }

  // -- outcomes ------------------------------------------------------------------------

  #report(entry: Running, outcome: OutcomeIn): void {
    this.#outbox.push({ entry, outcome });
    if (this.#flushing !== undefined) return; // the flush in flight sends it next
    if (this.#claimDue) return; // the claim about to go carries it
    if (this.#running.size === 0 || this.#outbox.length >= MAX_BATCH) {
      clearTimeout(this.#outboxTimer);
      this.#outboxTimer = undefined;
      this.#flush();
    } else if (this.#outboxTimer === undefined) {
      this.#outboxTimer = setTimeout(() => {
        this.#outboxTimer = undefined;
        this.#flush();
      }, this.#outcomeDelayMs);
    }
  }

  #flush(): void {
    if (this.#flushing !== undefined || this.#outbox.length === 0) return;
    this.#flushing = (async () => {
      try {
        while (this.#outbox.length > 0) {
          const batch = this.#outbox.splice(0, MAX_BATCH);
          try {
            await this.#send(batch);
            this.#outboxFailures = 0;
          } catch (error) {
            // Transient, after the retries: put back, and try again later (their leases
            // are renewed meanwhile).
            this.#outbox.unshift(...batch);
            this.#logger?.warn(
              `jobqueue worker ${this.name}: outcomes not sent, retrying: ${message(error)}`,
            );
            const wait = backoffMs(this.#outboxFailures++, {
              retries: 0,
              minDelayMs: 250,
              maxDelayMs: 5000,
            });
            this.#outboxTimer = setTimeout(() => {
              this.#outboxTimer = undefined;
              this.#flush();
            }, wait);
            return;
          }
        }
      } finally {
        this.#flushing = undefined;
      }
    })();
  }

  /** Sends a batch of outcomes; what the server refuses for its content is sent again
   * one by one, a refused result as a failure saying why. Throws only what is transient. */
  async #send(batch: { entry: Running; outcome: OutcomeIn }[]): Promise<void> {
    let answer: OutcomeApplied[];
    try {
      answer = await this.#work.outcomes(batch.map((b) => b.outcome));
    } catch (error) {
      if (!(error instanceof JobqueueError) || error.status < 400 || error.status >= 500)
        throw error;
      if (batch.length > 1 && (error.status === 422 || error.status === 413)) {
        for (const one of batch) await this.#send([one]);
        return;
      }
      const [one] = batch;
      if (
        one !== undefined &&
        (error.status === 422 || error.status === 413) &&
        !one.outcome.error
      ) {
        const name = error.status === 413 ? "ResultTooLargeError" : "InvalidResultError";
        await this.#send([
          {
            entry: one.entry,
            outcome: failure(
              one.outcome.lease,
              Object.assign(new Error(describe(error.detail)), { name }),
              false,
            ),
          },
        ]);
        return;
      }
      for (const b of batch) this.#settled(b.entry);
      this.#logger?.error(
        `jobqueue worker ${this.name}: outcomes refused, dropped: ${error.message}`,
      );
      return;
    }
    this.#answered(batch, answer);
  }

  /** The server's answer to each outcome of `batch`, in order. */
  #answered(batch: { entry: Running; outcome: OutcomeIn }[], answer: OutcomeApplied[]): void {
    answer.forEach((applied, n) => {
      const sent = batch[n];
      if (sent === undefined) return;
      this.#settled(sent.entry);
      if (!applied.ok) this.stats.lost++;
      else if (applied.status === "completed") this.stats.completed++;
      else if (sent.outcome.snooze_seconds != null && applied.status === "pending") {
        this.stats.snoozed++;
      } else this.stats.failed++;
    });
  }

  #settled(entry: Running): void {
    this.#reporting.delete(entry.job.lease);
  }

  // -- shutdown ------------------------------------------------------------------------

  async #release(entry: Running): Promise<void> {
    if (entry.lost) {
      this.stats.lost++;
      return;
    }
    try {
      await this.#work.release(entry.job.lease, { retry: this.#fastRetry });
      this.stats.released++;
    } catch (error) {
      if (error instanceof LeaseLostError) {
        this.stats.lost++;
        return;
      }
      this.stats.abandoned++;
      if (!(error instanceof JobqueueError && error.status === 404)) {
        this.#logger?.warn(
          `jobqueue worker ${this.name}: job ${entry.job.id} not handed back, left to its lease: ${message(error)}`,
        );
      }
    }
  }

  async #drain(): Promise<void> {
    const deadline = Date.now() + this.#graceMs;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<void>((resolve) => {
      // At most setTimeout's longest delay (about 24.8 days): an endless grace waits on.
      if (Number.isFinite(deadline))
        timer = setTimeout(resolve, Math.min(this.#graceMs, 2 ** 31 - 1));
    });
    const aborted = new Promise<void>((resolve) => {
      if (this.#abortNow.signal.aborted) resolve();
      else this.#abortNow.signal.addEventListener("abort", () => resolve(), { once: true });
    });
    try {
      while (this.#running.size > 0 && Date.now() < deadline && !this.#abortNow.signal.aborted) {
        const slot = new Promise<void>((resolve) => this.#slotWaiters.push(resolve));
        await Promise.race([slot, expired, aborted]);
      }
    } finally {
      clearTimeout(timer);
    }
    const unfinished = [...this.#running.values()];
    for (const entry of unfinished) {
      entry.abandoned = true; // whatever its handler does now is not reported
      clearTimeout(entry.progressTimer);
      entry.controller.abort(new WorkerShutdownError());
    }
    this.#running.clear();
    await Promise.all(this.#finishing); // their last log lines, before their outcomes
    // Report what finished: a few tries, then leave the rest to their leases.
    for (let tries = 0; tries < 5 && (this.#outbox.length > 0 || this.#flushing); tries++) {
      clearTimeout(this.#outboxTimer);
      this.#outboxTimer = undefined;
      this.#flush();
      await this.#flushing;
    }
    // Hand the unfinished back, as a Python worker does at shutdown: pending at once,
    // the interrupted attempt not counted.
    await Promise.all(unfinished.map((entry) => this.#release(entry)));
    clearTimeout(this.#outboxTimer);
  }
}

function defaultName(): string {
  const name = `${hostname()}-${process.pid}`
    .replace(/[^A-Za-z0-9._:@-]/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "");
  return (name || `worker-${process.pid}`).slice(0, 100);
}

function positiveInteger(what: string, value: number): number {
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`${what} is a whole number from 1, got ${value}`);
  return value;
}

function within(what: string, value: number, min: number, max: number): number {
  if (typeof value !== "number" || Number.isNaN(value) || value < min || value > max) {
    throw new RangeError(`${what} is from ${min} to ${max}, got ${value}`);
  }
  return value;
}

/** A request refused for what its body holds (422, 413): one of the outcomes a claim
 * carried, perhaps. */
function isRefusal(error: unknown): boolean {
  return error instanceof JobqueueError && (error.status === 422 || error.status === 413);
}
