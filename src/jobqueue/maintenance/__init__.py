"""Services that one process at a time runs for everyone: the elected leader's work."""

from jobqueue.maintenance.leader import Leader

__all__ = ["Leader"]
