"""The attempt tallies, flushed, are what observing each attempt would have given;
labels stay bounded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from jobqueue.db.records import ClaimedJob
from jobqueue.observability.metrics import JOB_BUCKETS, AttemptMetrics, Metrics


def job(type: str, queue: str = "default", waited: float = 0.0) -> ClaimedJob:
    run_at = datetime.now(UTC) - timedelta(seconds=waited)
    return ClaimedJob(1, type, queue, {}, 1, 3, 0, run_at)


def samples(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = generate_latest(registry).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_flushed_tallies_equal_one_observation_per_attempt() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    observer = AttemptMetrics({"send": object()})
    reference = Histogram("reference", "", ["queue", "type"], buckets=JOB_BUCKETS,
                          registry=CollectorRegistry())  # fmt: skip
    durations = [0.0001, 0.004, 0.005, 0.2, 3.0, 7200.0]
    for seconds in durations:
        state = observer.started(job("send"))
        observer.ended(job("send"), state, "completed", seconds, None)
        reference.labels("default", "send").observe(seconds)
    observer.flush(metrics)
    observer.flush(metrics)  # nothing new: nothing added twice

    got = samples(registry, "jobqueue_job_duration_seconds_bucket")
    want = {
        tuple(sorted(s.labels.items())): s.value
        for s in reference.collect()[0].samples
        if s.name == "reference_bucket"
    }
    assert got == want
    count = samples(registry, "jobqueue_job_duration_seconds_count")
    assert count == {(("queue", "default"), ("type", "send")): len(durations)}
    total = samples(registry, "jobqueue_job_duration_seconds_sum")
    assert abs(total[("queue", "default"), ("type", "send")] - sum(durations)) < 1e-9
    finished = samples(registry, "jobqueue_jobs_finished_total")
    assert finished == {
        (("outcome", "completed"), ("queue", "default"), ("type", "send")): len(durations)
    }


def test_an_unregistered_type_is_other_and_a_release_is_no_finish() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    observer = AttemptMetrics({"send": object()})
    for kind in ("user-1234", "user-5678"):
        state = observer.started(job(kind, waited=2.0))
        observer.ended(job(kind), state, "failed", 0.1, RuntimeError("no handler"))
    state = observer.started(job("send"))
    observer.ended(job("send"), state, "released", 0.1, None)
    observer.flush(metrics)

    finished = samples(registry, "jobqueue_jobs_finished_total")
    assert finished == {(("outcome", "failed"), ("queue", "default"), ("type", "other")): 2}
    released = samples(registry, "jobqueue_jobs_released_total")
    assert released == {(("queue", "default"), ("type", "send")): 1}
    durations = samples(registry, "jobqueue_job_duration_seconds_count")
    assert durations == {(("queue", "default"), ("type", "other")): 2}
    waits = samples(registry, "jobqueue_job_wait_seconds_count")
    assert waits == {(("queue", "default"), ("type", "other")): 2,
                     (("queue", "default"), ("type", "send")): 1}  # fmt: skip
    assert (
        samples(registry, "jobqueue_job_wait_seconds_sum")[("queue", "default"), ("type", "other")]
        >= 4.0
    )
