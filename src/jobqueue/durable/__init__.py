"""Durable jobs (docs/durable.md): steps recorded with their job and returned, not run
again, by any later run of it, and a cursor saved for the next attempt."""

from jobqueue.durable.steps import AttemptLost, Durable, DurableRun, Waiting
from jobqueue.model.steps import Step

__all__ = ["AttemptLost", "Durable", "DurableRun", "Step", "Waiting"]
