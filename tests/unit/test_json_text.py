"""jobqueue.model.json_text calls json's C encoder and scanner directly: it must give
what json gives, text and errors alike, or a stored payload or a refused one changes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobqueue.model.json_text import Encoder, loads


class Flag(int):
    pass


VALUES: list[Any] = [
    {"a": 1, "b": [1, 2.5, None, True, False]},
    {"nested": {"n": [1, {"x": "ü\u2028"}]}, "": ""},
    "é and \ud800",
    1e300,
    10**30,
    (1, 2),
    {1: "an int key", 2.5: "a float key", None: "null", False: "bool"},
    Flag(3),
    {},
    [],
    None,
]

REFUSED: list[Any] = [float("nan"), {"x": float("inf")}, {"x": object()}, {(1, 2): 1}, {1j}]


def standard(ensure_ascii: bool) -> json.JSONEncoder:
    return json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=ensure_ascii)


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("value", VALUES)
def test_encodes_as_json_does(value: Any, ensure_ascii: bool) -> None:
    assert Encoder(ensure_ascii=ensure_ascii).encode(value) == standard(ensure_ascii).encode(value)


@pytest.mark.parametrize("value", REFUSED)
def test_refuses_what_json_refuses_with_its_error(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)) as ours:
        Encoder().encode(value)
    with pytest.raises((TypeError, ValueError)) as theirs:
        standard(True).encode(value)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_a_value_that_holds_itself_is_named_and_leaves_the_encoder_sound() -> None:
    encoder = Encoder()
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference"):
        encoder.encode(loop)
    shared = {"k": 1}
    assert encoder.encode([shared, shared]) == '[{"k":1},{"k":1}]'


@pytest.mark.parametrize(
    "text",
    ['{"a": 1, "b": [1, 2]}', ' {"a":1}', '{"a":1} ', "[1]", '"s"', "1", "null"],
)
def test_decodes_as_json_does(text: str) -> None:
    assert loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "{", '{"a":1}x', "nan", " "])
def test_bad_text_raises_json_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)
