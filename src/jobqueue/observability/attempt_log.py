"""The attempts a worker ends, added to the metrics in bulk (``AttemptLog``), and the
observing of many sorted values at once (``observe_sorted``), which the claims' times
use too.

The hot path is the attempt, tens of thousands a second for no-op jobs, and every
call on it shows. So metrics are not an attempt observer (its two calls per attempt,
with the executor's around them, cost more than the budget of 5% of a no-op job):
the executor appends each ended attempt to a list (``Executor.attempt_log``), and
four times a second the list is taken apart into columns, sorted and bisected into
the histograms' buckets, with C doing the per-attempt work. prometheus-client's own
calls (a lock and a label lookup each) would cost about a fifth of a no-op job's time.
"""

from __future__ import annotations

import collections
import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from datetime import datetime
from operator import sub
from time import monotonic
from time import time as now
from typing import Any

from prometheus_client import Histogram

from jobqueue.observability.metric_definitions import JOB_BUCKETS, OTHER, Metrics


class AttemptLog:
    """The attempts a worker's executor ended since the last flush, as it adds them to
    ``entries``, six items each (queue, type, run_at, outcome, monotonic start and
    end), added to the metrics in bulk: columns sliced, mapped and sorted in C, then
    bisected per bucket."""

    def __init__(self, tasks: Mapping[str, Any]) -> None:
        self._tasks = tasks
        self.entries: list[Any] = []

    def flush(self, metrics: Metrics) -> None:
        if not self.entries:
            return
        entries = self.entries[:]
        self.entries.clear()
        columns = tuple(entries[i::FIELDS] for i in range(FIELDS))
        queues, types = columns[0], columns[1]
        n = len(queues)
        if queues.count(queues[0]) == n and types.count(types[0]) == n:  # the usual batch
            self._add(metrics, columns)
            return
        groups: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(zip(queues, types, strict=True)):
            groups.setdefault(key, []).append(i)
        for rows in groups.values():
            self._add(metrics, tuple([column[i] for i in rows] for column in columns))

    def _add(self, metrics: Metrics, columns: tuple[Any, ...]) -> None:
        """Add the attempts of one (queue, type), as columns."""
        queues, types, run_ats, outcomes, starts, ends = columns
        queue, kind = queues[0], types[0] if types[0] in self._tasks else OTHER
        counts = collections.Counter(outcomes)
        for outcome, n in counts.items():
            if outcome == "released":
                metrics.released.labels(queue, kind).inc(n)
            else:
                metrics.finished.labels(queue, kind, outcome).inc(n)
        # A wait is its start (monotonic) plus this offset, minus its run_at (wall
        # clock): the offset is added to the bounds and the sum, not to every wait.
        offset = now() - monotonic()
        waits = sorted(map(sub, starts, map(TIMESTAMP, run_ats)))
        observe_sorted(metrics.wait.labels(queue, kind), waits, shift=offset, clamp=True)
        if counts["released"]:  # stopped by shutdown: no run time to speak of
            ran = [i for i, outcome in enumerate(outcomes) if outcome != "released"]
            starts, ends = [starts[i] for i in ran], [ends[i] for i in ran]
        if ends:
            observe_sorted(metrics.duration.labels(queue, kind), sorted(map(sub, ends, starts)))


TIMESTAMP = datetime.timestamp
FIELDS = 6  # of an attempt in AttemptLog.entries


def observe_sorted(
    histogram: Histogram,
    values: list[float],
    *,
    buckets: Sequence[float] = JOB_BUCKETS,
    shift: float = 0.0,
    clamp: bool = False,
) -> None:
    """Observe each of ``values`` (sorted) plus ``shift`` in a labelled histogram of
    ``buckets``, all at once; ``clamp``: a negative one as 0 (a wait, when the clocks
    disagree). prometheus-client observes one value at a time; its bucket and sum
    values (``_buckets``, ``_sum``, files in multiprocess mode) take any amount."""
    below = 0
    for i, bound in enumerate(buckets):
        upto = bisect_right(values, bound - shift)
        if upto > below:
            histogram._buckets[i].inc(upto - below)
            below = upto
    kept = values[bisect_left(values, -shift) :] if clamp else values
    histogram._sum.inc(math.fsum(kept) + len(kept) * shift)
