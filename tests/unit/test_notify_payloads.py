"""The pending-jobs NOTIFY's payload, as workers read it (migration 0011)."""

from __future__ import annotations

import pytest

from jobqueue.db.sql import new_jobs


@pytest.mark.parametrize(
    ("payload", "read"),
    [
        ("1764590400000000 default", ("default", 1764590400000000)),
        ("-5 old", ("old", -5)),  # before 1970: still a time
        ("* mail", ("mail", None)),  # anywhere: look from the start
        ("1 a queue with spaces", ("a queue with spaces", 1)),
        ("default", ("default", None)),  # a bare name: anywhere
        ("x y", ("x y", None)),  # not a time: a bare name
    ],
)
def test_a_payload_names_its_queue_and_when_its_first_job_fell_due(
    payload: str, read: tuple[str, int | None]
) -> None:
    assert new_jobs(payload) == read
