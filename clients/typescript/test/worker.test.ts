/**
 * Worker against a real jobqueue API: a handler's result completes its job, a thrown
 * error fails it (retried, or failed for good), a JobSnooze runs it again later, progress shows with the job, a cancel
 * reaches the handler's signal, outcomes go in batches (most with the next claim), a
 * refused claim ends run(), and stop() drains: running handlers finish, those past the
 * grace period are aborted and their jobs handed back.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  Client,
  ForbiddenError,
  JobCancelledError,
  JobFailure,
  JobSnooze,
  Worker,
  WorkerShutdownError,
  type JobContext,
  type WorkerOptions,
} from "../src/index.js";
import { gate, queueName, readToken, token, until, url } from "./helpers.js";

const client = new Client({ url, token });

/** A worker of the test's own queue, running until the test ends. */
async function running(
  t: { after: (fn: () => Promise<void>) => void },
  options: Partial<WorkerOptions>,
  register: (worker: Worker) => void,
): Promise<{ worker: Worker; done: Promise<void> }> {
  const worker = new Worker({
    url,
    token,
    queues: [queueName("worker")],
    concurrency: 5,
    waitSeconds: 5,
    handleSignals: false,
    logger: null,
    ...options,
  });
  register(worker);
  const done = worker.run();
  t.after(async () => {
    await worker.stop({ graceSeconds: 0 });
    await done.catch(() => undefined);
  });
  return { worker, done };
}

describe("Worker", () => {
  test("a handler's result completes its job", async (t) => {
    const queue = queueName("complete");
    const seen: JobContext["job"][] = [];
    await running(t, { queues: [queue] }, (w) =>
      w.register<{ w: number }>("resize", async (payload, ctx) => {
        seen.push(ctx.job);
        return { width: payload.w * 2 };
      }),
    );
    const job = await client.enqueue("resize", { w: 21 }, { queue });
    const done = await client.wait(job.id, { timeoutSeconds: 30 });
    assert.equal(done.status, "completed");
    assert.deepEqual(done.result, { width: 42 });
    assert.equal(done.attempts, 1);
    assert.equal(seen[0]?.id, job.id);
    assert.equal(seen[0]?.attempt, 1);
    assert.equal(seen[0]?.queue, queue);
  });

  test("a thrown error fails the attempt with its name, message and stack", async (t) => {
    const queue = queueName("fail");
    class ResizeError extends Error {
      override name = "ResizeError";
      retryInSeconds = 0; // retried at once
    }
    await running(t, { queues: [queue] }, (w) =>
      w.register("resize", async () => {
        throw new ResizeError("too wide");
      }),
    );
    const job = await client.enqueue("resize", {}, { queue, maxAttempts: 2 });
    const done = await client.wait(job.id, { timeoutSeconds: 30 });
    assert.equal(done.status, "failed");
    assert.equal(done.attempts, 2);
    assert.equal(done.last_error, "ResizeError: too wide");
    const attempts = await client.attempts(job.id);
    assert.deepEqual(
      attempts.map((a) => a.error),
      ["ResizeError: too wide", "ResizeError: too wide"],
    );
    assert.match(attempts[0]?.traceback ?? "", /ResizeError: too wide\n\s+at /);
  });

  test("a JobFailure with discard fails the job for good, attempts left or not", async (t) => {
    const queue = queueName("discard");
    await running(t, { queues: [queue] }, (w) =>
      w.register("resize", () => {
        throw new JobFailure("bad input", { discard: true });
      }),
    );
    const job = await client.enqueue("resize", {}, { queue, maxAttempts: 5 });
    const done = await client.wait(job.id, { timeoutSeconds: 30 });
    assert.equal(done.status, "failed");
    assert.equal(done.attempts, 1);
    assert.equal(done.last_error, "JobFailure: bad input");
  });

  test("a JobSnooze runs the job again later, its attempt not counted", async (t) => {
    const queue = queueName("snooze");
    let runs = 0;
    const { worker } = await running(t, { queues: [queue] }, (w) =>
      w.register("resize", () => {
        runs++;
        if (runs === 1) throw new JobSnooze(0.2);
        return { runs };
      }),
    );
    const job = await client.enqueue("resize", {}, { queue, maxAttempts: 1 });
    const done = await client.wait(job.id, { timeoutSeconds: 30 });
    assert.equal(done.status, "completed");
    assert.equal(done.attempts, 1); // one attempt allowed, and it was not spent
    assert.deepEqual(done.result, { runs: 2 });
    assert.equal(worker.stats.snoozed, 1);
    assert.throws(() => new JobSnooze(-1), RangeError);
  });

  test("progress shows with the job while it runs", async (t) => {
    const queue = queueName("progress");
    const release = gate();
    await running(t, { queues: [queue] }, (w) =>
      w.register("resize", async (_payload, ctx) => {
        ctx.progress(0.5, "half way");
        await release.promise;
        return "done";
      }),
    );
    const job = await client.enqueue("resize", {}, { queue });
    const shown = await until("progress shown", async () => {
      const now = await client.get(job.id);
      return now.progress?.fraction === 0.5 ? now : undefined;
    });
    assert.equal(shown.status, "running");
    assert.equal(shown.progress?.message, "half way");
    release.open();
    assert.equal((await client.wait(job.id, { timeoutSeconds: 30 })).status, "completed");
  });

  test("a cancel reaches the running handler's signal; the job ends cancelled", async (t) => {
    const queue = queueName("cancel");
    const started = gate();
    let reason: unknown;
    await running(t, { queues: [queue], leaseSeconds: 1.5 }, (w) =>
      w.register("resize", async (_payload, ctx) => {
        started.open();
        await new Promise((resolve) =>
          ctx.signal.addEventListener("abort", resolve, { once: true }),
        );
        reason = ctx.signal.reason;
        return "stopped early";
      }),
    );
    const job = await client.enqueue("resize", {}, { queue });
    await started.promise;
    const asked = await client.cancel(job.id);
    assert.equal(asked.status, "running");
    const done = await client.wait(job.id, { timeoutSeconds: 30 });
    assert.equal(done.status, "cancelled");
    assert.ok(reason instanceof JobCancelledError, String(reason));
  });

  test("outcomes go in batches, most of them with the next claim, and every job completes once", async (t) => {
    const queue = queueName("batch");
    const calls: string[] = [];
    let sent = 0; // outcomes in the requests' bodies
    let carried = 0; // of them, those a claim carried
    const counting: typeof fetch = (input, init) => {
      const path = new URL(String(input)).pathname;
      calls.push(path);
      if (path === "/claims" || path === "/outcomes") {
        const n = (JSON.parse(String(init?.body)) as { outcomes?: unknown[] }).outcomes?.length;
        sent += n ?? 0;
        if (path === "/claims") carried += n ?? 0;
      }
      return fetch(input, init);
    };
    // All due before the worker starts: each claim fills the slots its last batch freed.
    const ids = [];
    for (let n = 0; n < 200; n++) ids.push((await client.enqueue("count", { n }, { queue })).id);
    const { worker } = await running(
      t,
      { queues: [queue], concurrency: 20, fetch: counting },
      (w) => w.register<{ n: number }>("count", async (payload) => ({ n: payload.n })),
    );
    for (const [n, id] of ids.entries()) {
      const done = await client.wait(id, { timeoutSeconds: 60 });
      assert.equal(done.status, "completed");
      assert.deepEqual(done.result, { n });
      assert.equal(done.attempts, 1);
    }
    await until("all reported", () => (worker.stats.completed === 200 ? true : undefined));
    const outcomes = calls.filter((c) => c === "/outcomes").length;
    assert.ok(outcomes < 200, `200 outcomes in ${outcomes} calls`);
    assert.equal(sent, 200); // each once
    assert.ok(carried > 100, `${carried} of 200 outcomes carried by claims`);
    assert.equal(calls.filter((c) => /^\/jobs\/\d+\/(complete|fail)$/.test(c)).length, 0);
  });

  test("a result that is not JSON, or that the server cannot store, fails its attempt alone", async (t) => {
    const queue = queueName("bad-results");
    const release = gate();
    await running(t, { queues: [queue], concurrency: 3 }, (w) =>
      w.register<{ kind: string }>("result", async (payload) => {
        await release.promise; // the three end together, their outcomes in one batch
        if (payload.kind === "bigint") return { n: 1n };
        if (payload.kind === "nul") return { text: "a\u0000b" };
        return { fine: true };
      }),
    );
    const ids: Record<string, number> = {};
    for (const kind of ["bigint", "nul", "fine"]) {
      ids[kind] = (await client.enqueue("result", { kind }, { queue, maxAttempts: 1 })).id;
    }
    await until("all three running", async () => {
      const states = await Promise.all(Object.values(ids).map((id) => client.get(id)));
      return states.every((j) => j.status === "running") ? true : undefined;
    });
    release.open();
    const fine = await client.wait(ids.fine!, { timeoutSeconds: 30 });
    assert.deepEqual([fine.status, fine.result], ["completed", { fine: true }]);
    const bigint = await client.wait(ids.bigint!, { timeoutSeconds: 30 });
    assert.equal(bigint.status, "failed");
    assert.match(bigint.last_error ?? "", /^InvalidResultError: the result is not JSON/);
    const nul = await client.wait(ids.nul!, { timeoutSeconds: 30 });
    assert.equal(nul.status, "failed");
    assert.match(nul.last_error ?? "", /^InvalidResultError: .*result/);
    // Their outcomes rode on a claim, which the server refused for the NUL: the worker
    // sent them again on their own, and claims on.
    const after = await client.enqueue("result", { kind: "fine" }, { queue });
    assert.equal((await client.wait(after.id, { timeoutSeconds: 30 })).status, "completed");
  });

  test("a refused claim (403) ends run() with its error", async () => {
    const worker = new Worker({
      url,
      token: readToken,
      queues: [queueName("refused")],
      handleSignals: false,
      logger: null,
    });
    worker.register("resize", () => null);
    const error = await worker.run().catch((e: unknown) => e);
    assert.ok(error instanceof ForbiddenError, String(error));
  });

  test("stop() lets running handlers finish and reports them", async (t) => {
    const queue = queueName("drain");
    const started = gate();
    const release = gate();
    const { worker, done } = await running(t, { queues: [queue], graceSeconds: 60 }, (w) =>
      w.register("resize", async () => {
        started.open();
        await release.promise;
        return "finished";
      }),
    );
    const job = await client.enqueue("resize", {}, { queue });
    await started.promise;
    const stopped = worker.stop();
    let ended = false;
    void done.then(() => (ended = true));
    assert.equal((await client.get(job.id)).status, "running");
    assert.equal(ended, false);
    release.open();
    await stopped;
    await done;
    const shown = await client.get(job.id);
    assert.deepEqual([shown.status, shown.result], ["completed", "finished"]);
    // Stopped, it claims nothing more.
    const later = await client.enqueue("resize", {}, { queue });
    assert.equal((await client.wait(later.id, { timeoutSeconds: 0.5 })).status, "pending");
  });

  test("past the grace period, handlers are aborted and their jobs handed back", async (t) => {
    const queue = queueName("abandon");
    const started = gate();
    let reason: unknown;
    const { worker, done } = await running(t, { queues: [queue], graceSeconds: 0.2 }, (w) =>
      w.register("resize", async (_payload, ctx) => {
        started.open();
        await new Promise((resolve) =>
          ctx.signal.addEventListener("abort", resolve, { once: true }),
        );
        reason = ctx.signal.reason;
        return "too late"; // not reported: the job is another worker's to run
      }),
    );
    const job = await client.enqueue("resize", {}, { queue });
    await started.promise;
    await worker.stop();
    await done;
    assert.ok(reason instanceof WorkerShutdownError, String(reason));
    assert.deepEqual([worker.stats.released, worker.stats.abandoned], [1, 0]);
    const shown = await client.get(job.id);
    // Pending again at once, the interrupted attempt not counted.
    assert.deepEqual([shown.status, shown.attempts, shown.result], ["pending", 0, null]);
  });

  test("ctx.log lines are kept with the attempt (where the server has the log route)", async (t) => {
    const document = (await (
      await fetch(`${url}/openapi.json`, { headers: { Authorization: `Bearer ${token}` } })
    ).json()) as {
      paths: Record<string, unknown>;
    };
    if (!("/jobs/{job_id}/logs" in document.paths)) {
      t.skip("this server has no POST /jobs/{id}/logs");
      return;
    }
    const queue = queueName("logs");
    await running(t, { queues: [queue] }, (w) =>
      w.register("resize", async (payload, ctx) => {
        ctx.log("resizing", payload);
        throw new JobFailure("for the record", { discard: true });
      }),
    );
    const job = await client.enqueue("resize", { path: "a.png" }, { queue });
    assert.equal((await client.wait(job.id, { timeoutSeconds: 30 })).status, "failed");
    const [attempt] = await client.attempts(job.id);
    assert.match(attempt?.log ?? "", /resizing \{ path: 'a\.png' \}/);
  });
});
