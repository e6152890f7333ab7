/**
 * Client and WorkClient against a real jobqueue API: enqueue with its options, get,
 * wait, and every refusal as its typed error (401, 403, 404, 409, 422); and, against a
 * local stand-in server, that transient failures are retried and a 4xx never is.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import {
  Client,
  ConflictError,
  ConnectionFailedError,
  ForbiddenError,
  JobqueueError,
  LeaseLostError,
  NotFoundError,
  UnauthorizedError,
  UnavailableError,
  ValidationError,
  WorkClient,
} from "../src/index.js";
import { otherToken, queueName, readToken, token, url } from "./helpers.js";

const client = new Client({ url, token });
const work = new WorkClient({ url, token });

describe("enqueue, get and wait", () => {
  test("enqueue stores the job with its options, get shows it", async () => {
    const queue = queueName("options");
    const before = Date.now();
    const job = await client.enqueue(
      "resize",
      { path: "a.png" },
      { queue, priority: 3, maxAttempts: 5, delaySeconds: 60, concurrencyKey: "user-1" },
    );
    assert.equal(job.type, "resize");
    assert.deepEqual(job.payload, { path: "a.png" });
    assert.equal(job.queue, queue);
    assert.equal(job.status, "pending");
    assert.equal(job.priority, 3);
    assert.equal(job.max_attempts, 5);
    assert.equal(job.concurrency_key, "user-1");
    assert.ok(
      Date.parse(job.run_at) >= before + 50_000,
      `run_at ${job.run_at} is about a minute on`,
    );
    const shown = await client.get(job.id);
    assert.equal(shown.id, job.id);
    assert.equal(shown.status, "pending");

    const at = new Date(Date.now() + 3_600_000);
    const later = await client.enqueue("resize", {}, { queue, runAt: at });
    assert.equal(Date.parse(later.run_at), at.getTime());
  });

  test("an Idempotency-Key gets the job its first request stored; reused for another, a 422", async () => {
    const queue = queueName("idem");
    const idempotencyKey = randomUUID();
    const first = await client.enqueue("resize", { n: 1 }, { queue, idempotencyKey });
    const again = await client.enqueue("resize", { n: 1 }, { queue, idempotencyKey });
    assert.equal(again.id, first.id);
    const other = await client
      .enqueue("resize", { n: 2 }, { queue, idempotencyKey })
      .catch((e: unknown) => e);
    assert.ok(other instanceof ValidationError, String(other));
    assert.deepEqual(
      other.fields.map((f) => f.field),
      ["Idempotency-Key"],
    );
  });

  test("a unique key taken answers the job that holds it", async () => {
    const queue = queueName("unique");
    const uniqueKey = randomUUID();
    const first = await client.enqueue("resize", {}, { queue, uniqueKey });
    const second = await client.enqueue("resize", {}, { queue, uniqueKey });
    assert.equal(second.id, first.id);
  });

  test("wait answers the job as it is once the timeout passed", async () => {
    const job = await client.enqueue("resize", {}, { queue: queueName("nobody") });
    const started = Date.now();
    const waited = await client.wait(job.id, { timeoutSeconds: 0.5 });
    assert.equal(waited.status, "pending");
    assert.ok(Date.now() - started >= 400, "it waited");
  });

  test("wait answers as soon as the job ended, with its result", async () => {
    const queue = queueName("wait");
    const job = await client.enqueue("resize", { w: 10 }, { queue });
    const waiting = client.wait(job.id, { timeoutSeconds: 60 });
    const [claimed] = await work.claim({ worker: "waiter", queues: [queue], wait_seconds: 10 });
    assert.ok(claimed);
    await work.complete(claimed.lease, { width: 10 });
    const done = await waiting;
    assert.equal(done.status, "completed");
    assert.deepEqual(done.result, { width: 10 });
  });

  test("a signal is kept for a job that has not ended, refused for one that has", async () => {
    const job = await client.enqueue("approve", {}, { queue: queueName("signal") });
    const sent = await client.sendSignal(job.id, "approved", { by: "ana" });
    assert.equal(sent.job_id, job.id);
    assert.equal(sent.name, "approved");
    assert.ok(sent.id > 0);
    await client.cancel(job.id);
    const ended = await client.sendSignal(job.id, "approved").catch((e: unknown) => e);
    assert.ok(ended instanceof ConflictError, String(ended));
    assert.equal(ended.status, 409);
    const missing = await client.sendSignal(2 ** 40, "approved").catch((e: unknown) => e);
    assert.ok(missing instanceof NotFoundError, String(missing));
    const bad = await client.sendSignal(job.id, "").catch((e: unknown) => e);
    assert.ok(bad instanceof ValidationError, String(bad));
    assert.deepEqual(
      bad.fields.map((f) => f.field),
      ["name"],
    );
  });

  test("cancel ends a pending job at once", async () => {
    const job = await client.enqueue("resize", {}, { queue: queueName("cancel") });
    const cancelled = await client.cancel(job.id);
    assert.equal(cancelled.status, "cancelled");
    assert.equal((await client.wait(job.id, { timeoutSeconds: 5 })).status, "cancelled");
  });
});

describe("refusals are typed errors", () => {
  test("401: an unknown token", async () => {
    const error = await new Client({ url, token: "jq_not-a-token" })
      .get(1)
      .catch((e: unknown) => e);
    assert.ok(error instanceof UnauthorizedError, String(error));
    assert.ok(error instanceof JobqueueError);
    assert.equal(error.status, 401);
    assert.equal(error.code, "unauthorized");
    const claim = await new WorkClient({ url }).claim({ worker: "w" }).catch((e: unknown) => e);
    assert.ok(claim instanceof UnauthorizedError, String(claim));
  });

  test("403: a token without the scope", async () => {
    const reader = new Client({ url, token: readToken });
    const enqueue = await reader.enqueue("resize").catch((e: unknown) => e);
    assert.ok(enqueue instanceof ForbiddenError, String(enqueue));
    assert.equal(enqueue.status, 403);
    const claim = await new WorkClient({ url, token: readToken })
      .claim({ worker: "w", queues: [queueName("forbidden")] })
      .catch((e: unknown) => e);
    assert.ok(claim instanceof ForbiddenError, String(claim));
    assert.match(String(claim.detail), /jobs:work/);
  });

  test("404: no such job", async () => {
    const error = await client.get(2 ** 53 - 1).catch((e: unknown) => e);
    assert.ok(error instanceof NotFoundError, String(error));
    assert.equal(error.status, 404);
    assert.equal(typeof error.detail, "string");
  });

  test("409: a stale lease (its job ended, or under another token), and a state that does not apply", async () => {
    const queue = queueName("stale");
    const job = await client.enqueue("resize", {}, { queue });
    const [claimed] = await work.claim({ worker: "first", queues: [queue] });
    assert.ok(claimed);
    const stolen = await new WorkClient({ url, token: otherToken })
      .complete(claimed.lease, "stolen")
      .catch((e: unknown) => e);
    assert.ok(stolen instanceof LeaseLostError, String(stolen));
    assert.equal(stolen.status, 409);
    assert.equal(stolen.code, "lease_lost");

    assert.deepEqual(await work.complete(claimed.lease, { n: 1 }), {
      id: job.id,
      status: "completed",
      retry_in_seconds: null,
    });
    // The same completion sent again (its answer lost): answered as applied, the first
    // result kept.
    assert.deepEqual(await work.complete(claimed.lease, "late"), {
      id: job.id,
      status: "completed",
      retry_in_seconds: null,
    });
    for (const late of [
      () => work.fail(claimed.lease, { type: "Late" }),
      () => work.heartbeat(claimed.lease),
    ]) {
      const error = await late().catch((e: unknown) => e);
      assert.ok(error instanceof LeaseLostError, String(error));
      assert.match(String(error.detail), /nothing changed/);
    }
    const [renewal] = await work.heartbeats([claimed.lease]);
    assert.equal(renewal?.ok, false);
    assert.deepEqual((await client.get(job.id)).result, { n: 1 });

    const conflict = await client.cancel(job.id).catch((e: unknown) => e);
    assert.ok(conflict instanceof ConflictError, String(conflict));
    assert.ok(!(conflict instanceof LeaseLostError));
    assert.equal(conflict.status, 409);
  });

  test("422: each field that breaks a rule is named", async () => {
    const enqueue = await client.enqueue("resize", {}, { maxAttempts: 0 }).catch((e: unknown) => e);
    assert.ok(enqueue instanceof ValidationError, String(enqueue));
    assert.equal(enqueue.status, 422);
    assert.deepEqual(
      enqueue.fields.map((f) => f.field),
      ["max_attempts"],
    );
    assert.match(enqueue.message, /max_attempts/);

    const claim = await work
      .claim({ worker: "w", max: 0, queues: ["no spaces"] })
      .catch((e: unknown) => e);
    assert.ok(claim instanceof ValidationError, String(claim));
    assert.deepEqual(claim.fields.map((f) => f.field).sort(), ["max", "queues.0"]);

    const queue = queueName("bad-writes");
    await client.enqueue("resize", {}, { queue });
    const [claimed] = await work.claim({ worker: "w", queues: [queue] });
    assert.ok(claimed);
    const fail = await work.fail(claimed.lease, { type: "" }).catch((e: unknown) => e);
    assert.ok(fail instanceof ValidationError, String(fail));
    assert.deepEqual(
      fail.fields.map((f) => f.field),
      ["error.type"],
    );
    const lease = await work.complete("1.2.w", null).catch((e: unknown) => e);
    assert.ok(lease instanceof JobqueueError, String(lease));
  });
});

describe("retries", () => {
  /** A stand-in server answering each request with the next of `answers`. */
  async function standIn(
    answers: { status: number; body?: unknown; headers?: Record<string, string> }[],
  ): Promise<{ url: string; requests: string[]; close: () => Promise<void> }> {
    const requests: string[] = [];
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      req.on("end", () => {
        requests.push(`${req.method} ${req.url} ${String(req.headers["idempotency-key"] ?? "")}`);
        const answer = answers[Math.min(requests.length - 1, answers.length - 1)]!;
        res.writeHead(answer.status, { "Content-Type": "application/json", ...answer.headers });
        res.end(answer.body === undefined ? "" : JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}`,
      requests,
      close: () => new Promise((resolve) => server.close(() => resolve())),
    };
  }

  const fast = { retries: 4, minDelayMs: 1, maxDelayMs: 20 };
  const job = { id: 7, status: "pending" };

  test("a 503 is retried after its Retry-After, then answered", async () => {
    const server = await standIn([
      {
        status: 503,
        body: { detail: "database unavailable; retry later" },
        headers: { "Retry-After": "0" },
      },
      {
        status: 503,
        body: { detail: "database unavailable; retry later" },
        headers: { "Retry-After": "0" },
      },
      { status: 200, body: job },
    ]);
    try {
      const got = await new Client({ url: server.url, retry: fast }).get(7);
      assert.deepEqual(got, job);
      assert.equal(server.requests.length, 3);
    } finally {
      await server.close();
    }
  });

  test("a 503 still there after the retries is an UnavailableError", async () => {
    const server = await standIn([
      { status: 503, body: { detail: "database unavailable; retry later" } },
    ]);
    try {
      const error = await new Client({ url: server.url, retry: { ...fast, retries: 2 } })
        .get(7)
        .catch((e: unknown) => e);
      assert.ok(error instanceof UnavailableError, String(error));
      assert.equal(error.status, 503);
      assert.equal(server.requests.length, 3);
    } finally {
      await server.close();
    }
  });

  test("a 4xx is never retried", async () => {
    for (const status of [400, 401, 403, 404, 409, 422, 429]) {
      const server = await standIn([
        { status, body: { detail: "no" } },
        { status: 200, body: job },
      ]);
      try {
        const error = await new Client({ url: server.url, retry: fast })
          .get(7)
          .catch((e: unknown) => e);
        assert.ok(error instanceof JobqueueError, String(error));
        assert.equal(error.status, status);
        assert.equal(server.requests.length, 1, `a ${status} was sent once`);
      } finally {
        await server.close();
      }
    }
  });

  test("an enqueue that may be stored is retried only with an Idempotency-Key", async () => {
    const unknown = {
      detail: "database connection lost after the job was sent",
      stored: "unknown",
    };
    let server = await standIn([
      { status: 503, body: unknown },
      { status: 201, body: job },
    ]);
    try {
      const error = await new Client({ url: server.url, retry: fast })
        .enqueue("x")
        .catch((e: unknown) => e);
      assert.ok(error instanceof UnavailableError, String(error));
      assert.equal(error.stored, "unknown");
      assert.equal(server.requests.length, 1);
    } finally {
      await server.close();
    }
    server = await standIn([
      { status: 503, body: unknown },
      { status: 201, body: job },
    ]);
    try {
      const got = await new Client({ url: server.url, retry: fast }).enqueue(
        "x",
        {},
        { idempotencyKey: "k-1" },
      );
      assert.deepEqual(got, job);
      assert.deepEqual(server.requests, ['POST /jobs "k-1"', 'POST /jobs "k-1"']);
    } finally {
      await server.close();
    }
    server = await standIn([
      {
        status: 503,
        body: { detail: "database unavailable; nothing stored, retry later", stored: false },
      },
      { status: 201, body: job },
    ]);
    try {
      assert.deepEqual(await new Client({ url: server.url, retry: fast }).enqueue("x"), job);
      assert.equal(server.requests.length, 2);
    } finally {
      await server.close();
    }
  });

  test("a refused connection is retried, then a ConnectionFailedError", async () => {
    const server = await standIn([{ status: 200, body: job }]);
    const closed = server.url;
    await server.close();
    const started = Date.now();
    const error = await new Client({
      url: closed,
      retry: { retries: 3, minDelayMs: 50, maxDelayMs: 50 },
    })
      .enqueue("x")
      .catch((e: unknown) => e);
    assert.ok(error instanceof ConnectionFailedError, String(error));
    assert.equal(error.status, 0);
    assert.match(error.message, /ECONNREFUSED/);
    assert.ok(Date.now() - started >= 3 * 25, "it was retried, with a delay");
  });
});
