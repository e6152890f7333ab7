"""Durable jobs (docs/durable.md): steps recorded with their job and returned, not run
again, by any later run of it; a cursor saved for the next attempt; children spawned
at run time and signals from outside, waited for without holding a worker's slot."""

from jobqueue.durable.children import ChildFailed
from jobqueue.durable.signals import SignalRefused, SignalTimeout
from jobqueue.durable.steps import AttemptLost, Durable, DurableRun, Suspended, Waiting
from jobqueue.model.steps import Step

__all__ = [
    "AttemptLost",
    "ChildFailed",
    "Durable",
    "DurableRun",
    "SignalRefused",
    "SignalTimeout",
    "Step",
    "Suspended",
    "Waiting",
]
