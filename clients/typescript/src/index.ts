/**
 * jobqueue-client: enqueue jobs into jobqueue and wait for them (Client), and run them
 * in Node.js over the HTTP worker protocol (Worker).
 */
export { Client, type ClientOptions, type EnqueueOptions, type WaitOptions } from "./client.js";
export { JobCancelledError, JobFailure, JobSnooze, WorkerShutdownError } from "./outcomes.js";
export { Worker } from "./worker.js";
export type {
  Handler,
  JobContext,
  WorkerLogger,
  WorkerOptions,
  WorkerStats,
} from "./worker-options.js";
export {
  BadRequestError,
  ConflictError,
  ConnectionFailedError,
  ForbiddenError,
  GoneError,
  JobqueueError,
  LeaseLostError,
  NotFoundError,
  PayloadTooLargeError,
  ServerError,
  TooManyRequestsError,
  UnauthorizedError,
  UnavailableError,
  ValidationError,
  type ErrorCode,
  type FieldError,
} from "./errors.js";
export type { ConnectionOptions, RetryOptions } from "./http.js";
export { WorkClient, type CallOptions, type Progress } from "./work.js";
export * from "./types.js";
