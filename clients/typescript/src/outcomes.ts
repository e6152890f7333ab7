/**
 * What a handler's end becomes: a completion with its JSON result, or a failure with
 * the thrown error's name, message and stack, fitted to what the server stores; and the
 * errors a handler's signal is aborted with.
 */
import { format } from "node:util";

import type { ErrorIn, OutcomeIn } from "./types.js";

/** The reason of a handler's signal when its job was cancelled. */
export class JobCancelledError extends Error {
  override name = "JobCancelledError";
  constructor() {
    super("cancelled while running");
  }
}

/** The reason of a handler's signal when the worker shut down before it finished. */
export class WorkerShutdownError extends Error {
  override name = "WorkerShutdownError";
  constructor() {
    super("the worker shut down before the job ended; its lease runs out and it runs again");
  }
}

/** Thrown by a handler (or any error with `retryInSeconds` or `discard` set): fails the
 * attempt, retried after `retryInSeconds`, or failed for good with `discard`. */
export class JobFailure extends Error {
  override name = "JobFailure";
  readonly retryInSeconds: number | undefined;
  readonly discard: boolean;
  constructor(
    message: string,
    options: { retryInSeconds?: number; discard?: boolean; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.retryInSeconds = options.retryInSeconds;
    this.discard = options.discard ?? false;
  }
}

/** Thrown by a handler that cannot run yet (a partner's API is down, a file is not
 * there yet): the job runs again after `seconds`, its attempt not counted. A job
 * snoozed JOBQUEUE_MAX_SNOOZES times fails instead. */
export class JobSnooze extends Error {
  override name = "JobSnooze";
  readonly seconds: number;
  constructor(seconds: number) {
    if (!Number.isFinite(seconds) || seconds < 0) {
      throw new RangeError(`JobSnooze: seconds must be a finite number from 0, got ${seconds}`);
    }
    super(`snoozed for ${seconds}s`);
    this.seconds = seconds;
  }
}

export function snooze(lease: string, seconds: number): OutcomeIn {
  return { lease, snooze_seconds: seconds };
}

export function completion(lease: string, result: unknown): OutcomeIn {
  let json: string | undefined;
  try {
    json = JSON.stringify(result === undefined ? null : result);
  } catch (error) {
    return failure(
      lease,
      Object.assign(new Error(`the result is not JSON: ${message(error)}`), {
        name: "InvalidResultError",
      }),
      false,
    );
  }
  return { lease, result: json === undefined ? null : (JSON.parse(json) as unknown) };
}

export function failure(lease: string, thrown: unknown, honourOptions = true): OutcomeIn {
  const error: ErrorIn = { type: "Error", message: "", traceback: null };
  let retryIn: unknown;
  let discard: unknown;
  if (thrown instanceof Error || (thrown !== null && typeof thrown === "object")) {
    const e = thrown as {
      name?: unknown;
      message?: unknown;
      stack?: unknown;
      retryInSeconds?: unknown;
      discard?: unknown;
    };
    error.type = typeof e.name === "string" && e.name.trim() !== "" ? e.name : "Error";
    error.message = typeof e.message === "string" ? e.message : format(thrown);
    error.traceback = typeof e.stack === "string" ? e.stack : null;
    retryIn = e.retryInSeconds;
    discard = e.discard;
  } else {
    error.type = typeof thrown;
    error.message = String(thrown);
  }
  error.type = storable(error.type, 200) || "Error";
  error.message = storable(error.message ?? "", 4000);
  if (error.traceback) error.traceback = storable(error.traceback, 100_000);
  const outcome: OutcomeIn = { lease, error };
  if (honourOptions && typeof retryIn === "number" && Number.isFinite(retryIn) && retryIn >= 0) {
    outcome.retry_in_seconds = retryIn;
  }
  if (honourOptions && discard === true) outcome.discard = true;
  return outcome;
}

/** Text PostgreSQL can store, at most `max` characters: no NUL, no half surrogate pair. */
export function storable(text: string, max: number): string {
  const clean = text
    .replace(/\u0000/g, "")
    .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
  if (clean.length <= max) return clean;
  let cut = clean.slice(0, max);
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return cut;
}

export function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
