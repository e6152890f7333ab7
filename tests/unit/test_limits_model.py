"""The limits' text forms: rates ("100/m") and JOBQUEUE_LIMITS entries, and the
refusals that name the field."""

from __future__ import annotations

import pytest

from jobqueue.model.limits import Rate, changes_from, parse_entries, parse_rate


@pytest.mark.parametrize(
    ("text", "rate", "shown"),
    [
        ("100/m", Rate(100, 60), "100/m"),
        (" 50 / s ", Rate(50, 1), "50/s"),
        ("5/10s", Rate(5, 10), "5/10s"),
        ("1000/h", Rate(1000, 3600), "1000/h"),
        ("7/120s", Rate(7, 120), "7/2m"),
    ],
)
def test_rates_are_read_and_written_back(text: str, rate: Rate, shown: str) -> None:
    assert parse_rate(text) == rate
    assert str(rate) == shown


@pytest.mark.parametrize("text", ["100", "100/d", "0/s", "-1/s", "x/m", "10/0s", ""])
def test_a_bad_rate_names_its_field(text: str) -> None:
    with pytest.raises(ValueError, match=r"^key_rate_limit: "):
        parse_rate(text, "key_rate_limit")


def test_changes_keep_what_they_do_not_name_and_null_removes() -> None:
    changes = changes_from({"global_limit": 5, "rate_limit": "10/s", "key_limit": None})
    assert changes.columns() == {
        "global_limit": 5, "rate_count": 10, "rate_period": 1, "key_limit": None
    }  # fmt: skip
    assert changes.as_json() == {"global_limit": 5, "rate_limit": "10/s", "key_limit": None}
    for given, field in [({"global_limit": 0}, "global_limit"), ({"global_limit": True},
                         "global_limit"), ({"burst": 1}, "burst"), ({}, "body")]:  # fmt: skip
        with pytest.raises(ValueError, match=f"^{field}: "):
            changes_from(given)


def test_environment_entries() -> None:
    assert parse_entries("mail:global_limit=5,rate_limit=100/m; tenants:key_limit=2;") == {
        "mail": {"global_limit": 5, "rate_limit": "100/m"},
        "tenants": {"key_limit": 2},
    }
    assert parse_entries("mail:global_limit=none") == {"mail": {"global_limit": None}}
    for text, problem in [
        ("mail", "is not QUEUE:LIMIT=VALUE"),
        ("mail:", "is not QUEUE:LIMIT=VALUE"),
        ("mail:global_limit", "is not LIMIT=VALUE"),
        ("mail:rate_limit=5/d", "rate_limit: must be"),
        ("mail:x=1", "x: not a limit"),
    ]:
        with pytest.raises(ValueError, match=problem):
            parse_entries(text)
