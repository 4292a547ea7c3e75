"""`reply.text`, `reply.tool` and `reply.calls` build, without validation when their parts
are plainly right, exactly the `Reply` pydantic would validate; anything else is validated
and refused as before."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from thena_nb.core.records.model import Reply
from thena_nb.core.records.types import ToolCall
from thena_nb.models import reply


def validated(**fields: Any) -> Reply:
    return Reply.model_validate(fields)


def test_the_helpers_build_what_validation_builds() -> None:
    assert reply.text("hi") == validated(text="hi", finish_reason="end_turn")
    assert reply.text("hi", input_tokens=3, output_tokens=4, finish_reason="stop") == validated(
        text="hi", finish_reason="stop", input_tokens=3, output_tokens=4
    )
    call = ToolCall(id="", name="add", arguments={"a": 1, "b": 2}, source="native")
    assert reply.tool("add", a=1, b=2) == validated(tool_calls=[call], finish_reason="tool_use")
    made = reply.calls([("add", {"a": 1}), ("add", {"a": 2})], text="two")
    assert made.text == "two" and [c.arguments for c in made.tool_calls] == [{"a": 1}, {"a": 2}]
    assert made.model_dump() == validated(**made.model_dump()).model_dump()
    # JSON round trip: what a store writes of it reads back equal.
    assert Reply.model_validate_json(made.model_dump_json()) == made


def test_each_reply_has_its_own_lists() -> None:
    a, b = reply.tool("add", a=1), reply.tool("add", a=1)
    assert a.tool_calls is not b.tool_calls
    assert a.tool_calls[0].arguments is not b.tool_calls[0].arguments
    args = {"a": 1}
    assert reply.tool("add", args).tool_calls[0].arguments is not args  # a copy


@pytest.mark.parametrize(
    "make",
    [
        lambda: reply.text("hi", input_tokens=-1),
        lambda: reply.text("hi", output_tokens=2**63),
        lambda: reply.text(3),  # type: ignore[arg-type]
        lambda: reply.tool("add", input_tokens=1.5),  # type: ignore[arg-type]
        lambda: reply.calls([(7, {"a": 1})]),  # type: ignore[list-item]
        lambda: reply.calls([("add", {1: "a"})]),  # type: ignore[dict-item]
        lambda: reply.text("hi", finish_reason=5),  # type: ignore[arg-type]
    ],
)
def test_wrong_parts_are_refused_as_validation_refuses_them(make: Any) -> None:
    with pytest.raises(ValidationError):
        make()


def test_a_true_token_count_is_validated_not_taken_as_one() -> None:
    """`True` is an `int` to Python; the fast path takes only real ints, so pydantic
    decides (it takes `True` as 1, as it always did)."""
    assert reply.text("hi", input_tokens=True).input_tokens == 1  # type: ignore[arg-type]
