"""Records made on the per-turn path share their dict keys (`types.blank`): smaller, and the
same records as validated ones."""

from __future__ import annotations

import sys

from helpers import add, add_call

from thena_nb import Agent, Workflow, loop, until_answered
from thena_nb.core.report import ReportNode
from thena_nb.core.types import Message, ToolCall, Turn, TurnInfo, blank
from thena_nb.models import ScriptedModel


def _run() -> object:
    agent = Agent("A", model=ScriptedModel([add_call(), add_call(2, 3), "done"]), tools=[add])
    return Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)


def test_the_records_of_a_turn_are_smaller_than_with_dicts_of_their_own() -> None:
    run = _run()
    turn = run.turns[0]  # type: ignore[attr-defined]
    records = [turn, turn.tool_calls[0], *run.history[1:], run.report]  # type: ignore[attr-defined]
    for record in records:
        own = dict(record.__dict__)  # the same keys and values in a dict of its own
        assert sys.getsizeof(record.__dict__) < sys.getsizeof(own), type(record).__name__


def test_they_equal_the_records_validation_makes() -> None:
    """Every field is set, to a valid value: validating a record's dump gives it back."""
    run = _run()
    for turn in run.turns:  # type: ignore[attr-defined]
        assert Turn.model_validate(turn.model_dump()) == turn
        assert TurnInfo.model_validate(turn.info.model_dump()) == turn.info
        for call in turn.tool_calls:
            assert ToolCall.model_validate(call.model_dump()) == call
    for message in run.history:  # type: ignore[attr-defined]
        assert Message.model_validate(message.model_dump()) == message
    report = run.report  # type: ignore[attr-defined]
    assert ReportNode.model_validate(report.model_dump()) == report


def test_blank_gives_a_fresh_dict_each_time() -> None:
    first = blank(TurnInfo)
    first["response"] = "changed"
    second = blank(TurnInfo)
    assert second == dict.fromkeys(TurnInfo.model_fields)
    assert first is not second
