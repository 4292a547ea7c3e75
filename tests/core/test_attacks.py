"""Inputs an attacker (or an unlucky model) can choose: each becomes a held call, a failed
call or a clear error, and the run goes on (or is refused before anything is lost)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from thena_nb import Agent, Decision, Workflow, loop, tool, until_answered
from thena_nb.core.parts.tools import MAX_ARGUMENT_DEPTH
from thena_nb.core.records.model import ModelRequest
from thena_nb.models import FunctionModel, ScriptedModel, reply
from thena_nb.store import MemoryRunStore, SqliteRunStore

pytestmark = pytest.mark.anyio


def pay_workflow(ran: list[Any], *, calls: list[dict[str, Any]]) -> Workflow:
    """The README's gate, `amount > 100`, on a model that may leave `amount` out."""

    @tool(gate=lambda call: call.arguments["amount"] > 100)
    def pay(amount: int = 0) -> str:
        """Pay an amount."""
        ran.append(amount)
        return f"paid {amount}"

    def clerk(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return "Done."
        return reply.calls([("pay", c) for c in calls])

    agent = Agent("Clerk", model=FunctionModel(clerk), tools=[pay])
    return Workflow("pay", [loop(steps=[agent], until=until_answered, max_iterations=3)])


# -- a gate that raises holds the call -------------------------------------------------------


def test_a_gate_that_raises_holds_the_call_and_the_run_waits_showing_the_error() -> None:
    ran: list[Any] = []
    wf = pay_workflow(ran, calls=[{}, {"amount": 5}])
    run = wf.run("pay", store=False)
    assert run.status == "waiting" and ran == []
    [held] = run.pending
    assert held.call.arguments == {}
    assert held.gate_error == "KeyError: 'amount'"


async def test_a_gate_that_raises_pauses_a_session_and_a_decision_lets_it_go_on() -> None:
    ran: list[Any] = []
    wf = pay_workflow(ran, calls=[{"amount": 5}])
    s = wf.session("pay", store=False)
    s.gates.append(lambda call: call.arguments["currency"] == "EUR")  # raises on every call
    await s.step()
    [held] = s.pending
    assert held.gate_error == "KeyError: 'currency' (in a `session.gates` predicate)"
    s.decide(held.call.id, Decision.edit({"amount": 7}))
    run = await s.run()
    assert run.status == "finished" and ran == [7]


def test_approve_sees_the_gate_error() -> None:
    seen: list[str | None] = []

    def approve(p: Any) -> Decision:
        seen.append(p.gate_error)
        return Decision.reject("no amount")

    ran: list[Any] = []
    run = pay_workflow(ran, calls=[{}]).run("pay", store=False, approve=approve)
    assert run.status == "finished" and ran == [] and seen == ["KeyError: 'amount'"]
    assert run.turns[0].tool_calls[0].decision == "reject"


# -- fork at the end with inject ---------------------------------------------------------------


def chat(answers: list[str]) -> Workflow:
    return Workflow("chat", [Agent("A", model=ScriptedModel(answers))])


def test_fork_at_the_end_of_a_finished_run_with_inject_is_refused_before_it_runs() -> None:
    run = chat(["one"]).run("hi", store=False)
    with pytest.raises(ValueError, match=r"continue_with") as caught:
        run.fork(len(run.turns), inject=["and then?"], store=False)
    assert "would never reach a model" in str(caught.value)


def test_fork_at_the_end_that_never_reaches_turn_at_says_so_and_keeps_the_fork() -> None:
    """With `changes` the fork might go on past the recorded end; when it does not, the
    injected messages were not sent, and the caller hears it instead of losing them."""
    run = chat(["one"]).run("hi", store=False)
    changes = {"A": {"system": "Be brief."}}
    with pytest.raises(ValueError, match=r"turn 1") as caught:
        run.fork(1, inject=["and then?"], changes=changes, store=False)
    fork = caught.value.run  # type: ignore[attr-defined]
    assert fork.forked_at == 1 and len(fork.turns) == 1
    assert "and then?" not in [m.content for m in fork.history]


def test_fork_at_the_end_of_a_stopped_run_with_inject_goes_on_with_the_message() -> None:
    @tool
    def look() -> str:
        """Look around."""
        return "nothing"

    model = ScriptedModel([reply.tool("look"), "found it"])
    agent = Agent("A", model=model, tools=[look])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)])

    async def first_turn_only() -> Any:
        s = wf.session("go", store=False)
        await s.step()
        s.stop()
        return await s.run()

    run = asyncio.run(first_turn_only())
    assert run.status == "stopped" and len(run.turns) == 1
    fork = run.fork(1, inject=["look harder"], store=False)
    assert fork.status == "finished" and fork.output == "found it"
    assert "look harder" in [m.content for m in model.requests[-1].messages]


# -- tool results and exceptions that cannot be written as they are --------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def one_call(call: Any, *tools: Any) -> Workflow:
    model = ScriptedModel([call, "done"])
    agent = Agent("A", model=model, tools=list(tools))
    return Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=3)])


def test_a_result_with_a_non_utf8_file_name_is_kept_readable_and_stored(tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    os.close(os.open(bytes(folder) + b"/caf\xe9.txt", os.O_CREAT | os.O_WRONLY))

    @tool
    def ls() -> list[str]:
        """List the folder."""
        return os.listdir(folder)

    with SqliteRunStore(tmp_path / "runs.db") as store:
        run = one_call(reply.tool("ls"), ls).run("go", store=store)
        assert run.status == "finished" and run.output == "done"
        call = run.turns[0].tool_calls[0]
        assert call.ok and json.loads(call.result or "") == ["caf\\xe9.txt"]  # the byte
        assert store.load(run.run_id).turns[0].tool_calls[0].result == call.result


def test_a_tool_exception_whose_str_raises_is_a_failed_call(tmp_path: Path) -> None:
    @tool
    def boom() -> str:
        """Fail oddly."""
        raise Unprintable

    with SqliteRunStore(tmp_path / "runs.db") as store:
        run = one_call(reply.tool("boom"), boom).run("go", store=store)
        assert run.status == "finished" and run.output == "done"
        call = run.turns[0].tool_calls[0]
        assert call.ok is False
        assert call.error == (
            "Error: tool 'boom' {} raised Unprintable: <unprintable Unprintable: its `str()` "
            "raised RuntimeError>"
        )
        assert store.load(run.run_id).turns[0].tool_calls[0].error == call.error


def test_arguments_nested_too_deep_are_a_failed_call_and_the_run_is_stored(
    tmp_path: Path,
) -> None:
    ran: list[Any] = []

    @tool
    def take(x: Any = None) -> str:
        """Take anything."""
        ran.append(x)
        return "taken"

    with SqliteRunStore(tmp_path / "runs.db") as store:
        run = one_call(reply.tool("take", x=nested(950)), take).run("go", store=store)
        assert run.status == "finished" and run.output == "done" and ran == []
        call = run.turns[0].tool_calls[0]
        assert call.ok is False
        assert call.error is not None and call.error.startswith(
            f"Error: tool 'take' was not run: its arguments nest deeper than "
            f"{MAX_ARGUMENT_DEPTH} levels"
        )
        loaded = store.load(run.run_id)
        assert loaded.status == "finished"
        assert loaded.turns[0].tool_calls[0].arguments == call.arguments
        # the arguments kept are the model's, cut at the limit
        assert json.dumps(call.arguments).count("[") == MAX_ARGUMENT_DEPTH - 1


def test_arguments_at_the_depth_limit_still_run() -> None:
    ran: list[Any] = []

    @tool
    def take(x: Any = None) -> str:
        """Take anything."""
        ran.append(x)
        return "taken"

    run = one_call(reply.tool("take", x=nested(MAX_ARGUMENT_DEPTH - 1)), take).run(
        "go", store=False
    )
    assert run.turns[0].tool_calls[0].ok and ran == [nested(MAX_ARGUMENT_DEPTH - 1)]


def test_the_depth_check_passes_flat_calls_as_they_are_and_looks_into_any_dict_or_list() -> None:
    """A call whose arguments hold no dict or list is returned as it is; one holding a
    subclass of either (an `OrderedDict`, a tuple) is walked like a plain one."""
    from collections import OrderedDict

    from thena_nb.core.parts.tools import depth_checked
    from thena_nb.core.records.types import ToolCall

    flat = ToolCall(id="c1", name="take", arguments={"a": 1, "b": "two", "c": None})
    assert depth_checked(flat) is flat
    for deep in (OrderedDict(x=nested(950)), {"x": tuple(nested(950))}):
        call = depth_checked(ToolCall(id="c2", name="take", arguments=deep))
        assert call.ok is False and "nest deeper than" in (call.error or "")


# -- a waiting run is not continued past its waiting turn ------------------------------------


def test_continue_with_on_a_waiting_run_is_refused_and_after_resume_it_goes_on() -> None:
    ran: list[Any] = []
    wf = pay_workflow(ran, calls=[{"amount": 500}])
    store = MemoryRunStore()
    run = wf.run("pay", store=store)
    assert run.status == "waiting"
    [held] = run.pending
    with pytest.raises(ValueError, match=rf"waiting for decisions on tool calls '{held.call.id}'"):
        run.continue_with("and then?", store=False)
    done = wf.resume(run.run_id, store=store, decisions={held.call.id: Decision.approve()})
    assert done.status == "finished" and ran == [500]
    more = done.continue_with("thanks", workflow=wf, store=False)  # no longer refused
    assert more.parent_run_id == done.run_id and more.forked_at == len(done.turns) == 2
