"""What a long-running jobqueue process asks of Python's garbage collector.

A worker or API process makes most of its objects at start-up (modules, the tasks,
the pool, the routes) and keeps them to the end, while every job brings short-lived
objects of its own. Each full collection of the cyclic garbage collector walks every
object the process tracks, long-lived or not: in a drain of 50,000 no-op jobs by one
worker process, its four full collections took 77 to 119 ms of a drain of about 1.3 s,
23 to 39 ms the longest, a pause in which no job starts (docs/benchmarks.md).
``gc.freeze()`` once the process is ready moves what exists then to the permanent
generation, which no collection walks again. A full collection first frees the cyclic
garbage start-up left (an import's, a configuration's), which would otherwise be
frozen with the rest and never freed: one collection, once.

The cost: an object frozen here that later becomes cyclic garbage is never freed. What
start-up makes lives as long as the process, so that is little; an application that
holds a large object graph of its own when its worker starts and drops it later turns
it off (JOBQUEUE_GC_FREEZE).
"""

from __future__ import annotations

import gc

from jobqueue.config import Settings


def freeze_long_lived(settings: Settings) -> None:
    """Move every object tracked now to the permanent generation, if the settings say
    so. Called when a worker has started and when the API serves: again for each, since
    what the second made is as long-lived as what the first did."""
    if settings.gc_freeze:
        gc.collect()
        gc.freeze()
