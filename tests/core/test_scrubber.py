"""`core/records/_secrets.py`, the one scrubber: what it removes from text, data and exception chains."""

from __future__ import annotations

import json
import traceback

import pytest

from thena_nb.core.records._secrets import exception_chain, scrub, scrub_data, scrub_exception

KEY = "plain-key-without-shape-31415"


def test_scrub_removes_url_user_info() -> None:
    text = "could not reach https://user:hunter2hunter2@proxy.example.com/v1 (refused)"
    assert scrub(text) == "could not reach https://***@proxy.example.com/v1 (refused)"
    assert scrub("see https://example.com/a@b") == "see https://example.com/a@b"


def test_scrub_data_scrubs_every_string_and_keeps_the_shape() -> None:
    body = {"error": {"message": f"bad {KEY}", "codes": [KEY, 3]}, KEY: (KEY,)}
    assert scrub_data(body, also=[KEY]) == {
        "error": {"message": "bad ***", "codes": ["***", 3]},
        "***": ("***",),
    }


def test_scrub_exception_cleans_the_whole_chain_and_what_each_keeps() -> None:
    try:
        try:
            json.loads(f'{{"key": "{KEY}", oops')
        except ValueError as decode:
            failure = RuntimeError(f"upstream said {KEY}")
            failure.body = {"echo": KEY}  # type: ignore[attr-defined]
            failure.add_note(f"while sending {KEY}")
            raise failure from decode
    except RuntimeError as raised:
        outer = raised
    context = ValueError(f"context {KEY}")
    outer.__context__.__context__ = context  # type: ignore[union-attr]
    scrub_exception(outer, also=[KEY])
    chain = list(exception_chain(outer))
    assert [type(e).__name__ for e in chain] == ["RuntimeError", "JSONDecodeError", "ValueError"]
    assert outer.body == {"echo": "***"}  # type: ignore[attr-defined]
    assert outer.__notes__ == ["while sending ***"]
    for current in chain:
        assert KEY not in repr(current.args) and KEY not in repr(vars(current))
    assert KEY not in "".join(traceback.format_exception(outer))


def test_exception_chain_visits_each_once_even_in_a_cycle() -> None:
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a
    assert list(exception_chain(a)) == [a, b]


@pytest.mark.parametrize("name", ["ANTHROPIC_API_KEY", "MY_SERVICE_TOKEN"])
def test_scrub_exception_removes_secret_environment_values(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(name, KEY)
    exc = ConnectionError(f"refused for {KEY}")
    scrub_exception(exc)
    assert str(exc) == "refused for ***"
