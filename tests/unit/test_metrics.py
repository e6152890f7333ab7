"""The attempts a worker ends, added to the metrics in bulk, are what observing each
attempt would have given; labels stay bounded."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from jobqueue.observability.attempt_log import AttemptLog
from jobqueue.observability.metric_definitions import JOB_BUCKETS, Metrics

Labels = tuple[tuple[str, str], ...]


def attempt(
    type: str, outcome: str, seconds: float, waited: float = 0.0, queue: str = "default"
) -> tuple[object, ...]:
    """An entry as the executor appends it: queue, type, run_at, outcome, start, end."""
    start = time.monotonic()
    run_at = datetime.now(UTC) - timedelta(seconds=waited)
    return (queue, type, run_at, outcome, start, start + seconds)


def samples(registry: CollectorRegistry, name: str) -> dict[Labels, float]:
    text = generate_latest(registry).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def reference(values: list[float]) -> dict[Labels, float]:
    histogram = Histogram("reference", "", ["queue", "type"], buckets=JOB_BUCKETS,
                          registry=CollectorRegistry())  # fmt: skip
    for value in values:
        histogram.labels("default", "send").observe(value)
    return {
        tuple(sorted(s.labels.items())): s.value
        for s in histogram.collect()[0].samples
        if s.name == "reference_bucket"
    }


def test_a_flush_observes_what_observing_each_attempt_gives() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    log = AttemptLog({"send": object()})
    durations = [0.0001, 0.004, 0.0049, 0.2, 3.0, 7200.0]  # none on a bound
    waits = [0.002, 0.3, 0.3, 7.0, 100.0, 2000.0]
    pairs = zip(durations, waits, strict=True)
    for d, w in pairs:
        log.entries += attempt("send", "completed", d, w)
    log.flush(metrics)
    log.flush(metrics)  # nothing new: nothing added twice

    duration = samples(registry, "jobqueue_job_duration_seconds_bucket")
    assert duration == reference(durations)
    assert samples(registry, "jobqueue_job_wait_seconds_bucket") == reference(waits)
    key = (("queue", "default"), ("type", "send"))
    assert samples(registry, "jobqueue_job_duration_seconds_count") == {key: len(durations)}
    assert abs(samples(registry, "jobqueue_job_duration_seconds_sum")[key] - sum(durations)) < 1e-6
    assert abs(samples(registry, "jobqueue_job_wait_seconds_sum")[key] - sum(waits)) < 0.5
    finished = samples(registry, "jobqueue_jobs_finished_total")
    assert finished == {(("outcome", "completed"), *key): len(durations)}


def test_an_unregistered_type_is_other_and_a_release_is_no_finish() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    log = AttemptLog({"send": object()})
    for entry in [
        attempt("user-1234", "failed", 0.1, waited=2.0),
        attempt("user-5678", "retried", 0.1, waited=2.0),
        attempt("send", "released", 0.1),
        attempt("send", "completed", 0.1, queue="mail"),
    ]:
        log.entries += entry
    log.flush(metrics)

    assert samples(registry, "jobqueue_jobs_finished_total") == {
        (("outcome", "failed"), ("queue", "default"), ("type", "other")): 1,
        (("outcome", "retried"), ("queue", "default"), ("type", "other")): 1,
        (("outcome", "completed"), ("queue", "mail"), ("type", "send")): 1,
    }
    released = samples(registry, "jobqueue_jobs_released_total")
    assert released == {(("queue", "default"), ("type", "send")): 1}
    assert samples(registry, "jobqueue_job_duration_seconds_count") == {
        (("queue", "default"), ("type", "other")): 2,
        (("queue", "mail"), ("type", "send")): 1,
    }
    waits = samples(registry, "jobqueue_job_wait_seconds_count")
    assert waits == {(("queue", "default"), ("type", "other")): 2,
                     (("queue", "default"), ("type", "send")): 1,
                     (("queue", "mail"), ("type", "send")): 1}  # fmt: skip
    wait_sum = samples(registry, "jobqueue_job_wait_seconds_sum")
    assert abs(wait_sum[("queue", "default"), ("type", "other")] - 4.0) < 0.5


def test_a_wait_the_clocks_make_negative_counts_as_zero() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    log = AttemptLog({"send": object()})
    log.entries += attempt("send", "completed", 0.01, waited=-30.0)  # run_at ahead
    log.flush(metrics)
    key = (("queue", "default"), ("type", "send"))
    assert samples(registry, "jobqueue_job_wait_seconds_sum") == {key: 0.0}
    buckets = samples(registry, "jobqueue_job_wait_seconds_bucket")
    assert buckets[(("le", "0.005"), *key)] == 1


def test_jobs_waiting_for_a_handler_name_at_most_twenty_types_of_a_queue() -> None:
    """Their types are whatever was stored: past 20 of one queue, the fewest are summed
    as "other", so that no client can make a series per type it invents."""
    from jobqueue.observability.metrics import capped_types

    rows = [("default", f"t{n:02}", n + 1) for n in range(25)] + [("mail", "x", 4)]
    capped = capped_types(rows)
    assert capped[("default", "other")] == 1 + 2 + 3 + 4 + 5  # t00..t04, the fewest jobs
    assert capped[("default", "t24")] == 25
    assert ("default", "t04") not in capped
    assert capped[("mail", "x")] == 4
    assert len(capped) == 20 + 1 + 1
    assert sum(capped.values()) == sum(count for _, _, count in rows)
