"""Records made on the per-turn path share their dict keys (`types.blank`): smaller, and the
same records as validated ones."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from helpers import add, add_call

from thena_nb import Agent, Workflow, loop, until_answered
from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import Message, ToolCall, Turn, TurnInfo, blank
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


def test_records_share_keys_even_when_copied_records_came_first() -> None:
    """A fresh process that loads records and copies them (as resuming or forking a stored
    run does) before its first turn still makes records that share their keys."""
    run = _run()
    records = [*run.turns, *run.turns[0].tool_calls, *run.history, run.report, run.usage]
    dumped = "\n".join(f"{type(r).__name__} {r.model_dump_json()}" for r in records)
    code = textwrap.dedent(
        """
        import sys
        from thena_nb import Agent, Workflow, loop, tool, until_answered
        from thena_nb.core.records.report import ReportNode
        from thena_nb.core.records.types import Message, ToolCall, Turn, Usage
        from thena_nb.models import ScriptedModel, reply

        classes = {c.__name__: c for c in (Message, ReportNode, ToolCall, Turn, Usage)}
        for line in sys.stdin:  # loaded, then copied: before this process made any record
            name, text = line.split(" ", 1)
            classes[name].model_validate_json(text).model_copy(update={})

        @tool
        def add(a: int, b: int) -> int:
            return a + b

        model = ScriptedModel([reply.tool("add", a=1, b=2), "done"])
        agent = Agent("A", model=model, tools=[add])
        run = Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
        for record in [run.turns[0], run.turns[0].tool_calls[0], *run.history[1:], run.report]:
            print(type(record).__name__, sys.getsizeof(record.__dict__),
                  sys.getsizeof(dict(record.__dict__)))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], input=dumped, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 6, out.stdout
    for line in out.stdout.splitlines():
        _, shared, own = line.split()
        assert int(shared) < int(own), line
