/**
 * Names for the request and answer types of src/schema.ts (generated from the API's
 * OpenAPI document: `npm run gen-types`), as the client and the worker use them.
 */
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };

type Schemas = components["schemas"];

/** A job as `GET /jobs/{id}` shows it. */
export type Job = Schemas["Job"];
export type JobStatus = Schemas["JobStatus"];
export type NewJob = Schemas["NewJob"];
export type Attempt = Schemas["Attempt"];
/** A signal to a durable job (`POST /signals`), and the answer. */
export type NewSignal = Schemas["NewSignal"];
export type SignalSent = Schemas["SignalSent"];
/** A job a claim handed out, with its lease. */
export type LeasedJob = Schemas["LeasedJob"];
export type ClaimRequest = Schemas["ClaimRequest"];
export type ClaimAnswer = Schemas["ClaimAnswer"];
export type HeartbeatRequest = Schemas["HeartbeatRequest"];
export type HeartbeatAnswer = Schemas["HeartbeatAnswer"];
export type HeartbeatsRequest = Schemas["HeartbeatsRequest"];
export type HeartbeatsAnswer = Schemas["HeartbeatsAnswer"];
export type LeaseRenewal = Schemas["LeaseRenewal"];
export type OutcomeIn = Schemas["OutcomeIn"];
export type OutcomesRequest = Schemas["OutcomesRequest"];
export type OutcomesAnswer = Schemas["OutcomesAnswer"];
export type OutcomeApplied = Schemas["OutcomeApplied"];
export type ErrorIn = Schemas["ErrorIn"];
/** The answer of `complete` and `fail`. */
export type Outcome = Schemas["Outcome"];

/** The states a job ends in. */
export const FINAL_STATES: readonly JobStatus[] = ["completed", "failed", "cancelled"];
