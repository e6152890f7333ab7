/**
 * Every refusal of the API surfaces as a JobqueueError carrying the server's status and
 * its `detail`; the statuses a caller acts on have a subclass of their own (and a
 * `code`), so that `err instanceof LeaseLostError` or `err.code === "lease_lost"` tells
 * them apart. A request that got no answer at all (connection refused or reset, after
 * the retries) is a ConnectionFailedError, with status 0.
 */
import type { components } from "./schema.js";

export type FieldError = components["schemas"]["FieldError"];

export type ErrorCode =
  | "bad_request" // 400: malformed JSON
  | "unauthorized" // 401: no token, or an unknown, expired or revoked one
  | "forbidden" // 403: the token lacks the scope, or the queue or type
  | "not_found" // 404: no such job (or route)
  | "conflict" // 409: a state the request does not apply to (a retry, a cancel)
  | "lease_lost" // 409 of a write about a leased job: the lease lost its job
  | "gone" // 410: an Idempotency-Key whose job was deleted by retention
  | "too_large" // 413
  | "unsupported_media_type" // 415
  | "invalid" // 422: fields breaking a rule, each named in `fields`
  | "too_many_requests" // 429
  | "unavailable" // 503 (after the retries): the database cannot be reached
  | "server_error" // any other 5xx
  | "http_error" // any other status
  | "connection_failed"; // no answer at all

export interface RequestInfo {
  method: string;
  path: string;
}

/** A refusal of jobqueue's API, or a request that got no answer. */
export class JobqueueError extends Error {
  override name = "JobqueueError";
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  readonly code: ErrorCode;
  /** The answer's `detail` as the server sent it: a message, or a list of field errors. */
  readonly detail: unknown;
  /** The whole body of the answer (parsed JSON, or its text), if any. */
  readonly body: unknown;
  readonly method: string;
  readonly path: string;

  constructor(
    message: string,
    options: {
      status: number;
      code: ErrorCode;
      detail?: unknown;
      body?: unknown;
      request: RequestInfo;
      cause?: unknown;
    },
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status;
    this.code = options.code;
    this.detail = options.detail;
    this.body = options.body;
    this.method = options.request.method;
    this.path = options.request.path;
  }
}

export class BadRequestError extends JobqueueError {
  override name = "BadRequestError";
}
export class UnauthorizedError extends JobqueueError {
  override name = "UnauthorizedError";
}
export class ForbiddenError extends JobqueueError {
  override name = "ForbiddenError";
}
export class NotFoundError extends JobqueueError {
  override name = "NotFoundError";
}
/** 409: the request does not apply to the job's state (retrying a running job, say). */
export class ConflictError extends JobqueueError {
  override name = "ConflictError";
}
/** 409 of a heartbeat, complete, fail, release or log: the lease no longer holds its
 * job (it ran out and the job was rescued, the job ended, or the lease is another
 * token's). Nothing changed; the job is no longer this worker's. */
export class LeaseLostError extends ConflictError {
  override name = "LeaseLostError";
}
export class GoneError extends JobqueueError {
  override name = "GoneError";
}
export class PayloadTooLargeError extends JobqueueError {
  override name = "PayloadTooLargeError";
}
/** 422: `fields` names each field that broke a rule (`max`, `queues.0`, `error.type`...). */
export class ValidationError extends JobqueueError {
  override name = "ValidationError";
  get fields(): FieldError[] {
    return Array.isArray(this.detail) ? (this.detail as FieldError[]) : [];
  }
}
export class TooManyRequestsError extends JobqueueError {
  override name = "TooManyRequestsError";
}
/** 503 once the retries ran out: the database cannot be reached. For an enqueue,
 * `stored` says whether the job may have been stored (false, or "unknown"). */
export class UnavailableError extends JobqueueError {
  override name = "UnavailableError";
  get stored(): false | "unknown" | undefined {
    const body = this.body as { stored?: false | "unknown" | null } | undefined;
    return body?.stored ?? undefined;
  }
}
export class ServerError extends JobqueueError {
  override name = "ServerError";
}
/** No answer: the connection was refused, reset or timed out, after the retries. */
export class ConnectionFailedError extends JobqueueError {
  override name = "ConnectionFailedError";
}

const LEASED_WRITE = /^\/jobs\/\d+\/(heartbeat|complete|fail|release|logs)$/;

/** The error a refusal becomes: its class chosen by its status (and route). */
export function errorFor(status: number, body: unknown, request: RequestInfo): JobqueueError {
  const detail =
    body !== null && typeof body === "object" && "detail" in body
      ? (body as { detail: unknown }).detail
      : body;
  const message = `${request.method} ${request.path}: ${status} ${describe(detail)}`;
  const make = (Class: typeof JobqueueError, code: ErrorCode): JobqueueError =>
    new Class(message, { status, code, detail, body, request });
  switch (status) {
    case 400:
      return make(BadRequestError, "bad_request");
    case 401:
      return make(UnauthorizedError, "unauthorized");
    case 403:
      return make(ForbiddenError, "forbidden");
    case 404:
      return make(NotFoundError, "not_found");
    case 409:
      return LEASED_WRITE.test(request.path.split("?")[0] ?? "")
        ? make(LeaseLostError, "lease_lost")
        : make(ConflictError, "conflict");
    case 410:
      return make(GoneError, "gone");
    case 413:
      return make(PayloadTooLargeError, "too_large");
    case 415:
      return make(JobqueueError, "unsupported_media_type");
    case 422:
      return make(ValidationError, "invalid");
    case 429:
      return make(TooManyRequestsError, "too_many_requests");
    case 503:
      return make(UnavailableError, "unavailable");
    default:
      return status >= 500 ? make(ServerError, "server_error") : make(JobqueueError, "http_error");
  }
}

/** The detail as one line: a message, or each field error as `field: msg`. */
export function describe(detail: unknown): string {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((d) => {
        if (d !== null && typeof d === "object" && "msg" in d) {
          const { field, msg } = d as { field?: unknown; msg: unknown };
          return field === undefined ? String(msg) : `${String(field)}: ${String(msg)}`;
        }
        return JSON.stringify(d);
      })
      .join("; ");
  }
  if (detail === undefined || detail === null) return "(no detail)";
  return JSON.stringify(detail);
}
