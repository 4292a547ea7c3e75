"""`run.jsonable`: which outputs a run keeps as JSON and which as their repr."""

from __future__ import annotations

import math

import pytest

from thena_nb.core.runs.run import jsonable


@pytest.mark.parametrize("value", ["done", "", 2.5, math.nan, math.inf, True, None, 3, [1, "a"]])
def test_values_json_writes_are_jsonable(value: object) -> None:
    assert jsonable(value)


@pytest.mark.parametrize("value", [{1, 2}, object(), b"bytes", {"a": {1}}])
def test_values_json_cannot_write_are_not(value: object) -> None:
    assert not jsonable(value)


def test_an_int_past_the_digit_limit_is_not_jsonable() -> None:
    # `json.dumps` refuses it (ValueError): the quick path for plain types must not take ints.
    assert not jsonable(10**5000)


class _Text(str):
    pass


def test_a_str_subclass_is_tried_not_assumed() -> None:
    assert jsonable(_Text("x"))
