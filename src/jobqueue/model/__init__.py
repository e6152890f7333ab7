"""The records every layer shares, and nothing else: jobs, attempts, workers and queues
(``job``), a queue's limits (``limits``), audit entries (``audit``), API tokens and the
principal a request acts as (``tokens``), the errors of an unavailable database
(``errors``), and a job's options (``options``) with the rules each obeys
(``fields``). Like River's ``rivertype``, it imports nothing of jobqueue's, so the
database layer (``jobqueue.db``) can return these records without importing any layer
above it (tests/unit/test_structure.py holds both rules)."""
