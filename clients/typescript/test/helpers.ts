/**
 * What the tests share: the server they run against, from the environment (a real
 * `jobqueue api`; tests/acceptance/test_typescript_client.py starts one and sets them):
 *
 *   JOBQUEUE_URL         the API's base URL
 *   JOBQUEUE_TOKEN       scopes jobs:work, jobs:enqueue, jobs:read, payloads:read, jobs:control,
 *                        jobs:signal
 *   JOBQUEUE_TOKEN_OTHER the same scopes, under another name
 *   JOBQUEUE_TOKEN_READ  jobs:read only
 */
import { randomUUID } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";

export function env(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `${name} is not set: the tests run against a real jobqueue API (see test/helpers.ts)`,
    );
  }
  return value;
}

export const url = env("JOBQUEUE_URL");
export const token = env("JOBQUEUE_TOKEN");
export const otherToken = env("JOBQUEUE_TOKEN_OTHER");
export const readToken = env("JOBQUEUE_TOKEN_READ");

/** A queue of the test's own, so that no other test's worker claims its jobs. */
export function queueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** Polls `check` until it returns something other than undefined, or fails after
 * `timeoutMs` naming `what`. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await delay(25);
  }
}

/** A promise with its resolve, for a handler to wait on until the test lets it go. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
