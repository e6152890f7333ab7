"""A new job, from its request to its row: the request's form (``new_job``), the row
built from it with its task's defaults (``rows``), stored alone or batched with
concurrent ones (``enqueuer``), and remembered by an idempotency key
(``idempotency``). The options themselves, and the rules each obeys, are
jobqueue.model.options and jobqueue.model.fields: every layer checks them."""
