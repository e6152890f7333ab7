/**
 * The whole use in one process: enqueue a job, run a worker for it, wait for its end.
 *
 *   JOBQUEUE_URL=http://127.0.0.1:5001 JOBQUEUE_TOKEN=... node build/examples/quickstart.js
 *
 * (after `npm run build:test`, which compiles the examples too). The token needs the
 * scopes jobs:enqueue, jobs:read and jobs:work.
 */
import { randomUUID } from "node:crypto";

import { Client, Worker } from "../src/index.js";

const url = process.env.JOBQUEUE_URL ?? "http://127.0.0.1:5001";
const token = process.env.JOBQUEUE_TOKEN;

const worker = new Worker({ url, token, queues: ["images"], concurrency: 10 });
worker.register<{ path: string }>("resize", async (payload, ctx) => {
  ctx.progress(0.5, "half way");
  ctx.log("resizing", payload.path);
  if (ctx.signal.aborted) return;
  return { ok: true, path: payload.path };
});
const running = worker.run();

const client = new Client({ url, token });
const job = await client.enqueue(
  "resize",
  { path: "a.png" },
  { queue: "images", delaySeconds: 1, idempotencyKey: randomUUID() },
);
const done = await client.wait(job.id, { timeoutSeconds: 30 });
console.log(`job ${done.id}: ${done.status}`, done.result);

await worker.stop();
await running;
